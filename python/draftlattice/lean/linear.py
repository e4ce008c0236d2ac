"""The lean step's linear layers in each weight format: dense, int8 or int4 weight-only.

On a 2-core CPU a decoding step of the default model is bound by reading its weights (269 MB in
bf16; 2-4 GB/s of useful bandwidth reach a bf16 GEMV here). Weight-only quantization reads fewer
bytes and dequantizes in registers, through PyTorch's own CPU kernels:

* ``"int8"``: symmetric int8 per output channel (``aten._weight_int8pack_mm``);
* ``"int4"``: asymmetric 4-bit in groups of 32 input columns, a scale and a zero point per group
  (``aten._weight_int4pack_mm_for_cpu``). The default model ships as a Q4_1 GGUF, which is this
  very scheme (groups of 32, a scale and a minimum), so its linear layers quantize back to their
  GGUF codes: int4 costs no accuracy beyond the bf16 rounding of the scales.

Both kernels are fast only with bfloat16 activations on the CPU (float32 inputs take a scalar
path, 50x slower), so quantized layers compute in bfloat16. A layer is a plain callable
``x [..., in] -> [..., out]``; weights are packed once, at construction.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

WEIGHT_FORMATS = ("dense", "int8", "int4")
INT4_GROUP = 32  #: input columns per int4 scale (Q4_1's block)
INT4_INNER_TILES = 1  #: the CPU int4 packing's layout argument (fixed by the kernel)


class DenseLinear:
    """``x @ W.T`` with ``W`` kept in the compute dtype (bf16 or float32)."""

    format = "dense"

    def __init__(self, weight: Tensor, dtype: torch.dtype) -> None:
        self.weight = weight.detach().to(dtype).contiguous()
        self.out_features = self.weight.shape[0]

    def __call__(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight)

    @property
    def nbytes(self) -> int:
        return self.weight.numel() * self.weight.element_size()


class Int8Linear:
    """Weight-only int8, one symmetric scale per output channel; bf16 activations."""

    format = "int8"

    def __init__(self, weight: Tensor) -> None:
        w = weight.detach().float()
        scale = (w.abs().amax(dim=1) / 127.0).clamp(min=torch.finfo(torch.float32).tiny)
        self.qweight = (w / scale[:, None]).round().clamp(-127, 127).to(torch.int8).contiguous()
        self.scale = scale.to(torch.bfloat16)
        self.out_features = w.shape[0]

    def __call__(self, x: Tensor) -> Tensor:
        shape = x.shape
        out = torch.ops.aten._weight_int8pack_mm(x.reshape(-1, shape[-1]), self.qweight, self.scale)
        return out.view(*shape[:-1], self.out_features)

    @property
    def nbytes(self) -> int:
        return self.qweight.numel() + self.scale.numel() * 2


class Int4Linear:
    """Weight-only int4 in groups of :data:`INT4_GROUP` columns (scale and zero point each, the
    Q4_1 scheme: ``w = min + scale * q``, ``q`` in 0..15); bf16 activations."""

    format = "int4"

    def __init__(self, weight: Tensor) -> None:
        out_features, in_features = weight.shape
        if in_features % INT4_GROUP:
            raise ValueError(f"int4 weights need in_features divisible by {INT4_GROUP}, got {in_features}")
        groups = weight.detach().float().view(out_features, in_features // INT4_GROUP, INT4_GROUP)
        low = groups.amin(-1, keepdim=True)
        scale = ((groups.amax(-1, keepdim=True) - low) / 15.0).clamp(min=torch.finfo(torch.float32).tiny)
        codes = ((groups - low) / scale).round().clamp(0, 15).to(torch.int32).view(out_features, in_features)
        self.qweight = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes, INT4_INNER_TILES)
        # The kernel computes (q - 8) * scale + zero: the zero point is the value of code 8.
        zero = low + 8 * scale
        pairs = torch.stack([scale.squeeze(-1), zero.squeeze(-1)], dim=-1)  # [out, groups, 2]
        self.scale_zero = pairs.transpose(0, 1).contiguous().to(torch.bfloat16)  # [groups, out, 2]
        self.out_features = out_features

    def __call__(self, x: Tensor) -> Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1]).contiguous()
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(flat, self.qweight, INT4_GROUP, self.scale_zero)
        return out.view(*shape[:-1], self.out_features)

    @property
    def nbytes(self) -> int:
        return self.qweight.numel() * self.qweight.element_size() + self.scale_zero.numel() * 2


def make_linear(weight: Tensor, weights: str, dtype: torch.dtype):
    """``weight [out, in]`` as a layer of format ``weights`` (:data:`WEIGHT_FORMATS`)."""
    if weights == "dense":
        return DenseLinear(weight, dtype)
    if weight.device.type != "cpu":
        raise ValueError(f"{weights} weights run on the CPU only (PyTorch's CPU kernels); use weights='dense' on GPUs")
    if dtype != torch.bfloat16:
        raise ValueError(f"{weights} weights compute in bfloat16 (their CPU kernels' fast path), not {dtype}")
    return Int8Linear(weight) if weights == "int8" else Int4Linear(weight)


def check_weights(weights: str) -> str:
    """``weights`` if it names a format of :data:`WEIGHT_FORMATS`; ValueError otherwise."""
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHT_FORMATS)}, got {weights!r}")
    return weights
