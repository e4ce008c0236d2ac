"""Milliseconds per decoding step of lossless sampling on the default model: p sampled drafts
verified over their trie (``layout="tree"``, shared prefixes once, the cache as it is) against p
chains (``layout="batch"``, the reference: the cache repeated p times), alternated round by round
in one run, medians.

Rows: ``heads_multi`` (p drafts sampled from the shipped sampling heads) and ``ngram_multi`` (p
drafts from the full-support lattice rescored with the shipped 4-gram), recursive rejection
sampling. Same seeds for both layouts; the laws are equal, the draws may differ where bf16 rounds
the two forwards differently, so block efficiency is reported beside each time.

    python bench/sampled_layout.py [--prompts 4] [--max-new-tokens 48] [--temperature 0.7 1.0]
                                   [--rounds 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from _default_model import paragraph_set
from draftlattice.decode import Engine, LatticeDrafter, RowStopper, Sampling


def run(bundle, prompts, max_new: int, layout: str, lm, temperature: float, p: int) -> tuple[float, float]:
    """(ms per step, block efficiency) over the prompts."""
    sampling = Sampling(temperature=temperature)
    seconds, steps, stats_sum = 0.0, 0, None
    for i, prompt in enumerate(prompts):
        ids = torch.tensor([prompt])
        drafter = LatticeDrafter(lm, 8, p, 0.5, 0.2)
        engine = Engine(
            bundle.model,
            bundle.sampling_heads,
            drafter,
            layout=layout,
            sample_rule="multi",
            sampling=sampling,
            processors=sampling.processors(),
        )
        torch.manual_seed(i)
        start = time.perf_counter()
        _, stats = engine.run(ids, RowStopper(ids, max_new, set(), [], 0))
        seconds += time.perf_counter() - start
        steps += stats.steps
        stats_sum = stats if stats_sum is None else stats_sum + stats
    return 1e3 * seconds / steps, stats_sum.block_efficiency


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--temperature", type=float, nargs="+", default=[0.7, 1.0])
    parser.add_argument("--p", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    bundle, prompts = paragraph_set(args.prompts, torch.bfloat16, args.threads)
    print(f"default model, bf16, {args.threads} threads, {len(prompts)} prompts x {args.max_new_tokens} tokens")
    print("| T | row | chains ms/step (reference) | tree ms/step | ratio | block efficiency chains / tree |")
    print("| ---: | --- | ---: | ---: | ---: | --- |")
    for temperature in args.temperature:
        for name, lm in (("heads_multi", None), ("ngram_multi", bundle.lm)):
            run(bundle, prompts[:1], 8, "tree", lm, temperature, args.p)  # warm-up
            times = {"batch": [], "tree": []}
            efficiency = {}
            for _ in range(args.rounds):
                for layout in times:
                    ms, efficiency[layout] = run(bundle, prompts, args.max_new_tokens, layout, lm, temperature, args.p)
                    times[layout].append(ms)
            chains, tree = statistics.median(times["batch"]), statistics.median(times["tree"])
            print(
                f"| {temperature} | {name} | {chains:.1f} | {tree:.1f} | {tree / chains:.2f} | "
                f"{efficiency['batch']:.3f} / {efficiency['tree']:.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
