"""The base model as the engine calls it: one forward of the transformer body over new tokens.

The engine never calls the model's own ``forward``: it needs the final hidden states (the draft
heads read them) and computes logits itself, only where a step needs them.
"""

from __future__ import annotations

import inspect
import time
from contextlib import nullcontext
from dataclasses import dataclass

import torch
from torch import Tensor

# Largest verification forward (rows x nodes) whose output projection also computes the draft
# heads' logits at every node. Measured on the 2-core CPU (SmolLM2, bf16, h = 4, V = 49,152, runs
# alternated): 4-node chains 63-78 -> 55-63 ms per step, 13-node trees 78-85 -> 59-67 ms fused.
# Larger forwards (batches of trees) were not measured: they keep two projections.
FUSED_HEADS_MAX_NODES = 32


@dataclass
class Target:
    """A transformers causal LM, its cache and what every verification forward needs."""

    model: object
    cache: object  #: the model's DynamicCache, edited in place
    dtype: torch.dtype  #: dtype of the additive masks (the model's)
    processors: object  #: generate()'s logits processors (may be empty)
    max_position: int  #: largest position id a forward may use
    #: draft heads whose logits are computed with the target's, in one output projection
    heads: object = None
    #: the lean step (:class:`draftlattice.lean.LeanLlama`) that runs the model's forward and
    #: output layer instead of transformers' (its own cache: :meth:`LeanLlama.new_cache`), or None
    step: object = None
    #: wall time inside :meth:`hidden`, :meth:`logits` and :meth:`node_logits` so far: the
    #: target's own share of a step (on an accelerator, launching it; the engine syncs later)
    forward_seconds: float = 0.0

    def __post_init__(self) -> None:
        from .attention import grouped_query_attention  # transformers is there: it made the model

        self.keyword = cache_keyword(self.model)
        self.output_layer = self.model.get_output_embeddings() if self.step is None else self.step.output_layer
        self._grouped_attention = grouped_query_attention

    def hidden(self, input_ids: Tensor, position_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        """``base_model(...).last_hidden_state`` ``[R, N, d]``, the cache extended in place (its
        wall time adds to :attr:`forward_seconds`).

        Positions are clamped to ``max_position``: only draft nodes past ``max_length`` (never
        committed) reach it, and learned position tables (GPT-2) would fail on them. Under a
        verification forward's own 4D mask, grouped-query attention reads the cache without
        repeating it (:mod:`.attention`).
        """
        start = time.perf_counter()
        try:
            return self._hidden(input_ids, position_ids, attention_mask)
        finally:
            self.forward_seconds += time.perf_counter() - start

    def _hidden(self, input_ids: Tensor, position_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        if self.step is not None:
            return self.step.hidden(input_ids, position_ids.clamp(max=self.max_position), attention_mask, self.cache)
        explicit_mask = attention_mask is not None and attention_mask.ndim == 4
        with self._grouped_attention(self.model) if explicit_mask else nullcontext():
            out = self.model.base_model(
                input_ids=input_ids,
                position_ids=position_ids.clamp(max=self.max_position),
                attention_mask=attention_mask,
                use_cache=True,
                **{self.keyword: self.cache},
            )
        return out.last_hidden_state

    def logits(self, hidden: Tensor) -> Tensor:
        """The model's own float32 logits at ``hidden [..., d]``."""
        start = time.perf_counter()
        try:
            return self.step.logits(hidden) if self.step is not None else self.output_layer(hidden).float()
        finally:
            self.forward_seconds += time.perf_counter() - start

    def node_logits(self, hidden: Tensor) -> tuple[Tensor, Tensor | None]:
        """``(logits [..., V] float32, heads 2..h [..., h-1, V] or None)`` at ``hidden [..., d]``.

        For a few nodes, one projection for both: the output layer's weight ([V, d], 56 MB at
        SmolLM2's size) is then read once per step instead of twice, which costs more than the
        heads' extra rows (heads at every node, though the next step needs them at one node).
        For more nodes the extra rows cost more: None, and the heads run at one node later. Heads
        that do not fuse (``fuses_with_target`` false: they read the next token, which the target
        chooses from these logits, or project a draft vocabulary of their own) also run later.
        """
        if (
            self.heads is None
            or not getattr(self.heads, "fuses_with_target", True)
            or hidden[..., 0].numel() > FUSED_HEADS_MAX_NODES
        ):
            return self.logits(hidden), None
        start = time.perf_counter()
        states = torch.cat([hidden.unsqueeze(-2), self.heads(hidden)], dim=-2)  # [..., h, d]
        out = self.output_layer(states)
        self.forward_seconds += time.perf_counter() - start
        return out[..., 0, :].float(), out[..., 1:, :]


def draft_head_logits(heads, model, hidden: Tensor, next_ids: Tensor) -> Tensor:
    """Logits of heads 2..h ``[..., h-1, V]`` at ``hidden [..., d]``, where the target chose
    ``next_ids [...]``: heads whose ``reads_next_token`` is true read it, others only ``hidden``."""
    if getattr(heads, "reads_next_token", False):
        return heads.logits(hidden, model, next_ids)
    return heads.logits(hidden, model)


def cache_keyword(model) -> str:
    """Name of the base model's cache argument (``cache`` in recent transformers 5.x, where
    ``past_key_values`` is deprecated; ``past_key_values`` before)."""
    parameters = inspect.signature(model.base_model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def max_position(model, max_length: int) -> int:
    """The largest position id generation up to ``max_length`` tokens may use."""
    limit = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
    return max(limit or 0, max_length) - 1
