"""`draftlattice train`: train a blockwise parallel LM (h heads) on a text corpus."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "train",
        help="train a blockwise parallel transformer LM",
        description="Train BlockwiseLM with the sum of per-head cross-entropies. Uses CUDA when "
        "available. Writes a model directory (config.json, model.safetensors, tokenizer.json).",
    )
    p.add_argument("corpus", type=Path, help="training text, one document per line")
    p.add_argument("--tokenizer", type=Path, required=True, help="tokenizer.json")
    p.add_argument("--valid", type=Path, help="validation text for periodic evaluation")
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        help="model directory to write (replaced only when training completes)",
    )
    p.add_argument("--force", action="store_true", help="replace an existing model directory (never an input)")
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-head", type=int, default=4)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--d-ff", type=int, default=1024)
    p.add_argument("--num-heads", type=int, default=8, help="h, blockwise heads (1 = plain LM)")
    p.add_argument("--head-hidden", type=int, help="hidden width of heads 2..h (default d-model)")
    p.add_argument("--max-seq-len", type=int, default=512)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--max-steps", type=int, default=2000)
    p.add_argument("--time-budget", type=float, help="wall-clock budget in minutes (schedule follows it)")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup-steps", type=int, default=100)
    p.add_argument(
        "--head-fraction",
        type=float,
        default=1.0,
        help="share of positions on which heads 2..h are scored each step (speed)",
    )
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--eval-windows", type=int, default=32)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    p.add_argument(
        "--cache-dir",
        type=Path,
        default=Path.home() / ".cache" / "draftlattice",
        help="where tokenized corpora are cached as .npy",
    )
    p.set_defaults(func=_train)


def _train(args: argparse.Namespace) -> int:
    from draftlattice.model.config import BlockwiseConfig
    from draftlattice.model.train import TrainOptions, train
    from draftlattice.tokenizer import load_tokenizer

    from ..filekinds import expect, expect_text
    from ._output import atomic_dir, check_output

    check_output(args.output, force=args.force, inputs=[args.corpus, args.tokenizer, args.valid])
    for path in (args.corpus, args.valid):
        if path:
            expect_text(path)
    expect(args.tokenizer, "a tokenizer.json", ("a JSON file",))
    vocab = load_tokenizer(args.tokenizer).get_vocab_size()
    config = BlockwiseConfig(
        vocab_size=vocab,
        n_layer=args.n_layer,
        n_head=args.n_head,
        d_model=args.d_model,
        d_ff=args.d_ff,
        num_heads=args.num_heads,
        max_seq_len=args.max_seq_len,
        head_hidden=args.head_hidden or args.d_model,
    )
    options = TrainOptions(
        seq_len=args.seq_len,
        batch_size=args.batch_size,
        max_steps=args.max_steps,
        time_budget_s=None if args.time_budget is None else 60.0 * args.time_budget,
        lr=args.lr,
        warmup_steps=args.warmup_steps,
        head_fraction=args.head_fraction,
        eval_every=args.eval_every,
        eval_windows=args.eval_windows,
        seed=args.seed,
        threads=args.threads,
        device=args.device,
    )
    with atomic_dir(args.output) as tmp:  # checkpoints go to the temporary folder meanwhile
        record = train(
            config, args.corpus, args.tokenizer, tmp, valid_corpus=args.valid, options=options, cache_dir=args.cache_dir
        )
    print(json.dumps(record))
    return 0
