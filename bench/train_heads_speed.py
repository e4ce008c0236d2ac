"""Throughput of draft-head training on the default model (tokens per second of a training step).

    python bench/train_heads_speed.py --corpus build/smollm2-heads/gpu2-greedy [--steps 8] [--threads 2]

Times ``draftlattice.training.train_heads`` (bf16 trunk, fp32 master heads under bf16 autocast, chunked
cross-entropy through the frozen output layer) against a reference step measured in the same run:
the plain recipe (the fp32 [N, V] logits of every head materialised, ``F.cross_entropy``, one
backward). Both see the same batches (a distilled corpus, ``--batch-tokens`` tokens a step,
``--horizon`` h: heads 2..h); medians over ``--steps`` steps after 2 warm-up steps. Tokens per
second count every token of a batch (prompts and padding included), as the trainer logs them.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))


class StepClock(logging.Handler):
    """The time between the trainer's per-step log lines (``log_every=1``): one step each."""

    def __init__(self) -> None:
        super().__init__()
        self.intervals: list[float] = []
        self.last = time.perf_counter()

    def emit(self, record) -> None:
        now = time.perf_counter()
        self.intervals.append(now - self.last)
        self.last = now


def plain_step(model, heads, optimizer, tokens, valid) -> None:
    """The reference: all logits in fp32, F.cross_entropy, one backward."""
    with torch.no_grad():
        z = model.base_model(input_ids=tokens).last_hidden_state
    T = tokens.shape[1]
    losses = []
    for i, head in enumerate(heads.heads):
        j = i + 2
        keep = valid[:, j:] & valid[:, 1 : T - j + 1]
        logits = model.get_output_embeddings()(head(z[:, : T - j][keep].float()).to(z.dtype)).float()
        losses.append(F.cross_entropy(logits, tokens[:, j:][keep]))
    optimizer.zero_grad(set_to_none=True)
    torch.stack(losses).mean().backward()
    optimizer.step()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, required=True, help="a distilled corpus folder")
    p.add_argument("--model", type=Path, help="transformers folder (default: the fetched default model)")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch-tokens", type=int, default=4096)
    p.add_argument("--horizon", type=int, default=4)
    p.add_argument("--head-hidden", type=int, default=1024)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import AutoModelForCausalLM

    from draftlattice.default_model import fetch_default
    from draftlattice.distilled_corpus import DistilledCorpus
    from draftlattice.hf import DraftHeads
    from draftlattice.training import train_heads
    from draftlattice.training.batches import RecordBatches

    folder = args.model or fetch_default()
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.bfloat16).eval()
    corpus = DistilledCorpus.load(args.corpus)
    steps = 2 + args.steps

    batches = RecordBatches(corpus, args.batch_tokens, 1024, seed=0)
    sizes = [batches.next()[0].numel() for _ in range(steps)]
    log = logging.getLogger("draftlattice.training.trainer")
    log.setLevel(logging.INFO)
    handler = StepClock()
    log.addHandler(handler)
    train_heads(
        model,
        corpus,
        horizon=args.horizon,
        head_hidden=args.head_hidden,
        steps=steps,
        batch_tokens=args.batch_tokens,
        seq_len=1024,
        log_every=1,
        progress=False,
    )
    log.removeHandler(handler)
    ours = statistics.median(n / t for n, t in zip(sizes[2:], handler.intervals[2:steps]))

    heads = DraftHeads.for_model(model, horizon=args.horizon, head_hidden=args.head_hidden).float()
    optimizer = torch.optim.AdamW(heads.parameters(), lr=1e-3)
    batches = RecordBatches(corpus, args.batch_tokens, 1024, seed=0)
    plain = []
    for step in range(steps):
        tokens, valid = batches.next()
        start = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            plain_step(model, heads, optimizer, tokens, valid)
        if step >= 2:
            plain.append(tokens.numel() / (time.perf_counter() - start))
    reference = statistics.median(plain)
    print(
        f"heads training, h={args.horizon}, head_hidden={args.head_hidden}, {args.batch_tokens} tokens a batch, "
        f"{args.threads} threads, median of {args.steps} steps"
    )
    print(
        f"| trainer | tokens/s |\n|---|---:|\n| draftlattice train_heads | {ours:,.0f} |\n"
        f"| plain fp32-logits step (reference) | {reference:,.0f} |\n| ratio | {ours / reference:.2f}x |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
