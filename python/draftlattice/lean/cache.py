"""The lean step's KV cache: preallocated buffers, written in place, never concatenated.

transformers' ``DynamicCache`` concatenates each layer's keys and values with every forward (the
whole cache copied per layer and step). Here each layer has ``[B, kv_heads, capacity, head_dim]``
keys and values; a forward writes its new tokens at ``[length, length + T)`` and attends to the
first ``length + T`` slots. Capacity grows by doubling when a forward would pass it (a copy,
rare), so no caller has to know the final length in advance.

All layers' keys and values are views of one buffer, so that an edit of the cache is one
tensor op, not one per layer and tensor (60 for the default model, each ~5-10 us on the CPU).

It offers the engine's cache edits (:mod:`draftlattice.decode.cache` calls them): keep a block's
accepted slots (``keep_block``), drop holes (``compact``), repeat rows for the "batch" layout
(``repeat_rows``), with the same meaning as on a ``DynamicCache``.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..decode.cache import compaction_order, gather_slots, keep_slots, keeps_block_prefix


class StaticCache:
    """Keys and values of ``layers`` layers for ``batch`` rows, ``length`` slots in use.

    ``buffer [2, layers, B, kv_heads, capacity, head_dim]`` holds them; ``keys[i]`` and
    ``values[i]`` are views of layer ``i``'s (contiguous, as the fused C++ step needs them)."""

    def __init__(self, layers: int, batch: int, kv_heads: int, head_dim: int, capacity: int, dtype, device) -> None:
        self._use(torch.zeros((2, layers, batch, kv_heads, max(capacity, 1), head_dim), dtype=dtype, device=device))
        self.length = 0

    def _use(self, buffer: Tensor) -> None:
        self.buffer = buffer
        self.keys, self.values = list(buffer[0]), list(buffer[1])
        self._bits: tuple[list, list] | None = None

    @property
    def capacity(self) -> int:
        return self.buffer.shape[-2]

    @property
    def batch(self) -> int:
        return self.buffer.shape[2]

    def get_seq_length(self) -> int:
        """Slots in use (the ``DynamicCache`` method of the same name)."""
        return self.length

    def layer_bits(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Each layer's keys and values as int16 numpy views of a 16-bit cache's bits, as the fused
        C++ step reads and writes them; made once per buffer (60 views a step cost 0.1-0.2 ms)."""
        if self._bits is None:
            bits = [t.view(torch.int16).numpy() for t in (*self.keys, *self.values)]
            self._bits = (bits[: len(self.keys)], bits[len(self.keys) :])
        return self._bits

    def reserve(self, new_tokens: int) -> None:
        """Room for ``new_tokens`` more slots (capacity doubled until they fit)."""
        need = self.length + new_tokens
        if need <= self.capacity:
            return
        capacity = self.capacity
        while capacity < need:
            capacity *= 2
        new = self.buffer.new_zeros(*self.buffer.shape[:-2], capacity, self.buffer.shape[-1])
        new[..., : self.length, :] = self.buffer[..., : self.length, :]
        self._use(new)

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
            kept = keep_slots(self.buffer, past, self.length, rows, index)
            if kept is not self.buffer:
                self._use(kept)
        self.length = past + index.shape[1]

    def compact(self, kv_valid: Tensor, keep: int) -> Tensor:
        """Each row's valid slots, in order, right-aligned in the first ``keep`` slots; returns
        the new ``kv_valid [B, keep]`` (see :func:`draftlattice.decode.cache.compact`)."""
        order = compaction_order(kv_valid, keep)
        self.buffer[..., :keep, :] = gather_slots(self.buffer[..., : self.length, :], order)
        self.length = keep
        return kv_valid.gather(1, order)

    def repeat_rows(self, repeats: int) -> None:
        """Row ``b`` becomes rows ``b*repeats .. b*repeats+repeats-1``."""
        self._use(self.buffer.repeat_interleave(repeats, dim=2))
