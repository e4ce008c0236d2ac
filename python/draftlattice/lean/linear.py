"""The lean step's linear layers in each weight format: dense, int8 or int4 weight-only.

On a 2-core CPU a decoding step of the default model is bound by reading its weights (269 MB in
bf16; 2-4 GB/s of useful bandwidth reach a bf16 GEMV here). Weight-only quantization reads fewer
bytes and dequantizes in registers:

* ``"int8"``: symmetric int8 in groups of 32 input columns (Q8_0's scheme);
* ``"int4"``: asymmetric 4-bit in groups of 32 input columns, a scale and a minimum per group
  (Q4_1's scheme). The default model ships as a Q4_1 GGUF, so its linear layers quantize back to
  their GGUF codes: int4 costs no accuracy.

:mod:`.lowbit` holds the formats and their kernels (draftlattice's own, PyTorch's where ours has
no vector code).

Both compute in bfloat16 (PyTorch's int8 kernel takes a scalar path on float32 inputs, 50x
slower). A layer is a plain callable ``x [..., in] -> [..., out]``; weights are packed once, at
construction.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from .lowbit import quantized_linear

WEIGHT_FORMATS = ("dense", "int8", "int4")


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


def make_linear(weight: Tensor, weights: str, dtype: torch.dtype, kernel: str = "auto"):
    """``weight [out, in]`` as a layer of format ``weights`` (:data:`WEIGHT_FORMATS`); quantized
    formats run on ``kernel`` (:func:`.lowbit.quantized_linear`)."""
    if weights == "dense":
        return DenseLinear(weight, dtype)
    if weight.device.type != "cpu":
        raise ValueError(f"{weights} weights run on the CPU only (CPU kernels); use weights='dense' on GPUs")
    if dtype != torch.bfloat16:
        raise ValueError(f"{weights} weights compute in bfloat16 (their kernels' fast path), not {dtype}")
    return quantized_linear(weight, weights, kernel)


def check_weights(weights: str) -> str:
    """``weights`` if it names a format of :data:`WEIGHT_FORMATS`; ValueError otherwise."""
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHT_FORMATS)}, got {weights!r}")
    return weights
