"""Perplexity of a transformers model (with its draft heads) and of n-gram LMs on the same tokens.

The text is read as documents (non-blank lines, edge spaces stripped) and tokenized with the
target's tokenizer. Both kinds of model predict the same tokens: every document's tokens and one
end-of-document token after it (the n-gram LM's ``</s>``, the target's end-of-text id), so the
two perplexities have the same denominator.

- The n-gram LM scores each document on its own, from ``<s>`` (its sentence boundary).
- The target reads the documents as one stream ``[eos, d_1, eos, d_2, eos, ...]`` (its training
  format) in windows of ``seq_len`` tokens that overlap by ``seq_len - stride``: each window
  scores only the tokens the previous one did not, so every token sees at least
  ``seq_len - stride`` tokens of context (except at the start).
- Heads 2..h: head j at input position i predicts token i + j; its top-1 accuracy is measured at
  the same positions as head 1 (where i + j is still inside the stream).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import torch

from ..decode.target import draft_head_logits
from ..tokenizer import corpus_lines


@dataclass
class TargetPerplexity:
    """Head-1 perplexity over ``tokens`` predictions and top-1 accuracy of heads 2..h."""

    tokens: int
    perplexity: float
    head_accuracy: list[float]


# The end-of-document token between documents of the stream (GPT-2-style tokenizers, SmolLM2's).
END_OF_TEXT = "<|endoftext|>"


def end_of_text_id(tokenizer) -> int:
    """The tokenizer's ``<|endoftext|>`` id (``ValueError`` if it has none)."""
    token_id = tokenizer.token_to_id(END_OF_TEXT)
    if token_id is None:
        raise ValueError(f"the tokenizer has no {END_OF_TEXT} token")
    return token_id


def documents(path, encode: Callable[[str], list[int]]) -> list[np.ndarray]:
    """Token ids [n_i] of every document (non-blank line) of ``path``."""
    return [np.asarray(encode(line), dtype=np.int64) for line in corpus_lines([path])]


def lm_perplexity(lm, docs: Iterable[np.ndarray]) -> tuple[float, int]:
    """(perplexity, predicted tokens) of an n-gram LM: each document from ``<s>``, ``</s>`` counted.

    Infinite when the mean log-probability is below what a float can exponentiate (an LM whose
    vocabulary misses the tokens scores them -1000)."""
    total, count = 0.0, 0
    empty = np.zeros(0, dtype=np.int32)
    for doc in docs:
        scores = lm.token_scores(doc.astype(np.int32), empty, True, True)
        total += float(np.sum(scores, dtype=np.float64))
        count += len(scores)
    if count == 0:
        raise ValueError("no tokens to score (the text has no non-blank line)")
    try:
        return math.exp(-total / count), count
    except OverflowError:
        return math.inf, count


def _stream(docs: list[np.ndarray], eos_id: int) -> torch.Tensor:
    pieces = [np.asarray([eos_id], dtype=np.int64)]
    for doc in docs:
        pieces += [doc, np.asarray([eos_id], dtype=np.int64)]
    return torch.from_numpy(np.concatenate(pieces))


def _windows(n: int, seq_len: int, stride: int) -> list[tuple[int, int]]:
    """(start, first scored input offset) of each window over a stream of n tokens."""
    windows, covered, start = [], 0, 0  # covered: inputs 0..covered-1 already scored
    while covered < n - 1:
        windows.append((start, covered - start))
        covered = min(start + seq_len, n - 1)
        start += stride
    return windows


@torch.inference_mode()
def target_perplexity(
    model,
    heads,
    docs: list[np.ndarray],
    eos_id: int,
    seq_len: int = 512,
    stride: int = 256,
    batch_size: int = 4,
    progress: Callable | None = None,
) -> TargetPerplexity:
    """Head-1 perplexity of the transformers causal LM ``model`` and the top-1 accuracy of its
    draft ``heads`` (:class:`draftlattice.hf.DraftHeads`) on ``docs`` (see the module doc)."""
    if not 0 < stride <= seq_len:
        raise ValueError(f"need 0 < stride <= seq_len, got stride={stride}, seq_len={seq_len}")
    stream = _stream(docs, eos_id)
    n = stream.numel()
    if n < 2:
        raise ValueError("no tokens to score (the text has no non-blank line)")
    h = int(heads.horizon)
    output_layer = model.get_output_embeddings()
    device = output_layer.weight.device
    nll, scored = 0.0, 0
    correct, counted = np.zeros(h), np.zeros(h)
    windows = _windows(n, seq_len, stride)
    batches = range(0, len(windows), batch_size)
    for first in progress(batches) if progress else batches:
        chunk = windows[first : first + batch_size]
        length = min(seq_len, n - 1 - chunk[0][0])
        rows = [stream[s : s + length] for s, _ in chunk]
        width = max(len(r) for r in rows)
        ids = torch.stack([torch.nn.functional.pad(r, (0, width - len(r)), value=eos_id) for r in rows]).to(device)
        hidden = model.base_model(input_ids=ids, use_cache=False).last_hidden_state
        # Each position's next token in the text, for heads that read it (teacher-forced).
        following = [stream[s + 1 : s + 1 + width] for s, _ in chunk]
        following = torch.stack([torch.nn.functional.pad(r, (0, width - len(r)), value=eos_id) for r in following])
        head_logits = draft_head_logits(heads, model, hidden, following.to(device))
        logits = torch.cat([output_layer(hidden).unsqueeze(2), head_logits], dim=2)  # [B, T, h, V]
        for row, (start, skip) in enumerate(chunk):
            inputs = min(width, n - 1 - start)  # positions whose next token exists
            positions = torch.arange(max(skip, 0), inputs, device=device)
            if positions.numel() == 0:
                continue
            targets = stream[start + 1 : start + 1 + inputs].to(device)
            head1 = logits[row, positions, 0].float().log_softmax(-1)
            nll -= float(head1.gather(-1, targets[positions, None]).sum())
            scored += positions.numel()
            for j in range(h):  # head j + 1 at input i predicts stream[start + i + j + 1]
                valid = positions[start + positions + j + 1 < n]
                if valid.numel():
                    truth = stream[start + valid.cpu() + j + 1].to(device)
                    correct[j] += float((logits[row, valid, j].argmax(-1) == truth).sum())
                    counted[j] += valid.numel()
    accuracy = (correct / np.maximum(counted, 1)).tolist()
    return TargetPerplexity(scored, math.exp(nll / scored), accuracy[1:])
