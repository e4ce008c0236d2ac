"""Block efficiency of lossless sampling: vanilla drafts vs drafts sampled from the rescored lattice.

    PYTHONPATH=python python bench/decode_sampling.py [--prompts 8] [--max-new-tokens 48]

Uses the shipped model and 4-gram LM (lm_models/), WikiText-2 test prompts, fixed seeds. Each
configuration decodes every prompt with the same seeds; block efficiency (tokens per serial
call) is reported beside vanilla drafting's, measured in the same run, as a ratio.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))

from draftlattice.assets import WIKITEXT_TEST, data_file, model_asset  # noqa: E402
from draftlattice.decode import (  # noqa: E402
    BlockwiseDecoder, DecodeStats, LatticeDrafter, SamplingConfig, VanillaDrafter)
from draftlattice.apps.demo import load_ngram  # noqa: E402
from draftlattice.evaluate.prompts import paragraph_prompts  # noqa: E402
from draftlattice.model import BlockwiseLM  # noqa: E402
from draftlattice.tokenizer import load_tokenizer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--models", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(2)
    model_dir = model_asset("default", args.models)
    model = BlockwiseLM.from_pretrained(model_dir)
    tokenizer_path = model_asset("tokenizer.json", args.models)
    lm = load_ngram(model_asset("katz4.dlm", args.models), tokenizer_path)
    prompts = paragraph_prompts(data_file(WIKITEXT_TEST), load_tokenizer(tokenizer_path),
                               args.prompts, args.prompt_tokens, spread=True)
    drafters = {"vanilla": VanillaDrafter(), f"ngram k={args.k} alpha={args.alpha}": LatticeDrafter(
        lm, k=args.k, alpha=args.alpha)}
    print(f"model {model_dir}; {len(prompts)} prompts x {args.max_new_tokens} tokens; 2-core x86_64 CPU")
    print("| sampling | verifier | drafter | block efficiency | vs vanilla | drafting s | verification s |")
    print("|---|---|---|---:|---:|---:|---:|")
    for sampling in (SamplingConfig(temperature=0.7), SamplingConfig(temperature=1.0)):
        for verifier in ("block", "token"):
            base = None
            for name, drafter in drafters.items():
                decoder = BlockwiseDecoder(model, drafter, verifier, sampling)
                decoder.generate(prompts[0], 4, generator=torch.Generator().manual_seed(0))  # warm-up
                stats = DecodeStats()
                for i, prompt in enumerate(prompts):
                    stats += decoder.generate(prompt, args.max_new_tokens,
                                              generator=torch.Generator().manual_seed(i)).stats
                base = base or stats.block_efficiency
                print(f"| T={sampling.temperature} | {verifier} | {name} | {stats.block_efficiency:.3f} "
                      f"| {stats.block_efficiency / base:.3f} | {stats.drafting_seconds:.2f} "
                      f"| {stats.verification_seconds:.2f} |", flush=True)


if __name__ == "__main__":
    main()
