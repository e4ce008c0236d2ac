"""Plain greedy decoding of a batch of left-padded prompts with a lean step: the fast way to
generate self-distillation corpora (:func:`draftlattice.training.distill.distill`).

Why a loop of its own: one token for every row per step is the highest-throughput use of the
step (``B`` rows cost little more than one when the products are memory-bound), and needs none of
the engine's drafting. Each row's output is the step's plain greedy output for that prompt alone
(with the fused step, bit for bit: no row depends on another).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..decode.cache import additive_mask


@torch.inference_mode()
def greedy_batch(
    step, input_ids: Tensor, attention_mask: Tensor, max_new_tokens: int, eos_ids=(), pad_id: int = 0
) -> Tensor:
    """``[B, P + max_new_tokens]``: ``input_ids [B, P]`` (left-padded, ``attention_mask`` 1 on
    tokens) followed by each row's greedy tokens; a row that emits one of ``eos_ids`` keeps it and
    is padded with ``pad_id`` after it."""
    if input_ids.ndim != 2 or attention_mask.shape != input_ids.shape:
        raise ValueError(
            f"input_ids and attention_mask must both be [B, P], got {input_ids.shape}, {attention_mask.shape}"
        )
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    valid = attention_mask.to(step.device).bool()
    if not bool(valid.any(-1).all()):
        raise ValueError("every row needs at least one token (attention_mask all 0 in a row)")
    B, P = input_ids.shape
    cache = step.new_cache(B, P + max_new_tokens)
    positions = (valid.long().cumsum(-1) - 1).clamp(min=0)
    with step.session():
        hidden = step.hidden(input_ids.to(step.device), positions, valid.long(), cache)
        token = step.logits(hidden[:, -1]).argmax(-1)
        keys = valid
        out = [token]
        eos = torch.tensor(list(eos_ids), dtype=token.dtype, device=token.device)
        done = torch.isin(token, eos)
        position = positions[:, -1]
        for _ in range(max_new_tokens - 1):
            if bool(done.all()):
                break
            mask = additive_mask(keys, torch.ones(B, 1, 1, dtype=torch.bool, device=keys.device), step.dtype)
            keys = torch.cat([keys, torch.ones(B, 1, dtype=torch.bool, device=keys.device)], dim=1)
            position = position + 1
            hidden = step.hidden(token[:, None], position[:, None], mask, cache)
            token = step.logits(hidden[:, -1]).argmax(-1)
            token = torch.where(done, torch.full_like(token, pad_id), token)
            out.append(token)
            done |= torch.isin(token, eos)
    new = torch.stack(out, dim=1).cpu()
    if new.shape[1] < max_new_tokens:
        new = torch.cat([new, torch.full((B, max_new_tokens - new.shape[1]), pad_id, dtype=new.dtype)], dim=1)
    return torch.cat([input_ids.cpu(), new], dim=1)
