"""Recording traces: plain greedy decoding with a KV cache, keeping every head's top-K.

One forward per token (prefill, then one-token forwards), so recording costs the same as greedy
decoding; the top-K of all h heads at each position come from the C++ lattice builder, i.e. the
same code and float32 values a live lattice drafter sees.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from ..decode.target import BlockwiseTarget, check_positions
from ..lattice import Lattice
from .trace import Trace

logger = logging.getLogger(__name__)


@torch.inference_mode()
def record_prompt(model: BlockwiseTarget, prompt: Sequence[int], max_new_tokens: int, top_k: int):
    """Greedy decode of one prompt; returns (tokens [T], topk ids [T, h, K], logprobs [T, h, K],
    entropy [T, h]) with T = max_new_tokens."""
    if len(prompt) < 1 or max_new_tokens < 1:
        raise ValueError("record needs a non-empty prompt and max_new_tokens >= 1")
    check_positions(model, len(prompt) + max_new_tokens)
    cache = model.new_cache()
    feed = torch.tensor([list(prompt)], device=model.device)
    rows, tokens = [], []
    for _ in range(max_new_tokens):
        heads = model.head_logits(model.trunk(feed, cache)[:, -1:])[0, 0].float()  # [h, V]
        rows.append(heads)
        token = int(heads[0].argmax())
        tokens.append(token)
        feed = torch.tensor([[token]], device=model.device)
    logits = torch.stack(rows).cpu()  # [T, h, V]; the lattice builder runs on the host
    logp = torch.log_softmax(logits, -1)
    entropy = -(logp.exp() * logp).sum(-1)  # [T, h] nats
    t, h, _ = logits.shape
    lattices = Lattice.batch_from_logits(logits.reshape(t * h, 1, -1).numpy(), top_k)
    ids = np.stack([lat.tokens[0] for lat in lattices]).reshape(t, h, top_k)
    lps = np.stack([lat.logprobs[0] for lat in lattices]).reshape(t, h, top_k)
    return (
        np.asarray(tokens, np.int32),
        ids.astype(np.int32),
        lps.astype(np.float32),
        entropy.numpy().astype(np.float32),
    )


def record_trace(
    model: BlockwiseTarget,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    top_k: int = 16,
    meta: dict | None = None,
    progress: bool = True,
) -> Trace:
    """Trace of the greedy decodes of ``prompts`` (each with ``max_new_tokens`` new tokens).

    Args:
        model: a blockwise target (``draftlattice.decode.target``); run in eval mode, its own dtype.
        prompts: N non-empty lists of token ids.
        top_k: K candidates kept per head (1 <= K <= V).
    """
    model.eval()
    vocab = model.config.vocab_size
    if not 1 <= top_k <= vocab:
        raise ValueError(f"top_k must be in [1, {vocab}], got {top_k}")
    out = ([], [], [], [], [])
    for prompt in tqdm(prompts, desc="record", unit="prompt", disable=None if progress else True):
        out[0].append(np.asarray(prompt, np.int32))
        for dst, arr in zip(out[1:], record_prompt(model, prompt, max_new_tokens, top_k)):
            dst.append(arr)
    info = {"num_heads": model.config.num_heads, "max_new_tokens": max_new_tokens, **(meta or {})}
    return Trace(*out, vocab_size=vocab, meta=info)
