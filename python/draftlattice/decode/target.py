"""What the decoder needs from a target model, written down (no probing at run time).

A *blockwise target* has h heads over one vocabulary: head j at input position t scores the token
j steps after t. The decoder splits its forward in two, so that a verification call computes
head 1 at every position (acceptance) but all h heads only at the one accepted position:

    z = target.trunk(input_ids, cache, position_ids, attention_mask)   # [B, T, d], cache extended
    target.head1_logits(z)                                             # [..., V]  (head 1)
    target.head_logits(z)                                              # [B, T, h, V]

``forward`` does both at once (``.logits`` [B, T, h, V]); the two paths agree exactly.
Every tensor the decoder, drafters and verifiers create lives on ``target.device``.

Implemented by :class:`draftlattice.model.BlockwiseLM` and by the transformers adapter
(``draftlattice.hf.HFBlockwiseLM``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import torch


class TargetConfig(Protocol):
    """The target's sizes."""

    num_heads: int  # h >= 1
    vocab_size: int  # V
    max_seq_len: int | None  # positions the target can attend to (None = no limit)


@runtime_checkable
class TargetCache(Protocol):
    """The target's key/value cache, with the rollbacks speculative decoding needs."""

    @property
    def length(self) -> int:
        """Cached positions S."""
        ...

    def crop(self, new_length: int) -> None:
        """Keep the first ``new_length`` positions."""
        ...

    def select(self, positions: torch.Tensor, prefix: int) -> None:
        """Keep ``[:prefix]`` followed by the absolute positions ``positions`` [m] (in order)."""
        ...

    def expand(self, n: int) -> None:
        """Repeat a batch-1 cache to ``n`` identical rows."""
        ...

    def batch_select(self, rows: torch.Tensor) -> None:
        """Keep the batch rows ``rows`` [r] (int64, on the target's device), in order."""
        ...


@runtime_checkable
class BlockwiseTarget(Protocol):
    """A model with h blockwise heads that the decoder can verify drafts with."""

    config: TargetConfig

    @property
    def device(self) -> torch.device:
        """Where the decoder creates every input tensor (token ids, positions, masks, drafts)."""
        ...

    @property
    def dtype(self) -> torch.dtype:
        """Floating dtype of the target's activations (attention masks are built in it)."""
        ...

    def new_cache(self) -> TargetCache:
        """An empty cache for one sequence."""
        ...

    def trunk(
        self,
        input_ids: torch.Tensor,
        cache: TargetCache | None = None,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Final hidden state z [B, T, d] of input_ids [B, T] after the cache (extended in place).

        position_ids [B, T] default to ``cache.length + arange(T)``; attention_mask is additive
        [B, 1, T, cache.length + T] (0 = attend, -inf = blocked), default causal.
        """
        ...

    def head1_logits(self, z: torch.Tensor) -> torch.Tensor:
        """Head 1's logits [..., V] from z [..., d]."""
        ...

    def head_logits(self, z: torch.Tensor) -> torch.Tensor:
        """All heads' logits [B, T, h, V] from z [B, T, d]."""
        ...

    def forward(
        self,
        input_ids: torch.Tensor,
        cache: TargetCache | None = None,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> Any:
        """An object whose ``.logits`` are ``head_logits(trunk(...))`` [B, T, h, V]."""
        ...


def check_target(model: Any) -> BlockwiseTarget:
    """Returns ``model`` if it has every member of :class:`BlockwiseTarget`, else raises TypeError
    naming what is missing."""
    members = ("config", "device", "dtype", "new_cache", "trunk", "head1_logits", "head_logits", "forward")
    missing = [name for name in members if not hasattr(model, name)]
    missing += [
        f"config.{name}"
        for name in ("num_heads", "vocab_size", "max_seq_len")
        if hasattr(model, "config") and not hasattr(model.config, name)
    ]
    if missing:
        raise TypeError(
            f"{type(model).__name__} is not a BlockwiseTarget: it lacks {', '.join(missing)} "
            "(see draftlattice.decode.target)"
        )
    return model


def check_positions(target: BlockwiseTarget, total: int) -> None:
    """Raises ValueError if ``total`` positions (prompt + new tokens) exceed the target's."""
    limit = target.config.max_seq_len
    if limit is not None and total > limit:
        raise ValueError(f"prompt + max_new_tokens = {total} exceeds the model's max_seq_len {limit}")
