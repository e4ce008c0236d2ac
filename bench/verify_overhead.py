#!/usr/bin/env python3
"""Verification overhead relative to the target forward it follows.

For each batch size B and vocabulary V, with g draft tokens per row (g + 1 verified positions):

* ``forward``: the stand-in target forward, the LM-head matmul ``[B*(g+1), d] @ [d, V]``
  (d = 4096 by default, an 8B-class model's head), the last and for large V the widest layer
  of any real target forward.  It is a *lower bound* on the target's cost, so the overhead
  ratios below are upper bounds.
* ``softmax``: ``sampling_distribution(logits)`` (p from the target logits, T = 1).
* ``top-p``: ``sampling_distribution(logits, 0.8, top_p=0.9)`` (temperature + nucleus; sorts V).
* ``greedy``: ``greedy_accept`` of one draft of length g on the logits (includes the argmax).
* ``token`` / ``block``: ``token_verify`` / ``block_verify`` on probabilities p [B, g+1, V] and
  q [B, g, V] (sampling included).

Fixed seeds, warm-up runs, medians of ``--reps`` timed runs (CUDA: synchronised).

    PYTHONPATH=python python bench/verify_overhead.py [--device cpu|cuda] [--reps 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
from draftlattice.verify import block_verify, greedy_accept, sampling_distribution, token_verify  # noqa: E402


def timed(fn, device: torch.device, warmup: int, reps: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def machine(device: torch.device) -> str:
    if device.type == "cuda":
        return f"{torch.cuda.get_device_name(device)}, torch {torch.__version__}"
    cpu = platform.processor() or "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return (
        f"{cpu}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads, load average "
        f"{os.getloadavg()[0]:.1f}, torch {torch.__version__}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--batch", type=int, nargs="+", default=[1, 8, 64])
    ap.add_argument("--vocab", type=int, nargs="+", default=[32000, 128256])
    ap.add_argument("--g", type=int, default=8)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--dtype", default=None, help="forward dtype (default: float32 on CPU, bfloat16 on CUDA)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    fdtype = getattr(torch, args.dtype) if args.dtype else (torch.bfloat16 if dev.type == "cuda" else torch.float32)
    g, d = args.g, args.hidden
    print(
        f"# device: {machine(dev)}; forward: LM head [B*(g+1), {d}] @ [{d}, V] in {fdtype}; g = {g}; "
        f"medians of {args.reps} after {args.warmup} warm-up",
        flush=True,
    )
    cols = ["softmax", "top-p", "greedy", "token", "block"]
    print("| B | V | forward ms | " + " | ".join(f"{c} ms (% fwd)" for c in cols) + " |")
    print("|---|---|---|" + "---|" * len(cols), flush=True)
    for V in args.vocab:
        gen = torch.Generator(device=dev).manual_seed(0)
        W = torch.randn(d, V, generator=gen, device=dev, dtype=torch.float32).div_(d**0.5).to(fdtype)
        for B in args.batch:
            x = torch.randn(B * (g + 1), d, generator=gen, device=dev, dtype=torch.float32).to(fdtype)
            logits = (x @ W).float().view(B, g + 1, V)
            p = sampling_distribution(logits)
            q = sampling_distribution(logits[:, :g] + torch.randn(B, g, V, generator=gen, device=dev))
            drafts = torch.multinomial(q.view(-1, V), 1, generator=gen).view(B, g)
            vgen = torch.Generator(device=dev).manual_seed(1)
            res = {
                "forward": timed(lambda: x @ W, dev, args.warmup, args.reps),
                "softmax": timed(lambda: sampling_distribution(logits), dev, args.warmup, args.reps),
                "top-p": timed(lambda: sampling_distribution(logits, 0.8, None, 0.9), dev, args.warmup, args.reps),
                "greedy": timed(
                    lambda: greedy_accept(drafts.view(B, 1, g), logits.view(B, 1, g + 1, V)),
                    dev,
                    args.warmup,
                    args.reps,
                ),
                "token": timed(lambda: token_verify(drafts, q, p, generator=vgen), dev, args.warmup, args.reps),
                "block": timed(lambda: block_verify(drafts, q, p, generator=vgen), dev, args.warmup, args.reps),
            }
            f = res["forward"]
            cells = " | ".join(f"{res[c] * 1e3:.3g} ({100 * res[c] / f:.3g}%)" for c in cols)
            print(f"| {B} | {V} | {f * 1e3:.3g} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
