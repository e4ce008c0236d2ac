"""`draftlattice model-eval`: head-1 perplexity and per-head top-1 accuracy of a model directory."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "model-eval",
        help="perplexity and per-head top-1 accuracy of a model on text files",
        description="Scores every position of non-overlapping windows of the tokenized text (stripped "
        "non-blank lines, each followed by <|endoftext|>, as in training).",
    )
    parser.add_argument("model", type=Path, help="model directory (config.json, model.safetensors, tokenizer.json)")
    parser.add_argument("text", type=Path, nargs="+", help="evaluation text files")
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-windows", type=int, help="evaluate only the first N windows")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import torch

    from draftlattice.model import BlockwiseLM
    from draftlattice.model.evaluate import evaluate_file
    from draftlattice.model.io import tokenizer_file

    if args.threads:
        torch.set_num_threads(args.threads)
    model = BlockwiseLM.from_pretrained(args.model)
    results = {
        str(path): evaluate_file(
            model,
            tokenizer_file(args.model),
            path,
            args.seq_len,
            args.batch_size,
            args.max_windows,
            show_progress=sys.stderr.isatty(),
        )
        for path in args.text
    }
    if args.json:
        print(json.dumps(results, indent=1))
        return 0
    h = model.config.num_heads
    print("| text | tokens | perplexity | " + " | ".join(f"top-1 head {j + 1}" for j in range(h)) + " |")
    print("|---" * (3 + h) + "|")
    for path, r in results.items():
        accuracy = " | ".join(f"{a:.3f}" for a in r["head_accuracy"])
        print(f"| {Path(path).name} | {r['tokens']} | {r['perplexity']:.2f} | {accuracy} |")
    return 0
