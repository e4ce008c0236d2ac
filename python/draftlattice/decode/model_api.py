"""The few things the decoder needs from a blockwise model, in one place.

A target is any module with ``config.num_heads``, ``config.vocab_size``, ``config.max_seq_len``,
``new_cache()``
and ``forward(input_ids [B, T], cache, position_ids, attention_mask) -> .logits [B, T, h, V]``
whose cache supports ``length``, ``crop``, ``select``, ``expand`` and ``batch_select``
(``draftlattice.model.KVCache``).
"""

from __future__ import annotations

import torch


def num_heads(model) -> int:
    return int(model.config.num_heads)


def vocab_size(model) -> int:
    return int(model.config.vocab_size)


def check_positions(model, total: int) -> None:
    """Raises ValueError if prompt + new tokens exceed the model's positions."""
    limit = getattr(model.config, "max_seq_len", None)
    if limit is not None and total > limit:
        raise ValueError(f"prompt + max_new_tokens = {total} exceeds the model's max_seq_len {limit}")


def new_cache(model):
    return model.new_cache()


def target_forward(model, input_ids: torch.Tensor, cache, position_ids=None, attention_mask=None) -> torch.Tensor:
    """Logits [B, T, h, V]; the cache is extended in place by T positions."""
    return model(input_ids, cache=cache, position_ids=position_ids, attention_mask=attention_mask).logits


def keep_tree_path(cache, prefix: int, nodes) -> None:
    """Keeps the first ``prefix`` cached positions and the tree nodes ``nodes`` (indices into the
    positions appended after the prefix, in path order), dropping the other tree nodes."""
    cache.select(prefix + torch.as_tensor(nodes, dtype=torch.int64), prefix=prefix)
