"""Milliseconds per decoding step of the engine on the default model: the target's and the draft
heads' logits in one output projection (``decode.target.FUSED_HEADS_MAX_NODES``) against two
projections (the reference, threshold 0), alternated round by round in one run, medians.

    python bench/engine_step.py [--prompts 3] [--max-new-tokens 32] [--rounds 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import draftlattice.decode.target as target_module
from _default_model import paragraph_set
from draftlattice.decode import Engine, LatticeDrafter, RowStopper


def ms_per_step(bundle, prompts, max_new: int, layout: str, p: int) -> float:
    seconds, steps = 0.0, 0
    for prompt in prompts:
        ids = torch.tensor([prompt])
        engine = Engine(bundle.model, bundle.heads, LatticeDrafter(bundle.lm, 8, p, 0.5), layout=layout)
        start = time.perf_counter()
        _, stats = engine.run(ids, RowStopper(ids, max_new, set(), [], 0))
        seconds += time.perf_counter() - start
        steps += stats.steps
    return 1e3 * seconds / steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    bundle, prompts = paragraph_set(args.prompts, torch.bfloat16, args.threads)
    fused = target_module.FUSED_HEADS_MAX_NODES
    print(f"default model, bf16, {args.threads} threads, {len(prompts)} prompts x {args.max_new_tokens} tokens")
    print("| layout | two projections ms/step (reference) | one projection ms/step | ratio |")
    print("| --- | ---: | ---: | ---: |")
    for layout, p in (("batch", 1), ("tree", 4)):
        times = {0: [], fused: []}
        ms_per_step(bundle, prompts[:1], 8, layout, p)  # warm-up
        for _ in range(args.rounds):
            for threshold in (0, fused):
                target_module.FUSED_HEADS_MAX_NODES = threshold
                times[threshold].append(ms_per_step(bundle, prompts, args.max_new_tokens, layout, p))
        target_module.FUSED_HEADS_MAX_NODES = fused
        two, one = statistics.median(times[0]), statistics.median(times[fused])
        name = "chain, ngram 1-best" if layout == "batch" else "tree, ngram 4-best"
        print(f"| {name} | {two:.1f} | {one:.1f} | {one / two:.2f} |", flush=True)


if __name__ == "__main__":
    main()
