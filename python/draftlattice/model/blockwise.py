"""Decoder-only transformer with h blockwise prediction heads (Stern et al. 2018; Kim et al. 2024).

Trunk: token embedding, ``n_layer`` pre-LN blocks (causal self-attention with rotary positions,
GELU MLP), final LayerNorm giving the hidden state z_t. Heads: head 1 uses z_t itself; head j >= 2
uses z_t + FFN_j(z_t) (one hidden layer, residual). All heads share the output projection, tied
to the token embedding. Head j at position t predicts token t + j, i.e. ``logits[:, t, j - 1]``
scores the token j steps after input position t.

Position ids are explicit inputs (default: cache length + arange(T)), and the attention mask is
an additive float mask [B, 1, T, S] over the S = cached + T keys (default: causal), so a token
tree can be verified in one call by giving each node its depth as position and a mask that lets
it see only its ancestors.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from . import io
from .cache import KVCache
from .config import BlockwiseConfig
from .heads import ResidualHead


@dataclass
class BlockwiseOutput:
    """logits: [B, T, h, V] (head j at t predicts token t + j + 1, 0-based j); hidden: [B, T, d]."""

    logits: torch.Tensor
    hidden: torch.Tensor


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of x [B, H, T, D] with cos/sin [B, 1, T, D/2] (half-split convention)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, config: BlockwiseConfig) -> None:
        super().__init__()
        self.n_head, self.d_head = config.n_head, config.d_head
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.out = nn.Linear(config.d_model, config.d_model)
        self.dropout = config.dropout

    def forward(self, x, cos, sin, layer, cache, mask):
        B, T, _ = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.n_head, self.d_head).permute(2, 0, 3, 1, 4)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        if cache is not None:
            k, v = cache.append(layer, k, v)
        drop = self.dropout if self.training else 0.0
        if mask is None:  # causal over fresh keys only (no cache or empty cache)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=drop)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=drop)
        return self.out(y.transpose(1, 2).reshape(B, T, -1))


class Block(nn.Module):
    def __init__(self, config: BlockwiseConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.attn = Attention(config)
        self.ln2 = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.mlp = nn.Sequential(
            nn.Linear(config.d_model, config.d_ff), nn.GELU(), nn.Linear(config.d_ff, config.d_model)
        )
        self.drop = nn.Dropout(config.dropout)

    def forward(self, x, cos, sin, layer, cache, mask):
        x = x + self.drop(self.attn(self.ln1(x), cos, sin, layer, cache, mask))
        return x + self.drop(self.mlp(self.ln2(x)))


class BlockwiseLM(nn.Module):
    """Blockwise parallel LM; see the module docstring for the shapes and conventions."""

    def __init__(self, config: BlockwiseConfig) -> None:
        super().__init__()
        config.validate()
        self.config = config
        self.embed = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.heads = nn.ModuleList(
            ResidualHead(config.d_model, config.head_hidden) for _ in range(config.num_heads - 1)
        )
        self.drop = nn.Dropout(config.dropout)
        inv_freq = 1.0 / config.rope_base ** (torch.arange(0, config.d_head, 2).double() / config.d_head)
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)
        self.apply(self._init_weights)
        for head in self.heads:  # re-zero after the generic init
            nn.init.zeros_(head.down.weight)
        for name, p in self.named_parameters():  # GPT-2 scaled init of residual projections
            if name.endswith(("attn.out.weight", "mlp.2.weight")):
                nn.init.normal_(p, std=0.02 / (2 * config.n_layer) ** 0.5)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    @property
    def num_heads(self) -> int:
        return self.config.num_heads

    @property
    def device(self) -> torch.device:
        """Device of the weights (the decoder creates its inputs there)."""
        return self.embed.weight.device

    @property
    def dtype(self) -> torch.dtype:
        """Floating dtype of the weights and activations."""
        return self.embed.weight.dtype

    def new_cache(self) -> KVCache:
        return KVCache(self.config.n_layer)

    def _check_inputs(self, input_ids, cache, position_ids, attention_mask):
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2:
            raise ValueError(
                f"input_ids must be a LongTensor [B, T], got {getattr(input_ids, 'shape', type(input_ids))}"
            )
        if input_ids.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"input_ids must be integer, got {input_ids.dtype}")
        B, T = input_ids.shape
        if T == 0 or B == 0:
            raise ValueError(f"input_ids must be non-empty, got shape {tuple(input_ids.shape)}")
        if int(input_ids.min()) < 0 or int(input_ids.max()) >= self.config.vocab_size:
            raise ValueError(
                f"token ids must lie in [0, {self.config.vocab_size}), got range "
                f"[{int(input_ids.min())}, {int(input_ids.max())}]"
            )
        past = 0 if cache is None else cache.length
        if cache is not None:
            if cache.n_layer != self.config.n_layer:
                raise ValueError(f"cache has {cache.n_layer} layers, model has {self.config.n_layer}")
            if cache.batch_size not in (None, B):
                raise ValueError(f"cache batch size {cache.batch_size} != input batch size {B}")
        if position_ids is not None:
            if tuple(position_ids.shape) != (B, T):
                raise ValueError(f"position_ids shape {tuple(position_ids.shape)} != input shape {(B, T)}")
            if int(position_ids.min()) < 0 or int(position_ids.max()) >= self.config.max_seq_len:
                raise ValueError(
                    f"position ids must lie in [0, {self.config.max_seq_len}), got "
                    f"[{int(position_ids.min())}, {int(position_ids.max())}]"
                )
        elif past + T > self.config.max_seq_len:
            raise ValueError(f"sequence length {past + T} exceeds max_seq_len {self.config.max_seq_len}")
        if attention_mask is not None:
            S = past + T
            if (
                attention_mask.dim() != 4
                or attention_mask.shape[1] != 1
                or attention_mask.shape[2:] != (T, S)
                or attention_mask.shape[0] not in (1, B)
            ):
                raise ValueError(
                    f"attention_mask must be [B, 1, T, S] = [{B}, 1, {T}, {S}], got {tuple(attention_mask.shape)}"
                )
            if not attention_mask.is_floating_point():
                raise ValueError(f"attention_mask must be an additive float mask, got {attention_mask.dtype}")
        return past

    def forward(
        self,
        input_ids: torch.Tensor,
        cache: KVCache | None = None,
        position_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
    ) -> BlockwiseOutput:
        """Run T new tokens [B, T] after the ``cache`` (appended to in place when given).

        position_ids: [B, T], default ``cache.length + arange(T)``. attention_mask: additive
        [B, 1, T, S] with S = cache.length + T (0 = attend, -inf = blocked), default causal.
        Returns logits [B, T, h, V] and the final hidden state [B, T, d_model].
        """
        z = self.trunk(input_ids, cache, position_ids, attention_mask)
        return BlockwiseOutput(logits=self.head_logits(z), hidden=z)

    def trunk(self, input_ids, cache=None, position_ids=None, attention_mask=None) -> torch.Tensor:
        """The final hidden state z [B, T, d_model] (after the final LayerNorm); see ``forward``."""
        past = self._check_inputs(input_ids, cache, position_ids, attention_mask)
        B, T = input_ids.shape
        device = input_ids.device
        if position_ids is None:
            position_ids = torch.arange(past, past + T, device=device).expand(B, T)
        angles = position_ids.to(self.inv_freq.dtype)[:, None, :, None] * self.inv_freq
        cos, sin = angles.cos(), angles.sin()  # [B, 1, T, D/2]
        x = self.drop(self.embed(input_ids))
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        mask = attention_mask
        if mask is None and past > 0:  # causal over cached + new keys
            allowed = torch.ones(T, past + T, dtype=torch.bool, device=device).tril(diagonal=past)
            mask = torch.zeros(T, past + T, dtype=x.dtype, device=device).masked_fill(~allowed, float("-inf"))
            mask = mask[None, None]
        elif mask is not None:
            mask = mask.to(x.dtype)
        for layer, block in enumerate(self.blocks):
            x = block(x, cos, sin, layer, cache, mask)
        return self.ln_f(x)

    def head_states(self, z: torch.Tensor) -> torch.Tensor:
        """Per-head states [B, T, h, d] from the final hidden state z [B, T, d]."""
        return torch.stack([z] + [head(z) for head in self.heads], dim=2)

    def head1_logits(self, z: torch.Tensor) -> torch.Tensor:
        """Head 1's logits [..., V] from z [..., d] (head 1 is z itself, tied projection)."""
        return z @ self.embed.weight.t()

    def head_logits(self, z: torch.Tensor) -> torch.Tensor:
        """Logits [B, T, h, V] from the final hidden state z [B, T, d] (tied output projection)."""
        return self.head_states(z) @ self.embed.weight.t()

    @classmethod
    def from_pretrained(cls, directory, device="cpu", dtype=torch.float32) -> BlockwiseLM:
        """Loads a model directory written by ``save_pretrained`` (see ``draftlattice.model.io``);
        ``ValueError`` if files are missing or do not match the config."""
        model = cls(io.read_config(directory))
        model.load_state_dict(io.read_weights(directory, model.state_dict()))
        return model.to(device=device, dtype=dtype).eval()

    def save_pretrained(self, directory, tokenizer_path=None, storage_dtype=torch.float16) -> None:
        """Writes config.json, model.safetensors (in ``storage_dtype``) and, when given, a copy of
        ``tokenizer_path`` as tokenizer.json."""
        io.save_model(self, directory, tokenizer_path=tokenizer_path, storage_dtype=storage_dtype)
