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
    """Top-K ids, log-probabilities and entropies of all heads at every committed position.

    Head 1's row comes from the very scores that chose each token (the engine's argmax), so
    its top-1 is the committed token even where another matmul shape would round differently
    (bfloat16); on an exact tie the committed token is listed first."""

    def __init__(self, rows: int, top_k: int) -> None:
        self.top_k = top_k
        self.rows: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = [[] for _ in range(rows)]

    def path(self, hidden: torch.Tensor, scores: torch.Tensor, committed: list[list[int]], draft_heads) -> None:
        n = max(map(len, committed), default=0)
        if n == 0:
            return
        # The token each state chose, for heads that read it (rows that committed fewer: any id).
        chosen = torch.tensor([tokens + [0] * (n - len(tokens)) for tokens in committed], device=hidden.device)
        logits = torch.cat([scores[:, :n].unsqueeze(2), draft_heads(hidden[:, :n], chosen)], dim=2)  # [B, n, h, V]
        logp = torch.log_softmax(logits.float(), dim=-1)
        # [B, n, h] nats; xlogy: a token outside a head's draft vocabulary (-inf) adds 0, not 0 * -inf
        entropy = -torch.special.xlogy(logp.exp(), logp.exp()).sum(-1)
        values, ids = logp.topk(self.top_k, dim=-1)
        ids, values, entropy = ids.cpu().numpy(), values.cpu().numpy(), entropy.cpu().numpy()
        for b, tokens in enumerate(committed):
            for j, token in enumerate(tokens):
                _put_first(ids[b, j, 0], values[b, j, 0], token)
            if tokens:
                count = len(tokens)
                self.rows[b].append((ids[b, :count], values[b, :count], entropy[b, :count]))

    def arrays(self, row: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(ids [T, h, K] int32, logprobs [T, h, K] float32, entropy [T, h] float32)``."""
        ids, values, entropy = (np.concatenate(parts) for parts in zip(*self.rows[row]))
        return ids.astype(np.int32), values.astype(np.float32), entropy.astype(np.float32)


def _put_first(ids: np.ndarray, values: np.ndarray, token: int) -> None:
    """Move ``token`` to the front of head 1's top-K (in place): it ties with the first entry
    (the engine picked it by argmax over the same scores)."""
    if ids[0] == token:
        return
    where = np.flatnonzero(ids == token)
    if len(where) == 0 or values[where[0]] != values[0]:
        raise ValueError(f"committed token {token} is not a maximum of the scores that chose it")
    i = int(where[0])
    ids[1 : i + 1] = ids[0:i].copy()
    values[1 : i + 1] = values[0:i].copy()
    ids[0], values[0] = token, values[1]


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
