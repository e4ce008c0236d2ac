"""Configuration of the blockwise parallel transformer (Stern et al. 2018; Kim et al. 2024)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass
class BlockwiseConfig:
    """Hyper-parameters of :class:`BlockwiseLM`.

    vocab_size: output vocabulary V. n_layer, n_head, d_model, d_ff: the decoder trunk (pre-LN,
    causal self-attention, GELU MLP, rotary positions). num_heads: h, the number of blockwise
    heads (head j = 1..h predicts the token j steps ahead; h = 1 is an ordinary LM).
    head_hidden: hidden width of the feed-forward of heads 2..h. max_seq_len: largest position
    id accepted (rotary tables are built for it). rope_base: rotary frequency base.
    """

    vocab_size: int
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 256
    d_ff: int = 1024
    num_heads: int = 8
    max_seq_len: int = 512
    head_hidden: int = 256
    rope_base: float = 10000.0
    layer_norm_eps: float = 1e-5
    dropout: float = 0.0
    eos_token_id: int | None = None

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ValueError`` naming the first inconsistent field."""
        positive = ("vocab_size", "n_layer", "n_head", "d_model", "d_ff", "num_heads", "max_seq_len", "head_hidden")
        for name in positive:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"BlockwiseConfig.{name} must be a positive int, got {value!r}")
        if self.d_model % self.n_head:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_head {self.n_head}")
        if (self.d_model // self.n_head) % 2:
            raise ValueError(f"head dimension {self.d_model // self.n_head} must be even (rotary)")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout}")
        if self.rope_base <= 1.0:
            raise ValueError(f"rope_base must be > 1, got {self.rope_base}")
        if self.eos_token_id is not None and not 0 <= self.eos_token_id < self.vocab_size:
            raise ValueError(f"eos_token_id {self.eos_token_id} outside vocab {self.vocab_size}")

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_head

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> BlockwiseConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known - {"model_type"})
        if unknown:
            raise ValueError(f"unknown BlockwiseConfig fields: {unknown}")
        return cls(**{k: v for k, v in data.items() if k in known})

    def save(self, path: str | Path) -> None:
        payload = {"model_type": "draftlattice-blockwise", **self.to_dict()}
        Path(path).write_text(json.dumps(payload, indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> BlockwiseConfig:
        try:
            data = json.loads(Path(path).read_text())
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: invalid JSON ({error})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a JSON object")
        return cls.from_dict(data)
