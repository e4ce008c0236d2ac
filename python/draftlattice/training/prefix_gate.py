"""Weighing each head's loss by whether the lattice's path survives to it (the prefix gate).

A draft from a top-k lattice is accepted up to token ``j`` only when every head before ``j`` had
its token among its ``k`` candidates: the lattice's oracle is ``sum_j prod_{i<=j} 1[y_i in
top-k_i]``. Plain cross-entropy spends head ``j``'s capacity equally on every position, also on
those where an earlier head already missed, where head ``j`` cannot add a token. The gate weighs
head ``j``'s loss at position ``t`` by ``(1 - weight) + weight * prod_{i<j} 1[rank_i(t) < k]``
(the earlier heads' ranks at the same ``t``, from the same step, no gradient): at ``weight = 1``
each head learns only where the path reaches it, which is the oracle's derivative with the later
heads' factor dropped. Head 2 (after the model's own token, which greedy targets always hold) is
never gated.

The loss stays a mean over all positions, so a later head's total weight shrinks with the
fraction of positions the path reaches, as its share of the oracle does.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class PrefixGate:
    """``k``: the lattice's width the gate counts ranks against; ``weight`` in [0, 1]: how much of
    each position's loss depends on the path reaching it (0 = plain cross-entropy)."""

    k: int = 8
    weight: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"prefix gate k must be a positive int, got {self.k!r}")
        w = self.weight
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 <= w <= 1:
            raise ValueError(f"prefix gate weight must be a number in [0, 1], got {w!r}")

    def start(self, targets: Tensor) -> Tensor:
        """Survival ``[B, T]`` of the paths starting at each position: all alive (float 1)."""
        return torch.ones(targets.shape, dtype=torch.float32, device=targets.device)

    def row_weights(self, alive: Tensor, keep: Tensor) -> Tensor:
        """Loss weights of a head's rows: ``alive[:, :T']`` at ``keep [B, T']``, floored."""
        reached = alive[:, : keep.shape[1]][keep]
        return (1.0 - self.weight) + self.weight * reached

    def advance(self, alive: Tensor, keep: Tensor, ranks: Tensor) -> None:
        """Kill, in place, the paths whose head missed (:func:`drop_missed` at this gate's k)."""
        drop_missed(alive, keep, ranks, self.k)


def drop_missed(alive: Tensor, keep: Tensor, ranks: Tensor, k: int) -> None:
    """Kill, in place, the paths of ``alive [B, T]`` (1 = still in the lattice) whose head missed:
    ``ranks [rows]`` (tokens above the target's) of the head's rows at ``keep [B, T']``, a miss
    being rank >= k."""
    head_span = alive[:, : keep.shape[1]]  # a view: writes reach ``alive``
    head_span[keep] = head_span[keep] * (ranks < k).to(alive.dtype)
