"""A transformers causal LM as a target of draftlattice's own :class:`BlockwiseDecoder`.

For decoding through transformers' ``generate()`` use :func:`draftlattice.hf.generate` instead.

:class:`HFBlockwiseLM` wraps a ``transformers`` causal LM: head 1 is the model's own LM head,
heads 2..h are Medusa/Stern-style residual feed-forward heads on its final hidden state, sharing
its output projection (new parameters: train them, e.g. with ``draftlattice.model.losses``, or
load trained ones). It exposes the interface :class:`draftlattice.BlockwiseDecoder` uses (logits
[B, T, h, V], a cache with crop/select/expand/batch_select), so the decoder's greedy output is the
HF model's greedy output (tested against ``generate()``), with every drafter. Tree verification
passes a 4-D additive attention mask, which HF models with SDPA/eager attention accept.

Tested with ``LlamaForCausalLM`` and ``GPT2LMHeadModel`` in transformers 5.x (DynamicCache with
per-layer ``keys``/``values``).
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

from ..model.heads import ResidualHead
from .heads import DraftHeads
from .verification import cache_keyword


class HFCache:
    """The decoder's cache interface over a ``transformers.DynamicCache`` (edited per layer)."""

    def __init__(self) -> None:
        from transformers import DynamicCache

        self.inner = DynamicCache()

    def _layers(self):
        return [
            layer
            for layer in self.inner.layers
            if getattr(layer, "keys", None) is not None and getattr(layer, "is_initialized", True)
        ]

    def _apply(self, fn) -> None:
        for layer in self._layers():
            layer.keys, layer.values = fn(layer.keys), fn(layer.values)

    @property
    def length(self) -> int:
        return int(self.inner.get_seq_length())

    def crop(self, new_length: int) -> None:
        """Keep the first ``new_length`` positions."""
        if not 0 <= new_length <= self.length:
            raise ValueError(f"crop length {new_length} outside [0, {self.length}]")
        self._apply(lambda t: t[:, :, :new_length])

    def select(self, positions: torch.Tensor, prefix: int) -> None:
        """Keep ``[:prefix]`` followed by the absolute positions ``positions`` (in order)."""
        positions = torch.as_tensor(positions, dtype=torch.long).reshape(-1)
        keep = lambda t: torch.cat([torch.arange(prefix, device=t.device), positions.to(t.device)])  # noqa: E731
        self._apply(lambda t: t.index_select(2, keep(t)))

    def expand(self, n: int) -> None:
        """Repeat a batch-1 cache to n rows."""
        self._apply(lambda t: t.expand(n, *t.shape[1:]).contiguous())

    def batch_select(self, rows) -> None:
        rows = torch.as_tensor(rows, dtype=torch.long).reshape(-1)
        self._apply(lambda t: t.index_select(0, rows.to(t.device)))


class HFBlockwiseLM(nn.Module):
    """A transformers causal LM with h - 1 extra blockwise heads.

    Args:
        hf_model: a ``transformers`` ``*ForCausalLM`` (eval mode is set by the decoder).
        num_heads: h >= 1 (1 = the HF model alone; the decoder then verifies empty drafts).
        head_hidden: hidden width of heads 2..h (default: the model's hidden size).
        heads: trained :class:`~draftlattice.hf.DraftHeads` of this model to use as heads 2..h
            (then ``num_heads``/``head_hidden`` come from them): the same heads ``dlhf.generate``
            uses, so both decoders run one model.
    """

    def __init__(
        self, hf_model: nn.Module, num_heads: int = 1, head_hidden: int | None = None, heads: DraftHeads | None = None
    ) -> None:
        super().__init__()
        if heads is not None:
            num_heads = heads.horizon
        if num_heads < 1:
            raise ValueError(f"num_heads must be >= 1, got {num_heads}")
        self.hf = hf_model
        cfg = hf_model.config
        width = cfg.hidden_size
        if heads is not None:
            self.heads = heads.heads
        else:
            self.heads = nn.ModuleList(ResidualHead(width, head_hidden or width) for _ in range(num_heads - 1))
        limit = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
        self.config = SimpleNamespace(
            num_heads=num_heads, vocab_size=hf_model.get_output_embeddings().out_features, max_seq_len=limit
        )

    @classmethod
    def from_pretrained(cls, directory, dtype: torch.dtype = torch.float32, device="cpu") -> HFBlockwiseLM:
        """A target folder: ``DIR/model`` (a transformers causal LM with its tokenizer) and
        ``DIR/heads`` (its DraftHeads), as ``lm_models/build_model.sh`` writes them."""
        from transformers import AutoModelForCausalLM

        directory = Path(directory)
        for part in ("model", "heads"):
            if not (directory / part / "config.json").is_file():
                raise FileNotFoundError(f"{directory}: not a draftlattice target folder (no {part}/config.json)")
        model = AutoModelForCausalLM.from_pretrained(directory / "model", dtype=dtype).to(device).eval()
        return cls(model, heads=DraftHeads.from_pretrained(directory / "heads", model))

    @property
    def device(self) -> torch.device:
        return self.hf.get_output_embeddings().weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.hf.get_output_embeddings().weight.dtype

    def new_cache(self) -> HFCache:
        return HFCache()

    def trunk(self, input_ids, cache: HFCache | None = None, position_ids=None, attention_mask=None):
        """Final (normalised) hidden state z [B, T, d] of the HF base model; cache extended in place."""
        past = 0 if cache is None else cache.length
        B, T = input_ids.shape
        if position_ids is None:
            position_ids = torch.arange(past, past + T, device=input_ids.device).expand(B, T)
        if attention_mask is not None:
            attention_mask = attention_mask.expand(B, *attention_mask.shape[1:])
        out = self.hf.base_model(
            input_ids=input_ids,
            **{cache_keyword(self.hf): None if cache is None else cache.inner},
            position_ids=position_ids,
            attention_mask=attention_mask,
            use_cache=cache is not None,
        )
        return out.last_hidden_state

    def head1_logits(self, z: torch.Tensor) -> torch.Tensor:
        """The HF model's own logits [..., V] from z [..., d]."""
        return self.hf.get_output_embeddings()(z)

    def head_logits(self, z: torch.Tensor) -> torch.Tensor:
        """Logits [B, T, h, V] of all heads from z [B, T, d]."""
        lm_head = self.hf.get_output_embeddings()
        return torch.stack([lm_head(z)] + [lm_head(head(z)) for head in self.heads], dim=2)

    def forward(self, input_ids, cache: HFCache | None = None, position_ids=None, attention_mask=None):
        """Logits [B, T, h, V] (head 1 = the HF model's logits); ``cache`` is extended in place."""
        return SimpleNamespace(logits=self.head_logits(self.trunk(input_ids, cache, position_ids, attention_mask)))
