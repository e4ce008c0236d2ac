"""The lean step's KV cache: preallocated buffers, written in place, never concatenated.

transformers' ``DynamicCache`` concatenates each layer's keys and values with every forward (the
whole cache copied per layer and step). Here each layer owns ``[B, kv_heads, capacity,
head_dim]`` buffers; a forward writes its new tokens at ``[length, length + T)`` and attends to
the first ``length + T`` slots. Capacity grows by doubling when a forward would pass it (a copy,
rare), so no caller has to know the final length in advance.

It offers the engine's cache edits (:mod:`draftlattice.decode.cache` calls them): keep a block's
accepted slots (``keep_block``), drop holes (``compact``), repeat rows for the "batch" layout
(``repeat_rows``), with the same meaning as on a ``DynamicCache``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..decode.cache import compaction_order, gather_slots, keep_slots, keeps_block_prefix


class StaticCache:
    """Keys and values of ``layers`` layers for ``batch`` rows, ``length`` slots in use."""

    def __init__(self, layers: int, batch: int, kv_heads: int, head_dim: int, capacity: int, dtype, device) -> None:
        shape = (batch, kv_heads, max(capacity, 1), head_dim)
        self.keys = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.values = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(layers)]
        self.length = 0

    @property
    def capacity(self) -> int:
        return self.keys[0].shape[2]

    @property
    def batch(self) -> int:
        return self.keys[0].shape[0]

    def get_seq_length(self) -> int:
        """Slots in use (the ``DynamicCache`` method of the same name)."""
        return self.length

    def reserve(self, new_tokens: int) -> None:
        """Room for ``new_tokens`` more slots (capacity doubled until they fit)."""
        need = self.length + new_tokens
        if need <= self.capacity:
            return
        capacity = self.capacity
        while capacity < need:
            capacity *= 2
        for buffers in (self.keys, self.values):
            for i, old in enumerate(buffers):
                B, H, _, D = old.shape
                new = old.new_zeros(B, H, capacity, D)
                new[:, :, : self.length] = old[:, :, : self.length]
                buffers[i] = new

    def write(self, layer: int, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        """Store a forward's ``[B, kv_heads, T, head_dim]`` keys/values of ``layer`` after the
        used slots; return the layer's keys/values up to and including them (views)."""
        end = self.length + keys.shape[2]
        self.keys[layer][:, :, self.length : end] = keys
        self.values[layer][:, :, self.length : end] = values
        return self.keys[layer][:, :, :end], self.values[layer][:, :, :end]

    def advance(self, new_tokens: int) -> None:
        """The forward that wrote ``new_tokens`` slots per layer is done."""
        self.length += new_tokens

    def keep_block(self, past: int, rows: Tensor | None, index: Tensor) -> None:
        """Of the block after ``past``, keep the slots ``index [B, m]`` (block-relative, in that
        order) at ``past..past+m``; ``rows [B]`` first picks one buffer row per sequence."""
        if rows is not None or not keeps_block_prefix(index):
            for buffers in (self.keys, self.values):
                for i, t in enumerate(buffers):
                    buffers[i] = keep_slots(t, past, self.length, rows, index)
        self.length = past + index.shape[1]

    def compact(self, kv_valid: Tensor, keep: int) -> Tensor:
        """Each row's valid slots, in order, right-aligned in the first ``keep`` slots; returns
        the new ``kv_valid [B, keep]`` (see :func:`draftlattice.decode.cache.compact`)."""
        order = compaction_order(kv_valid, keep)
        for buffers in (self.keys, self.values):
            for t in buffers:
                t[:, :, :keep] = gather_slots(t[:, :, : self.length], order)
        self.length = keep
        return kv_valid.gather(1, order)

    def repeat_rows(self, repeats: int) -> None:
        """Row ``b`` becomes rows ``b*repeats .. b*repeats+repeats-1``."""
        for buffers in (self.keys, self.values):
            for i, t in enumerate(buffers):
                buffers[i] = t.repeat_interleave(repeats, dim=0)
