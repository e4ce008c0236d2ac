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


class Target:
    """The target's verification forward, computing only what a decoding step needs.

    A verification forward needs head 1 at every input position (acceptance) but all h heads only
    at the one accepted position (the next block's drafts). When the model exposes ``trunk(...)
    -> z`` and ``head_logits(z)`` (``BlockwiseLM``, ``draftlattice.hf.HFBlockwiseLM``), heads
    2..h are evaluated on the accepted position only, after acceptance -- still within the same
    serial call, since they only post-process that call's hidden states. With h = 8 and a 4096
    vocabulary this removes most of the output-projection work. Other models fall back to the
    full ``forward``.
    """

    def __init__(self, model) -> None:
        self.model = model
        self._head1 = self._find_head1(model)

    @staticmethod
    def _find_head1(model):
        if not (hasattr(model, "trunk") and hasattr(model, "head_logits")):
            return None
        if hasattr(model, "head1_logits"):
            return model.head1_logits
        embed = getattr(model, "embed", None)
        if not isinstance(getattr(embed, "weight", None), torch.Tensor):
            return None
        # BlockwiseLM ties head 1's projection to the embedding; check that once on a probe.
        weight = embed.weight
        with torch.inference_mode():
            z = torch.randn(1, 1, weight.shape[1], generator=torch.Generator().manual_seed(0)).to(weight)
            if not torch.allclose(z @ weight.t(), model.head_logits(z)[:, :, 0], rtol=1e-4, atol=1e-4):
                return None
        return lambda z: z @ weight.t()

    def forward(self, input_ids, cache, position_ids=None, attention_mask=None) -> "StepOutput":
        if self._head1 is None:
            return StepOutput(target_forward(self.model, input_ids, cache, position_ids, attention_mask), None, None)
        z = self.model.trunk(input_ids, cache, position_ids, attention_mask)
        return StepOutput(None, z, self)


class StepOutput:
    """Output of one verification forward: head 1 everywhere, all heads on demand."""

    def __init__(self, logits, z, target: Target | None) -> None:
        self._logits, self._z, self._target = logits, z, target

    def head1(self) -> torch.Tensor:
        """Head 1's logits [B, T, V] at every input position."""
        if self._logits is not None:
            return self._logits[:, :, 0]
        return self._target._head1(self._z)

    def heads(self, row: int, position: int) -> torch.Tensor:
        """All heads' logits [h, V] at one input position of one row."""
        if self._logits is not None:
            return self._logits[row, position]
        return self._target.model.head_logits(self._z[row : row + 1, position : position + 1])[0, 0]
