"""Activations as the integer low-bit kernels see them (csrc/lowbit/quantize.h): a reference for
their tests."""

from __future__ import annotations

import torch

from draftlattice import _core

#: our kernels that quantize activations to int8 (the rest multiply them as they are)
INTEGER_KERNELS = [k for k in _core.lowbit_kernels() if k in ("avx512-vnni", "avx2-int8")]


def q8_activations(x: torch.Tensor) -> torch.Tensor:
    """``x [..., k]`` (float64) after the integer kernels' quantization: per group of 32, codes
    round(x * 127 / max|x|) (ties to even) times max|x| / 127."""
    groups = x.float().reshape(*x.shape[:-1], -1, 32)
    largest = groups.abs().amax(-1, keepdim=True)
    # a float32 division, as the kernel's (PyTorch's `127.0 / t` multiplies by a reciprocal)
    inverse = torch.where(largest > 0, torch.full_like(largest, 127.0) / largest, torch.zeros_like(largest))
    codes = torch.round(groups * inverse).clamp(-127, 127)
    return (codes.double() * (largest / 127.0).double()).reshape(x.shape)
