"""What the draft heads' logits cost in a decoding step of the default model, per kind of heads.

    python bench/head_projection.py [--threads 2] [--nodes 13] [--reps 200]

One greedy tree step projects the verification forward's hidden states (``--nodes`` of them) to
the target's logits, and the next drafts need heads 2..h at the last accepted node:

* ``plain, fused``: plain heads share that projection (``Target.node_logits``: 4 rows a node,
  one read of the [V, d] output weight);
* ``next-token, full``: heads that read token t + 1 wait for it: the target's projection, then
  the heads' own over the whole vocabulary at one node (a second read of the weight);
* ``next-token, N tokens``: the same with a draft vocabulary of N tokens (``restrict_vocabulary``).

bf16 on this CPU, batch 1; medians of ``--reps`` timed repetitions after warm-up, interleaved
round-robin so drift hits every variant alike. The shipped heads' weights are used.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heads", type=Path, default=ROOT / "lm_models" / "smollm2" / "heads")
    p.add_argument("--plain-heads", type=Path, help="plain heads for the fused row (default: fresh ones)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--nodes", type=int, default=13)
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--vocab", type=int, nargs="*", default=[16384, 8192])
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from draftlattice.decode.target import Target, draft_head_logits
    from draftlattice.default_model import load_default
    from draftlattice.hf import DraftHeads

    bundle = load_default()
    model = bundle.model
    heads = DraftHeads.from_pretrained(args.heads, model, strict_name=False)
    plain = (
        DraftHeads.from_pretrained(args.plain_heads, model, strict_name=False)
        if args.plain_heads
        else DraftHeads.for_model(model, heads.horizon, heads.head_hidden)
    )
    full = copy.deepcopy(heads).restrict_vocabulary(None)
    generator = torch.Generator().manual_seed(0)
    hidden = torch.randn(1, args.nodes, model.config.hidden_size, generator=generator).to(torch.bfloat16)
    root = torch.tensor([42])

    def fused(h):
        def step():
            Target(model, None, torch.bfloat16, None, 8192, h).node_logits(hidden)

        return step

    def separate(h):
        def step():
            target = Target(model, None, torch.bfloat16, None, 8192, h)
            logits, none = target.node_logits(hidden)
            assert none is None
            draft_head_logits(h, model, hidden[:, -1], root)

        return step

    variants = {"plain, fused": fused(plain), "next-token, full vocabulary": separate(full)}
    for n in args.vocab:
        variants[f"next-token, {n} tokens"] = separate(copy.deepcopy(full).restrict_vocabulary(torch.arange(n)))
    times = {name: [] for name in variants}
    with torch.inference_mode():
        for _ in range(10):
            for step in variants.values():
                step()
        for _ in range(args.reps):
            for name, step in variants.items():
                start = time.perf_counter()
                step()
                times[name].append(time.perf_counter() - start)
    base = statistics.median(times["plain, fused"])
    print(f"{args.nodes} nodes, batch 1, bf16, {args.threads} threads, median of {args.reps}")
    print("| heads | ms a step (projections) | vs plain fused |\n|---|---:|---:|")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"| {name} | {1000 * median:.2f} | {1000 * (median - base):+.2f} ms |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
