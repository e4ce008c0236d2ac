"""Evaluate a model on text files: head-1 perplexity and per-head top-1 accuracy over
non-overlapping training-style windows (the trainer's validation metric; ``draftlattice model
perplexity`` is the command-line evaluation, with overlapping windows and n-gram LMs beside it).

The text is tokenized as in training (stripped non-blank lines, each followed by <|endoftext|>)
and cut into non-overlapping windows of ``seq_len`` inputs (plus h target tokens); every input
position is scored, so early positions of a window see short contexts. Perplexity counts every
token including the end-of-text tokens (natural-log cross-entropy of head 1, exponentiated).
"""

from __future__ import annotations

from pathlib import Path

import torch

from .data import eval_windows, token_stream
from .losses import evaluate_windows


def evaluate_file(
    model,
    tokenizer_path,
    text_path,
    seq_len: int = 256,
    batch_size: int = 16,
    max_windows: int | None = None,
    cache_dir=None,
    show_progress: bool = False,
) -> dict:
    """Metrics of ``model`` on ``text_path`` (see the module docstring); dict with perplexity,
    head_accuracy [h], head_ce [h] (nats) and tokens (scored positions)."""
    from tqdm.auto import tqdm

    stream = token_stream(text_path, tokenizer_path, cache_dir)
    windows = torch.from_numpy(eval_windows(stream, seq_len, model.config.num_heads, max_windows))
    progress = (lambda it: tqdm(it, desc=Path(text_path).name, leave=False)) if show_progress else None
    return evaluate_windows(model, windows, batch_size=batch_size, progress=progress)
