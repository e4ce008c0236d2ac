"""Speed of draftlattice.hf.generate against transformers' own decoding, on the default model, in one run.

Model: the default model, SmolLM2-135M-Instruct (fetched on first use like a user would), with
its shipped heads (``lm_models/smollm2/heads``, or ``heads-sampled`` for ``--temperature``) and
4-gram (``lm_models/smollm2/katz4.dlm``). Prompts: the first ``--prompt-tokens`` tokens of
WikiText-2 test paragraphs, batched with left padding. Methods:

* ``generate``: plain ``model.generate()`` (the reference of each ratio).
* ``prompt-lookup``: transformers' prompt-lookup decoding (``prompt_lookup_num_tokens``; batch 1 only).
* greedy: ``heads`` (the heads' top-1 tokens as the one draft), ``lattice 1-best`` / ``lattice
  p-best tree`` (the heads' top-k lattice rescored with the 4-gram), ``lattice p-best tree +
  copy`` (and a draft copied from the context, ``draft_lookup=3``).
* ``--temperature``: ``heads (1 draft, block)`` (one draft sampled from the heads' processed laws,
  block verification), ``heads_multi`` (p such drafts, recursive rejection) and ``ngram_multi``
  (p drafts from the full-support lattice rescored with the 4-gram, sample_alpha 0.2).

Reported per method: serial target calls (forwards of the base model, counted with a forward
hook) per generated token of a row, tokens/s (all rows), and the speedup in wall-clock time over
``generate`` measured in the same run (median over ``--repeats`` timed runs after a warm-up).
Greedy outputs are checked identical to plain ``generate()`` (in float32 they must be; in
bfloat16 several tokens verified at once round differently from one at a time). Sampling runs
seed every batch the same way for every method (the laws are equal, the draws are not).

    python bench/hf_speed.py [--prompts 8] [--max-new-tokens 64] [--batch 1 4] [--dtype bfloat16]
                             [--temperature 0.7] [--threads 2] [--json FILE] [--device cuda]
                             [--lean dense|int8|int4] [--graphed] [--static]

``--lean FORMAT`` adds each drafted method run on the lean step (draftlattice.lean) in that weight
format (int8/int4: CPU only); ``--graphed`` adds each run on the dense lean step at fixed shapes
(``GraphedStep``: CUDA graphs on a GPU, the same fixed-shape forwards eagerly elsewhere);
``--static`` adds transformers' static-cache ``generate()`` (which transformers compiles on CUDA).
With ``--json`` the rows are written after each one, so a run cut short keeps what it measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))


def prompts(tokenizer, count: int, length: int) -> list[list[int]]:
    shared = ROOT.parent / "shared" / "data" / "wikitext-2" / "test.txt"
    if not shared.is_file():
        shared = Path("/work/shared/data/wikitext-2/test.txt")
    out = []
    for line in shared.read_text().splitlines():
        ids = tokenizer.encode(line.strip(), add_special_tokens=False)
        if len(ids) >= length + 16:
            out.append(ids[:length])
        if len(out) == count:
            break
    return out


def batches(rows: list[list[int]], size: int, device) -> list[tuple[torch.Tensor, torch.Tensor]]:
    out = []
    for start in range(0, len(rows), size):
        group = rows[start : start + size]
        width = max(map(len, group))
        ids = torch.tensor([[0] * (width - len(r)) + r for r in group], device=device)
        mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in group], device=device)
        out.append((ids, mask))
    return out


def run_method(model, kwargs, inputs, max_new, repeats) -> tuple[list[torch.Tensor], int, int, float]:
    """(outputs, serial calls, new tokens per row summed, median seconds of one pass)."""
    calls = []

    def generate(ids, mask):
        torch.manual_seed(0)  # sampling: every method's batch starts from the same seed
        out = model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=max_new,
            eos_token_id=None,
            pad_token_id=0,
            **kwargs,
        )
        stats = getattr(out, "draft_stats", None)
        if stats is not None and "draft_step" in kwargs:  # a lean step calls no trunk: count its calls
            calls.extend([1] * stats.target_calls)
        return out.sequences if hasattr(out, "sequences") else out

    handle = model.base_model.register_forward_hook(lambda *a: calls.append(1))
    try:
        outputs = [generate(ids, mask) for ids, mask in inputs]  # warm-up
        serial = len(calls)
        seconds = []
        for _ in range(repeats):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            start = time.perf_counter()
            for ids, mask in inputs:
                generate(ids, mask)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - start)
    finally:
        handle.remove()
    rows_tokens = sum((out.shape[1] - ids.shape[1]) * out.shape[0] for out, (ids, _) in zip(outputs, inputs))
    return outputs, serial, rows_tokens, statistics.median(seconds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--p", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--heads", type=Path, help="DraftHeads folder instead of the shipped heads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--temperature", type=float, help="sample at this temperature (lossless rules) instead")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    parser.add_argument(
        "--lean", choices=["dense", "int8", "int4"], help="also each drafted method on the lean step in this format"
    )
    parser.add_argument("--graphed", action="store_true", help="also each drafted method on the graphed dense step")
    parser.add_argument("--static", action="store_true", help="also transformers' static-cache generate()")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    import draftlattice.hf as dlhf
    from draftlattice.default_model import load_default

    device = torch.device(args.device)
    bundle = load_default(getattr(torch, args.dtype), device)
    model, tokenizer, lm = bundle.model, bundle.tokenizer, bundle.lm
    heads = bundle.sampling_heads if args.temperature else bundle.heads
    if args.heads:
        heads = dlhf.DraftHeads.from_pretrained(args.heads, model).to(device, getattr(torch, args.dtype))
    rows = prompts(tokenizer, args.prompts, args.prompt_tokens)
    draft = {"custom_generate": dlhf.generate, "draft_heads": heads}
    if args.temperature:  # the lossless rules: p drafts sampled from the heads or the rescored lattice
        methods = {
            "generate": {},
            "prompt-lookup": {"prompt_lookup_num_tokens": 10},
            "heads (1 draft, block)": {**draft, "draft_k": args.k, "draft_p": 1},
            f"heads_multi (p={args.p})": {**draft, "draft_k": args.k, "draft_p": args.p},
            f"ngram_multi (p={args.p})": {**draft, "draft_lm": lm, "draft_k": args.k, "draft_p": args.p},
        }
    else:
        methods = {
            "generate": {},
            "prompt-lookup": {"prompt_lookup_num_tokens": 10},
            "heads": {**draft, "draft_k": 1, "draft_p": 1},
            "lattice 1-best": {**draft, "draft_lm": lm, "draft_k": args.k, "draft_p": 1, "draft_alpha": args.alpha},
            f"lattice {args.p}-best tree": {
                **draft,
                "draft_lm": lm,
                "draft_k": args.k,
                "draft_p": args.p,
                "draft_alpha": args.alpha,
                "draft_verify": "tree",
            },
            f"lattice {args.p}-best tree + copy": {
                **draft,
                "draft_lm": lm,
                "draft_k": args.k,
                "draft_p": args.p,
                "draft_alpha": args.alpha,
                "draft_verify": "tree",
                "draft_lookup": 3,
            },
        }
    if args.static:
        methods = {"generate": {}, "generate (static cache)": {"cache_implementation": "static"}, **methods}
    if args.lean:
        from draftlattice.lean import LeanLlama

        step = LeanLlama(model, args.lean)
        for name, kwargs in list(methods.items()):
            if "draft_heads" in kwargs:
                methods[f"{name}, lean {args.lean}"] = {**kwargs, "draft_step": step, "return_dict_in_generate": True}
    if args.graphed:
        from draftlattice.lean import GraphedStep, LeanLlama

        capacity = args.prompt_tokens + args.max_new_tokens + 64  # the largest budget (32) and headroom
        graphed = GraphedStep(LeanLlama(model, "dense"), capacity=capacity)
        for name, kwargs in list(methods.items()):
            if "draft_heads" in kwargs and "draft_step" not in kwargs:
                methods[f"{name}, graphed"] = {**kwargs, "draft_step": graphed, "return_dict_in_generate": True}
    sampling = (
        {"do_sample": True, "temperature": args.temperature, "top_k": None, "top_p": None}
        if args.temperature
        else {"do_sample": False}
    )
    print(
        f"model: SmolLM2-135M-Instruct ({sum(p.numel() for p in model.parameters()):,} "
        f"parameters, {args.dtype}, {device}), heads h={heads.horizon}, LM smollm2/katz4.dlm; {len(rows)} prompts of "
        f"{args.prompt_tokens} tokens, {args.max_new_tokens} new tokens, k={args.k}, alpha={args.alpha}, "
        f"torch threads {args.threads}, " + (f"sampling T={args.temperature}" if args.temperature else "greedy")
    )
    results = []
    with torch.inference_mode():
        for size in args.batch:
            inputs = batches(rows, size, device)
            print(
                f"\nbatch {size}\n\n| method | serial calls / token | tokens/s | speedup vs generate() |\n|---|---|---|---|"
            )
            reference = None
            for name, kwargs in methods.items():
                if name == "prompt-lookup" and size > 1:
                    print(f"| {name} | n/a (transformers: batch 1 only) | | |")
                    continue
                kwargs = {**kwargs, **sampling}
                outputs, serial, tokens, seconds = run_method(model, kwargs, inputs, args.max_new_tokens, args.repeats)
                if reference is None:
                    reference = (outputs, seconds)
                same = bool(args.temperature) or all(torch.equal(a, b) for a, b in zip(outputs, reference[0]))
                per_token = (serial / len(inputs)) / (tokens / len(rows))  # per batch, per row's token
                print(
                    f"| {name} | {per_token:.3f} | {tokens / seconds:.1f} | {reference[1] / seconds:.2f}x"
                    f"{'' if same else ' (OUTPUT DIFFERS)'} |",
                    flush=True,
                )
                results.append(
                    {
                        "batch": size,
                        "method": name,
                        "calls_per_token": per_token,
                        "tokens_per_s": tokens / seconds,
                        "speedup": reference[1] / seconds,
                        "identical": None if args.temperature else same,
                    }
                )
                if args.json:  # after every row: a run cut short keeps what it measured
                    args.json.write_text(
                        json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": results}, indent=2)
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
