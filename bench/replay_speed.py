"""Replay throughput on a synthetic trace (no model): positions per second per drafter.

    PYTHONPATH=python python bench/replay_speed.py --positions 1000000 --lm lm_models/katz4.dlm

Synthetic trace: prompts of 512 positions, h heads, top-K; y is a random walk over the LM's
vocabulary ids; head j's top-1 is the right token with probability 0.8 ** (j - 1), else random.
Fixed seed; the first drafter call is a warm-up on a small slice; times are medians of --repeat.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from draftlattice import NgramLM
from draftlattice.evaluate.drafting import NgramRescore, Oracle, TraceView, Vanilla
from draftlattice.evaluate.replay import replay
from draftlattice.evaluate.trace import Trace


def synthetic(positions: int, h: int, k: int, vocab: int, seed: int = 0, length: int = 512) -> Trace:
    rng = np.random.default_rng(seed)
    out = ([], [], [], [], [])
    for _ in range(max(1, positions // length)):
        y = rng.integers(0, vocab, length + h).astype(np.int32)
        ids = rng.integers(0, vocab, (length, h, k)).astype(np.int32)
        for j in range(h):
            right = rng.random(length) < 0.8**j if j else np.ones(length, bool)
            ids[:, j, 0] = np.where(right, y[j : j + length], ids[:, j, 0])
        # distinct candidates per head: top-1 + 37 c + shift (shift < 37) for c = 1..K-1
        shift = rng.integers(0, 37, (length, h, 1))
        ids[:, :, 1:] = (ids[:, :, :1] + 37 * np.arange(1, k)[None, None, :] + shift) % vocab
        lps = -np.sort(rng.exponential(1.0, (length, h, k)), axis=2).astype(np.float32) - 0.01
        out[0].append(rng.integers(0, vocab, 8).astype(np.int32))
        out[1].append(ids[:, 0, 0].copy())
        out[2].append(ids)
        out[3].append(lps)
        out[4].append(rng.uniform(0, 4, (length, h)).astype(np.float32))
    return Trace(*out, vocab_size=vocab)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--positions", type=int, default=1_000_000)
    parser.add_argument("--lm", default="lm_models/katz4.dlm")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    lm = NgramLM(args.lm)
    vocab = 4096
    start = time.perf_counter()
    trace = synthetic(args.positions, args.heads, args.top_k, vocab)
    view = TraceView(trace)
    print(
        f"synthetic trace: {trace.num_positions} positions, h={args.heads}, K={args.top_k} "
        f"({time.perf_counter() - start:.1f}s to build); LM {args.lm} order {lm.order}"
    )
    for spec in (Vanilla(), Oracle(args.top_k), NgramRescore(lm, 4, 1, 0.5), NgramRescore(lm, 8, 4, 0.5)):
        replay(view, spec, prompts=[0], progress=False)  # warm-up
        times = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            result = replay(view, spec, progress=False)
            times.append(time.perf_counter() - start)
        t = statistics.median(times)
        print(
            f"{spec.name:<28} {t:8.2f}s  {trace.num_positions / t:10.0f} positions/s  "
            f"{result.stats.steps / t:9.0f} steps/s  BE {result.block_efficiency:.3f}"
        )


if __name__ == "__main__":
    main()
