"""Drafting time per step of full-support lattice sampling: the "other" arcs' concrete tokens drawn
by inversion (``draftlattice.verify.draw_categorical``, what the drafter does) against
``torch.multinomial`` (which, without replacement, draws an exponential per vocabulary entry).

Default model (bf16), its sampling heads and 4-gram, ``ngram_multi`` (k = 8, p = 4, T = 0.7) on one
chat prompt, 48 tokens; the two ways alternated ``--repeats`` times in one run, same seeds;
``DecodeStats.drafting_seconds`` per step (the draw is in the drafter's host half). Both draw
from the same law.

    python bench/sampled_draws.py [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics

import torch

import draftlattice.decode.drafters.lattice as lattice
from draftlattice.decode import Engine, LatticeDrafter, RowStopper, Sampling
from draftlattice.default_model import load_default


def multinomial(probs):
    return torch.multinomial(probs, 1).squeeze(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bundle = load_default(torch.bfloat16)
    ids = torch.tensor([bundle.chat_ids("What are the benefits of regular exercise?")])
    sampling = Sampling(0.7)
    ways = {"torch.multinomial": multinomial, "inversion (shipped)": lattice.draw_categorical}
    shipped = lattice.draw_categorical
    per_step = {name: [] for name in ways}
    try:
        for repeat in range(args.repeats):
            for name, draw in ways.items():
                lattice.draw_categorical = draw
                drafter = LatticeDrafter(bundle.lm, k=8, p=4)
                engine = Engine(
                    bundle.model, bundle.sampling_heads, drafter, layout="batch", sample_rule="multi",
                    sampling=sampling, processors=sampling.processors(),
                )  # fmt: skip
                torch.manual_seed(repeat)
                _, stats = engine.run(ids, RowStopper(ids, 48, set(), [], 0), max_length=ids.shape[1] + 48)
                per_step[name].append(1e3 * stats.drafting_seconds / stats.steps)
    finally:
        lattice.draw_categorical = shipped
    print("| draw of the other arcs' tokens | drafting ms per step (runs) | median |")
    print("| --- | --- | ---: |")
    for name, values in per_step.items():
        runs = ", ".join(f"{v:.2f}" for v in values)
        print(f"| {name} | {runs} | {statistics.median(values):.2f} |")


if __name__ == "__main__":
    main()
