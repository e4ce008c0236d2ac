"""Key/value cache of :class:`BlockwiseLM` with rollback for speculative decoding.

Per layer, keys and values are tensors [B, n_head, S, d_head] (keys already rotated). Appending
is a concatenation along S (O(S) per call; the shipped models are small). ``crop`` rolls back to a
prefix; ``select`` keeps the committed prefix plus a chosen, ordered subset of the newest entries
(the accepted path of a token tree); ``batch_select``/``expand`` manage rows for multi-draft
verification.
"""

from __future__ import annotations

import torch


class KVCache:
    """Growable per-layer key/value store. ``length`` is the number of cached positions S."""

    def __init__(self, n_layer: int) -> None:
        if n_layer <= 0:
            raise ValueError(f"n_layer must be positive, got {n_layer}")
        self.keys: list[torch.Tensor | None] = [None] * n_layer
        self.values: list[torch.Tensor | None] = [None] * n_layer
        self._length = 0
        # Length before the most recent forward's append: the default prefix of ``select``.
        self.prefix_length = 0

    @property
    def n_layer(self) -> int:
        return len(self.keys)

    @property
    def length(self) -> int:
        return self._length

    @property
    def batch_size(self) -> int | None:
        return None if self.keys[0] is None else self.keys[0].shape[0]

    def __len__(self) -> int:
        return self._length

    def _device(self) -> torch.device | None:
        """Where the cached tensors live (None while empty: the caller's tensors stay put)."""
        return None if self.keys[0] is None else self.keys[0].device

    def append(self, layer: int, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append [B, n_head, T, d_head] to ``layer``; return the full keys/values [.., S+T, ..].

        The cache length advances once all layers have appended (``layer == n_layer - 1``).
        """
        old_k, old_v = self.keys[layer], self.values[layer]
        if old_k is None:
            new_k, new_v = key, value
        else:
            if old_k.shape[0] != key.shape[0]:
                raise ValueError(f"cache batch size {old_k.shape[0]} != input batch size {key.shape[0]}")
            new_k, new_v = torch.cat([old_k, key], dim=2), torch.cat([old_v, value], dim=2)
        self.keys[layer], self.values[layer] = new_k, new_v
        if layer == self.n_layer - 1:
            self.prefix_length = self._length
            self._length = new_k.shape[2]
        return new_k, new_v

    def crop(self, new_length: int) -> None:
        """Keep the first ``new_length`` positions (0 <= new_length <= length)."""
        if not 0 <= new_length <= self._length:
            raise ValueError(f"crop length {new_length} outside [0, {self._length}]")
        for i in range(self.n_layer):
            if self.keys[i] is not None:
                self.keys[i] = self.keys[i][:, :, :new_length]
                self.values[i] = self.values[i][:, :, :new_length]
        self._length = new_length
        self.prefix_length = min(self.prefix_length, new_length)

    def select(self, positions: torch.Tensor, prefix: int | None = None) -> None:
        """Keep ``cache[:prefix]`` followed by the entries at ``positions`` (LongTensor[m]), in order.

        ``positions`` are absolute cache indices, each in [prefix, length). ``prefix`` defaults
        to the length before the most recent forward (the committed prefix of a tree
        verification call), so ``select(prefix + accepted_node_indices)`` keeps the accepted path.
        """
        prefix = self.prefix_length if prefix is None else prefix
        if not 0 <= prefix <= self._length:
            raise ValueError(f"prefix {prefix} outside [0, {self._length}]")
        positions = torch.as_tensor(positions, dtype=torch.long, device=self._device()).reshape(-1)
        if positions.numel() and (int(positions.min()) < prefix or int(positions.max()) >= self._length):
            raise ValueError(f"select positions must lie in [{prefix}, {self._length}), got {positions.tolist()}")
        for i in range(self.n_layer):
            if self.keys[i] is None:
                continue
            index = torch.cat([torch.arange(prefix, device=self.keys[i].device), positions])
            self.keys[i] = self.keys[i].index_select(2, index)
            self.values[i] = self.values[i].index_select(2, index)
        self._length = prefix + positions.numel()
        self.prefix_length = prefix

    def batch_select(self, rows: torch.Tensor | list[int]) -> None:
        """Keep the batch rows ``rows`` (LongTensor[r]), in that order (repeats allowed)."""
        rows = torch.as_tensor(rows, dtype=torch.long, device=self._device()).reshape(-1)
        batch = self.batch_size
        if batch is not None and rows.numel() and (int(rows.min()) < 0 or int(rows.max()) >= batch):
            raise ValueError(f"batch rows {rows.tolist()} outside [0, {batch})")
        for i in range(self.n_layer):
            if self.keys[i] is not None:
                self.keys[i] = self.keys[i].index_select(0, rows)
                self.values[i] = self.values[i].index_select(0, rows)

    def expand(self, n: int) -> None:
        """Repeat a batch-1 cache to ``n`` identical rows (one per draft)."""
        if n <= 0:
            raise ValueError(f"expand count must be positive, got {n}")
        if self.batch_size not in (None, 1):
            raise ValueError(f"expand needs a batch-1 cache, got batch {self.batch_size}")
        if self.batch_size is not None:
            self.batch_select(torch.zeros(n, dtype=torch.long, device=self.keys[0].device))
