"""Prompts for traces: the first paragraphs of a text file (see draftlattice.prompts)."""

from __future__ import annotations

from ..prompts import paragraph_prompts
from ..tokenizer import load_tokenizer


def prompts_from_file(path, tokenizer_path, count: int | None = None, prompt_tokens: int = 32):
    """The first ``count`` paragraphs of ``path`` with at least ``prompt_tokens`` tokens, cut to that."""
    return paragraph_prompts(path, load_tokenizer(tokenizer_path), count, prompt_tokens)
