"""Block efficiency of lossless sampling: what moves acceptance of lattice drafts (issue 13).

    PYTHONPATH=python python bench/decode_sampling.py [--prompts 10] [--max-new-tokens 64]

Uses the shipped model and 4-gram LM (lm_models/), WikiText-2 test prompts, fixed seeds (prompt
i is decoded with seed i by every row). Rows, per sampling setting:

* vanilla drafts (each head sampled from its processed law), block verification: the reference;
* n-gram lattice drafts, one draft, block verification, varying one factor at a time: support
  (top-k only vs full support), the sampling LM weight ``sample_alpha``, and (with top-p) whether
  the heads get the target's processing or only its temperature;
* several drafts: p sampled drafts (verifier "multi", recursive rejection; "multi-wor", distinct
  first tokens drawn without replacement) and the p best lattice drafts (verifier
  "tree-sample", the tree rule).

Block efficiency (tokens per serial call, prefill included) is printed beside vanilla's from the
same run, as a ratio, and tokens/s of the whole decode (drafting + verification) likewise.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from draftlattice.assets import WIKITEXT_TEST, data_file, model_asset  # noqa: E402
from draftlattice.decode import BlockwiseDecoder, DecodeStats, LatticeDrafter, SamplingConfig, VanillaDrafter  # noqa: E402
from draftlattice.evaluate.prompts import paragraph_prompts  # noqa: E402
from draftlattice.model import BlockwiseLM  # noqa: E402
from draftlattice.ngram import NgramLM  # noqa: E402
from draftlattice.pairing import check_lm_tokenizer_pair  # noqa: E402
from draftlattice.tokenizer import load_tokenizer, tokenizer_sha256  # noqa: E402


class TemperatureOnly:
    """Wraps a drafter so that its heads see only the target's temperature (no top-k/top-p):
    the 'processing' ablation."""

    def __init__(self, inner) -> None:
        self.inner, self.name, self.num_drafts = inner, inner.name, inner.num_drafts

    def propose(self, head_logits, context):
        return self.inner.propose(head_logits, context)

    def sample(self, head_logits, context, sampling, generator, n=1):
        plain = SamplingConfig(temperature=sampling.temperature, repetition_penalty=sampling.repetition_penalty)
        return self.inner.sample(head_logits, context, plain, generator, n)


class DraftTemperature:
    """Wraps a drafter so that its heads are sampled at ``factor`` x the target's temperature (a
    proposal-shaping knob: still lossless, q is reported exactly)."""

    def __init__(self, inner, factor: float) -> None:
        self.inner, self.name, self.num_drafts, self.factor = inner, inner.name, inner.num_drafts, factor

    def propose(self, head_logits, context):
        return self.inner.propose(head_logits, context)

    def sample(self, head_logits, context, sampling, generator, n=1):
        return self.inner.sample(
            head_logits, context, replace(sampling, temperature=sampling.temperature * self.factor), generator, n
        )


def sweep_rows(lm, k: int, ps: list[int], alphas: list[float], draft_temperatures: list[float]):
    """``--sweep``: vanilla, then for every p the vanilla and lattice multi-draft rows (every
    sample_alpha and draft-temperature factor)."""
    out = [("vanilla", "block", VanillaDrafter())]
    for p in ps:
        for factor in draft_temperatures:
            suffix = "" if factor == 1 else f", draft T x{factor}"
            vanilla_p = VanillaDrafter()
            vanilla_p.num_drafts = p
            out.append((f"vanilla, {p} sampled drafts{suffix}", "multi", DraftTemperature(vanilla_p, factor)))
            for a in alphas:
                out.append(
                    (
                        f"ngram k={k} {p} sampled drafts, sample_alpha={a}{suffix}",
                        "multi",
                        DraftTemperature(LatticeDrafter(lm, k=k, p=p, sample_alpha=a), factor),
                    )
                )
    return out


def rows(lm, k: int, p: int, alphas: list[float], top_p: bool):
    """(label, verifier, drafter) of one sampling setting; with top-p only the processing ablation."""
    out = [("vanilla", "block", VanillaDrafter())]
    a = alphas[len(alphas) // 2]
    if top_p:
        return out + [
            ("vanilla, heads: temperature only", "block", TemperatureOnly(VanillaDrafter())),
            (f"ngram full support, sample_alpha={a}", "block", LatticeDrafter(lm, k=k, sample_alpha=a)),
            (
                f"ngram full support, sample_alpha={a}, heads: temperature only",
                "block",
                TemperatureOnly(LatticeDrafter(lm, k=k, sample_alpha=a)),
            ),
        ]
    out.append(
        ("ngram top-k only, sample_alpha=0.5", "block", LatticeDrafter(lm, k=k, sample_alpha=0.5, full_support=False))
    )
    for a in alphas:
        out.append((f"ngram full support, sample_alpha={a}", "block", LatticeDrafter(lm, k=k, sample_alpha=a)))
    for verifier in ("multi", "multi-wor"):
        vanilla_p = VanillaDrafter()
        vanilla_p.num_drafts = p
        out.append((f"vanilla, {p} sampled drafts", verifier, vanilla_p))
    for a in alphas:
        out.append(
            (f"ngram {p} sampled drafts, sample_alpha={a}", "multi", LatticeDrafter(lm, k=k, p=p, sample_alpha=a))
        )
    for a in alphas[1:]:
        out.append(
            (f"ngram {p} sampled drafts, sample_alpha={a}", "multi-wor", LatticeDrafter(lm, k=k, p=p, sample_alpha=a))
        )
    out.append((f"ngram {p}-best drafts (alpha=0.5)", "tree-sample", LatticeDrafter(lm, k=k, p=p, alpha=0.5)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=10)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--p", type=int, default=4)
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.0, 0.2, 0.5])
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.7, 1.0])
    parser.add_argument("--top-p", type=float, default=0.9, help="one more setting at T=1 with this top-p (1 = none)")
    parser.add_argument("--models", type=Path)
    parser.add_argument(
        "--sweep",
        type=int,
        nargs="+",
        metavar="P",
        help="instead of the ablation rows: vanilla and lattice multi-draft rows for these p",
    )
    parser.add_argument(
        "--draft-temperatures",
        type=float,
        nargs="+",
        default=[1.0],
        help="with --sweep: the drafts' temperature as a multiple of the target's",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)  # 2 threads slow down 10-30x when other jobs share the 2 cores
    model_dir = model_asset("default", args.models)
    model = BlockwiseLM.from_pretrained(model_dir)
    tokenizer_path = model_asset("tokenizer.json", args.models)
    lm = NgramLM(model_asset("katz4.dlm", args.models))
    check_lm_tokenizer_pair(
        lm.metadata, tokenizer_sha256(tokenizer_path), lm_name="katz4.dlm", tokenizer_name=str(tokenizer_path)
    )
    prompts = paragraph_prompts(
        data_file(WIKITEXT_TEST), load_tokenizer(tokenizer_path), args.prompts, args.prompt_tokens, spread=True
    )
    settings = [SamplingConfig(temperature=t) for t in args.temperatures]
    if args.top_p < 1:
        settings.append(SamplingConfig(temperature=1.0, top_p=args.top_p))
    print(
        f"model {model_dir}; {len(prompts)} prompts x {args.max_new_tokens} tokens; k={args.k}; "
        f"2-core x86_64 CPU (shared)"
    )
    print("| sampling | verifier | drafter | block efficiency | vs vanilla | tokens/s | vs vanilla |")
    print("|---|---|---|---:|---:|---:|---:|")
    for sampling in settings:
        base = None
        label = f"T={sampling.temperature}" + (f" top_p={sampling.top_p}" if sampling.top_p < 1 else "")
        table = (
            sweep_rows(lm, args.k, args.sweep, args.alphas, args.draft_temperatures)
            if args.sweep
            else rows(lm, args.k, args.p, args.alphas, sampling.top_p < 1)
        )
        for name, verifier, drafter in table:
            decoder = BlockwiseDecoder(model, drafter, verifier, replace(sampling))
            decoder.generate(prompts[0], 4, generator=torch.Generator().manual_seed(0))  # warm-up
            stats = DecodeStats()
            start = time.perf_counter()
            for i, prompt in enumerate(prompts):
                stats += decoder.generate(prompt, args.max_new_tokens, generator=torch.Generator().manual_seed(i)).stats
            speed = stats.new_tokens / (time.perf_counter() - start)
            base = base or (stats.block_efficiency, speed)
            print(
                f"| {label} | {verifier} | {name} | {stats.block_efficiency:.3f} | {stats.block_efficiency / base[0]:.3f} "
                f"| {speed:.0f} | {speed / base[1]:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
