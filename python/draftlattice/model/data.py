"""Token streams for training and evaluation: a corpus tokenized once and cached as .npy.

Each non-blank corpus line (line-edge spaces stripped, as in lm_models/) is one document; the
stream is the concatenation of the documents' token ids, each followed by the end-of-text id.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np

from ..tokenizer import corpus_lines, load_tokenizer, tokenizer_sha256

logger = logging.getLogger(__name__)

EOS_TOKEN = "<|endoftext|>"


def eos_id(tokenizer) -> int:
    token_id = tokenizer.token_to_id(EOS_TOKEN)
    if token_id is None:
        raise ValueError(f"tokenizer has no {EOS_TOKEN} token")
    return token_id


def token_stream(corpus, tokenizer_path, cache_dir=None, batch_lines: int = 4096) -> np.ndarray:
    """Token ids (uint16 if V <= 65536, else int32) of ``corpus``; cached under ``cache_dir``.

    The cache key is the sha256 of the corpus bytes and of the tokenizer file, so an edited
    corpus or another tokenizer never reuses a stale stream.
    """
    corpus, tokenizer_path = Path(corpus), Path(tokenizer_path)
    if not corpus.is_file():
        raise ValueError(f"corpus file not found: {corpus}")
    key = hashlib.sha256(corpus.read_bytes()).hexdigest()[:16] + "-" + tokenizer_sha256(tokenizer_path)[:16]
    cache_path = None if cache_dir is None else Path(cache_dir) / f"{corpus.stem}-{key}.npy"
    if cache_path is not None and cache_path.is_file():
        return np.load(cache_path)
    tokenizer = load_tokenizer(tokenizer_path)
    eos = eos_id(tokenizer)
    dtype = np.uint16 if tokenizer.get_vocab_size() <= 65536 else np.int32
    chunks, lines = [], []

    def flush() -> None:
        for encoding in tokenizer.encode_batch(lines):
            chunks.append(np.asarray(encoding.ids + [eos], dtype=dtype))
        lines.clear()

    for line in corpus_lines([corpus]):
        lines.append(line)
        if len(lines) >= batch_lines:
            flush()
    flush()
    if not chunks:
        raise ValueError(f"corpus is empty (no non-blank lines): {corpus}")
    stream = np.concatenate(chunks)
    if cache_path is not None:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        np.save(cache_path, stream)
        logger.info("cached %d tokens of %s at %s", stream.size, corpus, cache_path)
    return stream


def eval_windows(stream: np.ndarray, seq_len: int, num_heads: int, max_windows: int | None = None):
    """Non-overlapping windows [N, seq_len + h] (inputs, then h extra target tokens)."""
    span = seq_len + num_heads
    count = (stream.size - num_heads) // seq_len
    if max_windows is not None:
        count = min(count, max_windows)
    if count <= 0:
        raise ValueError(f"evaluation stream of {stream.size} tokens is shorter than one window ({span})")
    starts = np.arange(count) * seq_len
    return np.stack([stream[s : s + span] for s in starts]).astype(np.int64)
