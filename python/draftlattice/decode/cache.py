"""Editing a transformers ``DynamicCache`` after verification, and the masks that go with it.

The cache keeps every row at one common length ``L``; rows that accepted fewer tokens than the
longest row leave *holes* (slots no later query may see). ``kv_valid [B, L]`` (bool, on the
model's device) records which slots hold real tokens: left padding of the prompt and holes are
False. Positions are always passed explicitly, so holes do not shift anyone's positions, and
masked slots get exactly zero attention weight: each row's output equals decoding it alone.
:func:`compact` removes the holes when they make up much of the cache.
"""

from __future__ import annotations

import torch
from torch import Tensor


def cache_layers(cache) -> list:
    """The cache's layers, each with ``keys``/``values`` ``[B, heads, L, head_dim]``.

    Only plain dynamic layers can be rolled back by indexing; sliding-window, static and
    quantised layers raise ``ValueError``. The lean step's own cache
    (:class:`draftlattice.lean.StaticCache`) edits itself: it has no layers to return.
    """
    if _edits_itself(cache):
        return []
    from transformers.cache_utils import DynamicLayer

    layers = getattr(cache, "layers", None)
    if layers is None:
        raise ValueError(f"unsupported cache {type(cache).__name__}: draftlattice needs a transformers DynamicCache")
    for layer in layers:
        if type(layer) is not DynamicLayer:
            raise ValueError(
                f"unsupported cache layer {type(layer).__name__}: draftlattice edits plain DynamicLayer caches "
                "(disable sliding windows, e.g. config.sliding_window=None, and use the default DynamicCache)"
            )
    return [layer for layer in layers if layer.is_initialized and layer.keys.numel()]


def repeat_rows(cache, repeats: int) -> None:
    """Row ``b`` becomes rows ``b*repeats .. b*repeats+repeats-1`` (for "batch" verification)."""
    if _edits_itself(cache):
        return cache.repeat_rows(repeats)
    for layer in cache_layers(cache):
        layer.keys = layer.keys.repeat_interleave(repeats, dim=0)
        layer.values = layer.values.repeat_interleave(repeats, dim=0)


def keep_block(cache, past: int, rows: Tensor | None, index: Tensor) -> None:
    """After a forward over a block of new tokens: keep the ``past`` context slots and, of the
    block, the slots ``index [B, m]`` (block-relative) in that order; ``rows [B]`` first picks
    one cache row per sequence (None: row b is sequence b).

    The kept slots are written over the block's first slots and the tensor is cut there (a view):
    the context is not copied, the next forward's append copies it once anyway. Where the kept
    slots already are the block's first ones (the root alone, or the first draft's chain), and
    reading ``index`` costs nothing (the CPU), the cut is all there is to do."""
    if _edits_itself(cache):
        return cache.keep_block(past, rows, index)
    m = index.shape[1]
    if rows is None and keeps_block_prefix(index):
        for layer in cache_layers(cache):
            layer.keys, layer.values = layer.keys[:, :, : past + m], layer.values[:, :, : past + m]
        return
    for layer in cache_layers(cache):
        for name in ("keys", "values"):
            t = getattr(layer, name)
            setattr(layer, name, keep_slots(t, past, t.shape[2], rows, index)[:, :, : past + m])


def keeps_block_prefix(index: Tensor) -> bool:
    """Whether the kept slots ``index [B, m]`` are the block's first ones, read where that costs
    nothing (the CPU): then keeping them needs no copy."""
    m = index.shape[1]
    return index.device.type == "cpu" and bool((index == torch.arange(m)).all())


def keep_slots(t: Tensor, past: int, end: int, rows: Tensor | None, index: Tensor) -> Tensor:
    """``t [..., B', H, L, D]`` (rows picked by ``rows [B]`` first, if given) with the block's slots
    ``past + index [B, m]`` (the block is ``past..end``) written at ``past..past+m``, in place.
    Leading dimensions (layers) share the edit."""
    if rows is not None:
        t = t.index_select(-4, rows)
    B, H, _, D = t.shape[-4:]
    m = index.shape[1]
    index = index.view(B, 1, m, 1).expand(*t.shape[:-4], B, H, m, D)
    t[..., past : past + m, :] = t[..., past:end, :].gather(-2, index)
    return t


def additive_mask(kv_valid: Tensor, block: Tensor, dtype: torch.dtype) -> Tensor:
    """4D additive float mask ``[B, 1, T, L + T]`` for a forward over ``T`` new tokens.

    ``kv_valid [B, L]``: the cached slots every new token may see; ``block [B, T, T]`` bool:
    query ``i`` may see new token ``j``. Visible entries are 0, others the dtype's most negative
    finite value (a boolean 4D mask is misread by eager attention). Every query also sees itself,
    so no row is fully masked (padding queries would otherwise produce NaN under fp16).
    """
    B, T, _ = block.shape
    steps = torch.arange(T, device=block.device)
    eye = steps.unsqueeze(1) == steps
    visible = torch.cat([kv_valid.unsqueeze(1).expand(B, T, kv_valid.shape[1]), block | eye], dim=2)
    mask = torch.zeros(visible.shape, dtype=dtype, device=block.device)
    return mask.masked_fill_(~visible, torch.finfo(dtype).min).unsqueeze(1)


def compact(cache, kv_valid: Tensor, keep: int) -> Tensor:
    """Drop the holes: each row's valid slots, in order, right-aligned in ``keep`` slots (the
    largest valid count; shorter rows start with invalid slots, like left padding). Returns the
    new ``kv_valid [B, keep]``. Positions are explicit, so nothing else changes."""
    if _edits_itself(cache):
        return cache.compact(kv_valid, keep)
    order = compaction_order(kv_valid, keep)
    for layer in cache_layers(cache):
        layer.keys, layer.values = gather_slots(layer.keys, order), gather_slots(layer.values, order)
    return kv_valid.gather(1, order)


def compaction_order(kv_valid: Tensor, keep: int) -> Tensor:
    """``[B, keep]``: each row's valid slot indices in order, right-aligned (invalid ones first)."""
    return torch.sort(kv_valid.to(torch.int8), dim=1, stable=True).indices[:, -keep:]


def gather_slots(t: Tensor, order: Tensor) -> Tensor:
    """``t [..., B, H, L, D]``'s slots ``order [B, n]``, per row: ``[..., B, H, n, D]``."""
    B, H, _, D = t.shape[-4:]
    return t.gather(-2, order.view(B, 1, -1, 1).expand(*t.shape[:-4], B, H, order.shape[1], D))


def _edits_itself(cache) -> bool:
    """A cache with its own edits (the lean step's static cache) rather than transformers' layers."""
    return callable(getattr(cache, "keep_block", None))
