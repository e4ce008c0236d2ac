"""Plain autoregressive decoding with head 1 only: the reference blockwise decoding must equal."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .target import BlockwiseTarget, check_positions


@torch.inference_mode()
def greedy_decode(
    model: BlockwiseTarget,
    prompt_ids: Sequence[int],
    max_new_tokens: int,
    *,
    eos_token_id: int | None = None,
    use_cache: bool = True,
) -> list[int]:
    """Head 1's argmax, one token per forward (the target's greedy output).

    Args:
        prompt_ids: [T] token ids, T >= 1.
        max_new_tokens: how many tokens to generate (fewer if EOS comes first; EOS is included).
        use_cache: False recomputes the whole sequence every step (an independent check of the
            KV cache; O(n^2) forwards' work).
    Returns:
        The new tokens (prompt excluded).
    """
    if not prompt_ids:
        raise ValueError("prompt_ids must be non-empty")
    check_positions(model, len(prompt_ids) + max_new_tokens)
    model.eval()
    tokens = list(prompt_ids)
    cache = model.new_cache() if use_cache else None
    feed = tokens
    new: list[int] = []
    while len(new) < max_new_tokens:
        if not use_cache:
            feed = tokens
        logits = model.head1_logits(model.trunk(torch.tensor([feed], device=model.device), cache)[0, -1])
        token = int(logits.argmax())
        new.append(token)
        tokens.append(token)
        feed = [token]
        if token == eos_token_id:
            break
    return new
