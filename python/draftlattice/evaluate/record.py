"""Recording traces: greedy decoding through the one engine, keeping every head's top-K.

The engine decodes as usual (heads-only tree drafts, so recording costs less than plain greedy
decoding) and a :class:`TraceRecorder` reads the hidden state that chose every committed token:
all h heads' top-K there (head 1 = the model's own logits) are exactly what a live drafter at
that position sees. Greedy output does not depend on the drafts, so the trace is the model's
greedy decode whatever drafted it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ..decode import Engine, LatticeDrafter, RowStopper, StepObserver
from .trace import Trace

logger = logging.getLogger(__name__)


class TraceRecorder(StepObserver):
    """Top-K ids, log-probabilities and entropies of all heads at every committed position."""

    def __init__(self, rows: int, top_k: int) -> None:
        self.top_k = top_k
        self.rows: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = [[] for _ in range(rows)]

    def path(self, hidden: torch.Tensor, counts: list[int], all_heads) -> None:
        n = max(counts, default=0)
        if n == 0:
            return
        logp = torch.log_softmax(all_heads(hidden[:, :n]).float(), dim=-1)  # [B, n, h, V]
        entropy = -(logp.exp() * logp).sum(-1)  # [B, n, h] nats
        values, ids = logp.topk(self.top_k, dim=-1)
        ids, values, entropy = ids.cpu().numpy(), values.cpu().numpy(), entropy.cpu().numpy()
        for b, count in enumerate(counts):
            if count:
                self.rows[b].append((ids[b, :count], values[b, :count], entropy[b, :count]))

    def arrays(self, row: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ids [T, h, K] int32, logprobs [T, h, K] float32, entropy [T, h] float32)``."""
        ids, values, entropy = (np.concatenate(parts) for parts in zip(*self.rows[row]))
        return ids.astype(np.int32), values.astype(np.float32), entropy.astype(np.float32)


@torch.inference_mode()
def record_prompt(model, heads, prompt: Sequence[int], max_new_tokens: int, top_k: int):
    """Greedy decode of one prompt for exactly ``max_new_tokens`` tokens (no EOS stop); returns
    (tokens [T], topk ids [T, h, K], logprobs [T, h, K], entropy [T, h])."""
    if len(prompt) < 1 or max_new_tokens < 1:
        raise ValueError("record needs a non-empty prompt and max_new_tokens >= 1")
    device = model.get_output_embeddings().weight.device
    input_ids = torch.tensor([list(prompt)], device=device)
    recorder = TraceRecorder(1, top_k)
    engine = Engine(model, heads, LatticeDrafter(k=4, p=4), observer=recorder)
    stopper = RowStopper(input_ids, max_new_tokens, set(), [], 0)
    new_tokens, _ = engine.run(input_ids, stopper, max_length=len(prompt) + max_new_tokens)
    ids, logprobs, entropy = recorder.arrays(0)
    return np.asarray(new_tokens[0], np.int32), ids, logprobs, entropy


def record_trace(
    model,
    heads,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    top_k: int = 16,
    meta: dict | None = None,
    progress: bool = True,
) -> Trace:
    """Trace of the greedy decodes of ``prompts`` (each with ``max_new_tokens`` new tokens).

    Args:
        model: a transformers causal LM (eval mode, its own dtype and device).
        heads: its :class:`draftlattice.hf.DraftHeads`.
        prompts: N non-empty lists of token ids.
        top_k: K candidates kept per head (1 <= K <= V).
    """
    model.eval()
    vocab = int(model.get_output_embeddings().weight.shape[0])
    if not 1 <= top_k <= vocab:
        raise ValueError(f"top_k must be in [1, {vocab}], got {top_k}")
    out = ([], [], [], [], [])
    for prompt in tqdm(prompts, desc="record", unit="prompt", disable=None if progress else True):
        out[0].append(np.asarray(prompt, np.int32))
        for dst, arr in zip(out[1:], record_prompt(model, heads, prompt, max_new_tokens, top_k)):
            dst.append(arr)
    info = {"num_heads": heads.horizon, "max_new_tokens": max_new_tokens, **(meta or {})}
    return Trace(*out, vocab_size=vocab, meta=info)
