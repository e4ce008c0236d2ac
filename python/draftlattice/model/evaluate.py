"""Evaluate a model directory on text files: head-1 perplexity and per-head top-1 accuracy.

    python -m draftlattice.model.evaluate lm_models/default ../shared/data/wikitext-2/valid.txt \
        ../shared/data/wikitext-2/test.txt [--seq-len 256]

The text is tokenized as in training (stripped non-blank lines, each followed by <|endoftext|>)
and cut into non-overlapping windows of ``seq_len`` inputs (plus h target tokens); every input
position is scored, so early positions of a window see short contexts. Perplexity counts every
token including the end-of-text tokens (natural-log cross-entropy of head 1, exponentiated).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from .data import eval_windows, token_stream
from .io import load_model, tokenizer_file
from .losses import evaluate_windows


def evaluate_file(model, tokenizer_path, text_path, seq_len: int = 256, batch_size: int = 16,
                  max_windows: int | None = None, cache_dir=None, show_progress: bool = False) -> dict:
    """Metrics of ``model`` on ``text_path`` (see the module docstring); dict with perplexity,
    head_accuracy [h], head_ce [h] (nats) and tokens (scored positions)."""
    from tqdm.auto import tqdm

    stream = token_stream(text_path, tokenizer_path, cache_dir)
    windows = torch.from_numpy(eval_windows(stream, seq_len, model.config.num_heads, max_windows))
    progress = (lambda it: tqdm(it, desc=Path(text_path).name, leave=False)) if show_progress else None
    return evaluate_windows(model, windows, batch_size=batch_size, progress=progress)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m draftlattice.model.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("model", type=Path, help="model directory (config.json, model.safetensors, tokenizer.json)")
    parser.add_argument("text", type=Path, nargs="+", help="evaluation text files")
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--max-windows", type=int, help="evaluate only the first N windows")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        model = load_model(args.model)
        results = {str(path): evaluate_file(model, tokenizer_file(args.model), path, args.seq_len,
                                            args.batch_size, args.max_windows, show_progress=sys.stderr.isatty())
                   for path in args.text}
    except (ValueError, OSError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
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


if __name__ == "__main__":
    sys.exit(main())
