"""Throughput and quality of draft-head training on the default model, per trainer mode.

    python bench/train_heads_speed.py --corpus build/smollm2-heads/gpu2-greedy [--steps 6] [--threads 2]
    python bench/train_heads_speed.py --corpus ... --quality-minutes 8 --heldout build/heldout-greedy

Throughput (the default): ``draftlattice.training.train_heads`` in each mode (bf16 trunk, fp32
master heads under bf16 autocast), one after the other in one run, against a reference step
measured in the same run (the plain recipe: the fp32 [N, V] logits of every head materialised,
``F.cross_entropy``, one backward):

* ``full``: the full softmax through chunked cross-entropy;
* ``candidates``: the candidate-set softmax (``CandidateSoftmax(--frequent, --negatives)``);
* ``cached``, ``cached+candidates``: the same, reading the trunk's hidden states from a feature
  cache (built first into a temporary folder; its build rate is printed) instead of running it.

All see the same batches: the corpus' first ``--records`` records (so the cache builds in
seconds), ``--batch-tokens`` tokens a step, ``--horizon`` h (heads 2..h); medians over
``--steps`` steps after 2 warm-up steps. Tokens per second count every token of a batch (prompts
and padding included), as the trainer logs them.

Quality (``--quality-minutes M``): fresh heads trained on the corpus' first ``--quality-records``
records for M minutes of wall clock each with the full softmax and with the candidate softmax,
plus a candidate-softmax run of exactly the full run's step count (same schedule: the per-step
comparison). All three read the trunk's hidden states from one feature cache (``--features``,
built first), so the comparison isolates the softmax. Each is then scored on ``--heldout`` (a
distilled corpus of held-out prompts) with the full softmax
(:func:`draftlattice.training.head_accuracy`), so the approximation cannot flatter itself;
``--reference-heads`` (e.g. the shipped heads) are scored beside them. ``--init-heads`` starts
every run from those heads instead of fresh ones (continued training of well-trained heads).

Heads that read the next token (``--next-token-steps S``): instead of the softmax comparison,
fresh plain heads and fresh heads that also read token t + 1's embedding
(``train_heads(next_token=True)``), each trained S steps with the candidate softmax on the same
cached features, batches and schedule, then scored the same way.

    python bench/train_heads_speed.py --corpus ... --quality-records 12416 --heldout ... \
        --features build/heads-cpu3/features-greedy --next-token-steps 400 --threads 1
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
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
        if not str(record.msg).startswith("step "):
            return
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


def first_records(corpus, n: int):
    """The corpus' first ``n`` records as a corpus of their own."""
    from draftlattice.distilled_corpus import DistilledCorpus

    n = min(n, len(corpus))
    end = int(corpus.offsets[n])
    return DistilledCorpus(corpus.tokens[:end], corpus.offsets[: n + 1], corpus.prompt_lens[:n], corpus.meta)


def throughput(args, model, corpus) -> None:
    from draftlattice.hf import DraftHeads
    from draftlattice.training import train_heads
    from draftlattice.training.batches import RecordBatches
    from draftlattice.training.head_loss import CandidateSoftmax

    corpus = first_records(corpus, args.records)
    steps = 2 + args.steps
    batches = RecordBatches(corpus, args.batch_tokens, 1024, seed=0)
    sizes = [batches.next()[0].numel() for _ in range(steps)]
    log = logging.getLogger("draftlattice.training.trainer")
    log.setLevel(logging.INFO)
    softmax = CandidateSoftmax(args.frequent, args.negatives)
    rows = {}
    with tempfile.TemporaryDirectory(dir=args.tmp) as tmp:
        started = time.perf_counter()
        from draftlattice.training.feature_cache import FeatureCache

        FeatureCache.build(Path(tmp) / "features", model, corpus, max_len=1024, progress=False)
        built = time.perf_counter() - started
        cached_tokens = int(np.minimum(np.diff(corpus.offsets), 1024).sum())
        for name, options in (
            ("full", {}),
            ("candidates", {"softmax": softmax}),
            ("cached", {"features": Path(tmp) / "features"}),
            ("cached+candidates", {"softmax": softmax, "features": Path(tmp) / "features"}),
        ):
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
                **options,
            )
            log.removeHandler(handler)
            rows[name] = statistics.median(n / t for n, t in zip(sizes[2:], handler.intervals[2:steps]))
            print(f"  {name}: {rows[name]:,.0f} tokens/s", file=sys.stderr)

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
        f"{args.threads} threads, median of {args.steps} steps; candidates: {args.frequent} frequent + the "
        f"batch's targets + {args.negatives} negatives; feature cache of {len(corpus)} records "
        f"({cached_tokens:,} tokens) built in {built:.1f} s ({cached_tokens / built:,.0f} tokens/s)"
    )
    labels = {
        "full": "full softmax, chunked CE (bf16 autocast, fp32 master heads)",
        "candidates": "candidate softmax",
        "cached": "full softmax, cached trunk features",
        "cached+candidates": "candidate softmax, cached trunk features",
    }
    print("| trainer mode | tokens/s | vs plain |\n|---|---:|---:|")
    for name, value in rows.items():
        print(f"| {labels[name]} | {value:,.0f} | {value / reference:.2f}x |")
    print(f"| plain fp32-logits step (reference) | {reference:,.0f} | 1.00x |")


