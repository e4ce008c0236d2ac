"""Top-k lattice from head logits: draftlattice against plain PyTorch, same logits, same run.

For each shape (h heads x V vocabulary), the median over repeated calls of
  ours     draftlattice.Lattice.from_logits(logits, k)   (C++: top-k + log-softmax normalizer)
  torch    torch.topk(torch.log_softmax(logits, -1), k)  (the plain PyTorch equivalent)
on the same float32 logits (seeded normal draws scaled by 3), one thread for both, with warm-up
calls first; and checks that both pick the same tokens with log-probabilities within 1e-5.

    PYTHONPATH=python python bench/lattice_build.py [--repeats 2000]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import numpy as np
import torch

import draftlattice as dl

SHAPES = [(4, 4096), (7, 4096), (8, 32000), (8, 50257), (8, 128256)]


def median_us(call, repeats: int) -> float:
    for _ in range(max(10, repeats // 20)):
        call()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        call()
        runs.append(time.perf_counter() - t0)
    return 1e6 * float(np.median(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=2000)
    parser.add_argument("-k", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    print("| h x V | k | ours us | torch us | torch / ours | same tokens |")
    print("| --- | ---: | ---: | ---: | ---: | --- |")
    for h, vocab in SHAPES:
        logits = (rng.standard_normal((h, vocab)) * 3).astype(np.float32)
        tensor = torch.from_numpy(logits)
        repeats = max(50, args.repeats * 4096 // vocab)
        ours = median_us(lambda: dl.Lattice.from_logits(logits, args.k), repeats)
        plain = median_us(lambda: torch.topk(torch.log_softmax(tensor, -1), args.k), repeats)
        lattice = dl.Lattice.from_logits(logits, args.k)
        values, tokens = torch.topk(torch.log_softmax(tensor.double(), -1), args.k)
        same = np.array_equal(lattice.tokens, tokens.numpy()) and np.allclose(
            lattice.logprobs, values.numpy(), atol=1e-5
        )
        print(f"| {h} x {vocab} | {args.k} | {ours:.1f} | {plain:.1f} | {plain / ours:.1f}x | {same} |")
    print(
        f"# {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, 1 thread; "
        f"load average {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