def quality(args, model, corpus) -> None:
    from draftlattice.distilled_corpus import DistilledCorpus
    from draftlattice.hf import DraftHeads
    from draftlattice.training import head_accuracy, train_heads
    from draftlattice.training.feature_cache import FeatureCache
    from draftlattice.training.head_loss import CandidateSoftmax

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    heldout = DistilledCorpus.load(args.heldout)
    corpus = first_records(corpus, args.quality_records)
    features = args.features or Path(tempfile.mkdtemp(dir=args.tmp)) / "features"
    started = time.perf_counter()
    FeatureCache.build(features, model, corpus, max_len=1024, progress=False, log_every=30)
    print(f"feature cache of {len(corpus)} records: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    common = dict(
        horizon=args.horizon,
        head_hidden=args.head_hidden,
        batch_tokens=args.batch_tokens,
        seq_len=1024,
        lr=args.lr,
        warmup=10,
        log_every=10,
        progress=False,
        features=features,
    )
    softmax = CandidateSoftmax(args.frequent, args.negatives)
    budget = 60 * (args.quality_minutes or 0)
    runs = []

    def run(name, **options):
        started = time.perf_counter()
        init = DraftHeads.from_pretrained(args.init_heads, model, strict_name=False) if args.init_heads else None
        result = train_heads(model, corpus, heads=init, **common, **options)
        seconds = time.perf_counter() - started
        scores = head_accuracy(model, result.heads, heldout, ks=(1, 8))
        runs.append({"run": name, "steps": result.steps, "seconds": seconds, "heldout": scores})
        print(json.dumps(runs[-1]), file=sys.stderr)
        return result

    if args.next_token_steps:
        run("plain heads, candidate softmax", steps=args.next_token_steps, softmax=softmax)
        run("heads reading token t+1, candidate softmax", steps=args.next_token_steps, softmax=softmax, next_token=True)
    else:
        full = run("full softmax, time budget", steps=100_000, time_budget=budget)
        run("candidate softmax, time budget", steps=100_000, time_budget=budget, softmax=softmax)
        run("candidate softmax, the full run's steps", steps=full.steps, softmax=softmax)
    if args.reference_heads:
        heads = DraftHeads.from_pretrained(args.reference_heads, model, strict_name=False).truncated(args.horizon)
        scores = head_accuracy(model, heads, heldout, ks=(1, 8))
        runs.append({"run": f"reference: {args.reference_heads}", "steps": 0, "seconds": 0.0, "heldout": scores})
    print(
        f"{'heads from ' + str(args.init_heads) if args.init_heads else 'fresh heads'}, h={args.horizon}, head_hidden={args.head_hidden}, {args.batch_tokens} tokens a step, "
        f"{args.threads} threads, lr {args.lr}, {len(corpus)} records ({int(corpus.offsets[-1]):,} tokens) from "
        f"cached features; held-out {args.heldout} ({len(heldout)} records) scored with the full softmax"
    )
    print("| run | steps | minutes | top-1 heads 2/3/4 | top-8 heads 2/3/4 |\n|---|---:|---:|---|---|")
    for r in runs:
        top1 = " / ".join(f"{h['top1']:.3f}" for h in r["heldout"])
        top8 = " / ".join(f"{h['top8']:.3f}" for h in r["heldout"])
        print(f"| {r['run']} | {r['steps']} | {r['seconds'] / 60:.1f} | {top1} | {top8} |")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", type=Path, required=True, help="a distilled corpus folder")
    p.add_argument("--model", type=Path, help="transformers folder (default: the fetched default model)")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--records", type=int, default=384, help="records of the corpus the throughput runs draw from")
    p.add_argument("--batch-tokens", type=int, default=4096)
    p.add_argument("--horizon", type=int, default=4)
    p.add_argument("--head-hidden", type=int, default=1024)
    p.add_argument("--frequent", type=int, default=2048, help="candidate softmax: most frequent tokens")
    p.add_argument("--negatives", type=int, default=1024, help="candidate softmax: uniform negatives a step")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--tmp", type=Path, help="where the temporary feature cache goes (default: the system's)")
    p.add_argument("--quality-minutes", type=float, help="instead: equal-budget quality runs of this many minutes")
    p.add_argument(
        "--next-token-steps", type=int, help="instead: plain vs next-token heads, this many steps each (with --heldout)"
    )
    p.add_argument("--heldout", type=Path, help="held-out distilled corpus (with --quality-minutes)")
    p.add_argument("--quality-records", type=int, default=2048, help="records the quality runs train on")
    p.add_argument("--features", type=Path, help="feature cache of the quality runs (default: a temporary one)")
    p.add_argument("--lr", type=float, default=2e-3, help="learning rate of the quality runs")
    p.add_argument("--reference-heads", type=Path, help="heads scored beside the quality runs")
    p.add_argument("--init-heads", type=Path, help="start the quality runs from these heads (default: fresh)")
    args = p.parse_args()
    if (args.quality_minutes or args.next_token_steps) and not args.heldout:
        p.error("--quality-minutes and --next-token-steps need --heldout")
    torch.set_num_threads(args.threads)
    from transformers import AutoModelForCausalLM

    from draftlattice.default_model import fetch_default
    from draftlattice.distilled_corpus import DistilledCorpus

    folder = args.model or fetch_default()
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.bfloat16).eval()
    corpus = DistilledCorpus.load(args.corpus)
    if args.quality_minutes or args.next_token_steps:
        quality(args, model, corpus)
    else:
        throughput(args, model, corpus)
    return 0


if __name__ == "__main__":
    sys.exit(main())
