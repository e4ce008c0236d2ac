"""Weight-only quantized linear layers, in the default model's own GGUF schemes, and the kernels
that multiply them. Both schemes quantize groups of 32 input columns:

* int4 (Q4_1): ``w = min + scale * q``, q in 0..15, a scale and a minimum per group. The
  default model's linear layers ship as Q4_1, so they quantize back to their GGUF codes exactly.
* int8 (Q8_0): ``w = scale * q``, q in -127..127, a scale per group. The default model's
  embedding (its output layer, tied) ships as Q8_0.

Two families of kernels, the fastest the CPU has:

* draftlattice's own (``_core.lowbit_matmul``, csrc/lowbit/): each weight tile is decoded once
  and multiplied with every row of the call, on a persistent pool of threads, with (in order of
  preference) AVX-512 VNNI (activations quantized to int8 per group of 32 as llama.cpp's Q8_0,
  exact integer sums: twice the products per instruction), AVX-512 BF16 (exact products of bf16
  activations and codes, float32 sums), AVX2 with int8 activations (``avx2-int8``: vpmaddubsw,
  the VNNI kernel's results bit for bit) or AVX2 FMAs (``avx2``: float32 activations). On CPUs with
  AMX, ``amx-int8`` runs the VNNI kernel's integer products as tile products (its results bit
  for bit, and the same attention beside it in a fused step: :data:`SAME_BITS`; ``LeanLlama``'s ``auto``
  keeps the VNNI kernel, and ``load_default`` takes whichever of the two its fastest drafting is
  predicted faster on, measured on the CPU). Its cost grows slowly with the rows a step
  verifies (one to ~16 draft tokens), and a row's result never depends on the other rows: a
  drafted step computes each token exactly as a one-token step would. Scales and minima are
  float16, as in GGUF blocks: a one-token step is bound by the bytes it reads.
* PyTorch's (``aten._weight_int4pack_mm_for_cpu``; ``aten._weight_int8pack_mm``, which takes one
  scale per output channel instead of per group) where no vector kernel of ours runs (CPUs
  without AVX2, e.g. ARM): their cost grows with the rows, and they round scales to bf16.

Activations are bfloat16 in and out (the integer kernels quantize them to int8 per group of 32
inside, as llama.cpp's Q8_0).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from .. import _core

GROUP = 32  #: input columns per scale (Q4_1's and Q8_0's block)
LANES = 16  #: outputs per block of the packed layout (csrc/lowbit/matmul.h)
HALF_TINY = 2.0**-24  #: float16's smallest positive value: the scale of a group of zeros
VECTOR_KERNELS = ("avx512-vnni", "amx-int8", "avx512-bf16", "avx2-int8", "avx2")  #: our kernels that beat PyTorch's
#: Kernels whose steps give the same bits: the AMX kernel multiplies the VNNI kernel's decoded
#: codes on tiles, then adds the same float terms in the same order (csrc/lowbit/vnni_codes.h),
#: and a fused step runs the same attention beside both (csrc/lowbit/attention.cc). So the faster
#: on a CPU may be taken without moving an output. (``avx2-int8`` multiplies as they do, but its
#: fused steps attend in plain C++: not the same bits.)
SAME_BITS = ("avx512-vnni", "amx-int8")


def check_kernel(kernel: str) -> str:
    """``kernel`` if quantized layers can run on it here: "auto", "torch" (PyTorch's kernels) or
    one of ``_core.lowbit_kernels()`` (ours this CPU runs); ValueError otherwise."""
    known = ("auto", "torch", *_core.lowbit_kernels())
    if kernel not in known:
        raise ValueError(f"kernel must be one of {', '.join(known)} on this CPU, got {kernel!r}")
    return kernel


def best_kernel() -> str:
    """Our fastest vector kernel on this CPU, or "torch" (PyTorch's kernels) when it has none."""
    return next((k for k in _core.lowbit_kernels() if k in VECTOR_KERNELS), "torch")


def same_bits_kernels(kernel: str) -> list[str]:
    """``kernel`` and the other kernels this CPU runs whose steps give its bits (:data:`SAME_BITS`)."""
    if kernel not in SAME_BITS:
        return [kernel]
    return [kernel, *(k for k in SAME_BITS if k != kernel and k in _core.lowbit_kernels())]


def _groups(weight: Tensor) -> Tensor:
    n, k = weight.shape
    if k % GROUP:
        raise ValueError(f"quantized weights need in_features divisible by {GROUP}, got {k}")
    return weight.detach().float().view(n, k // GROUP, GROUP)


def _half(values: Tensor, what: str) -> Tensor:
    """``values`` rounded to float16 (the kernels keep scales and minima in float16, as GGUF
    blocks do), as float32."""
    largest = float(values.abs().max()) if values.numel() else 0.0
    if not largest <= torch.finfo(torch.float16).max:
        raise ValueError(f"quantized weights need {what} within float16's range, got {largest:g}")
    return values.to(torch.float16).float()


def quantize_int4(weight: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``weight [n, k]`` as codes ``[n, k]`` (0..15), scales and minima ``[n, k / 32]`` (float16
    values): per group, the minimum and (max - min) / 15, the codes rounded to nearest. The
    default model's Q4_1 blocks come back exactly: their scales and minima are float16."""
    groups = _groups(weight)
    low = _half(groups.amin(-1), "group minima")
    scale = _half((groups.amax(-1) - low) / 15.0, "group scales").clamp(min=HALF_TINY)
    codes = ((groups - low[..., None]) / scale[..., None]).round().clamp(0, 15).to(torch.int32)
    return codes.view(weight.shape), scale, low


def quantize_int8(weight: Tensor) -> tuple[Tensor, Tensor]:
    """``weight [n, k]`` as codes ``[n, k]`` (-127..127) and scales ``[n, k / 32]`` (max |w| /
    127 per group, float16 values), the codes rounded to nearest."""
    groups = _groups(weight)
    scale = _half(groups.abs().amax(-1) / 127.0, "group scales").clamp(min=HALF_TINY)
    codes = (groups / scale[..., None]).round().clamp(-127, 127).to(torch.int32)
    return codes.view(weight.shape), scale


def pack(codes: Tensor, bits: int) -> np.ndarray:
    """Codes ``[n, k]`` in the kernel's layout ``[blocks, groups, 16 pairs, bytes]``: for int4 a
    byte per lane holding a pair's first code in its low nibble; for int8 a lane's two codes."""
    n, k = codes.shape
    blocks = -(-n // LANES)
    pairs = F.pad(codes, (0, 0, 0, blocks * LANES - n)).view(blocks, LANES, k // GROUP, GROUP // 2, 2)
    if bits == 4:
        packed = (pairs[..., 0] | (pairs[..., 1] << 4)).to(torch.uint8).permute(0, 2, 3, 1)
    else:
        packed = (
            pairs.to(torch.int8)
            .view(torch.uint8)
            .permute(0, 2, 3, 1, 4)
            .reshape(blocks, k // GROUP, GROUP // 2, 2 * LANES)
        )
    return packed.contiguous().numpy()


def pack_lanes(values: Tensor) -> np.ndarray:
    """Per-group values ``[n, groups]`` in the kernel's layout ``[blocks, groups, 16]``, as
    float16 bits (uint16)."""
    n = values.shape[0]
    blocks = -(-n // LANES)
    padded = F.pad(values.to(torch.float16), (0, 0, 0, blocks * LANES - n))
    return padded.view(blocks, LANES, -1).permute(0, 2, 1).contiguous().view(torch.int16).numpy().view(np.uint16)


class LowbitLinear:
    """A layer run by our kernel: Q4_1-scheme (``bits=4``) or Q8_0-scheme (``bits=8``) codes."""

    def __init__(self, weight: Tensor, bits: int, kernel: str) -> None:
        if kernel not in _core.lowbit_kernels():
            raise ValueError(f"kernel {kernel!r} is not one of torch, {', '.join(_core.lowbit_kernels())}")
        self.format = f"int{bits}"
        self.out_features = weight.shape[0]
        self.bits, self.kernel = bits, kernel
        self.threads: int | None = None  #: the kernel's threads (None: torch.get_num_threads())
        if bits == 4:
            codes, scale, low = quantize_int4(weight)
            self.mins = pack_lanes(low)
        else:
            codes, scale = quantize_int8(weight)
            self.mins = None
        self.codes, self.scales = pack(codes, bits), pack_lanes(scale)
        self.nbytes = self.codes.nbytes + self.scales.nbytes + (0 if self.mins is None else self.mins.nbytes)

    def __call__(self, x: Tensor) -> Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1]).contiguous()
        if flat.dtype != torch.bfloat16 or flat.device.type != "cpu":
            raise ValueError(f"quantized layers take bfloat16 CPU activations, got {flat.dtype} on {flat.device}")
        out = torch.empty(flat.shape[0], self.out_features, dtype=torch.bfloat16)
        _core.lowbit_matmul(
            flat.view(torch.int16).numpy(),
            self.bits,
            self.codes,
            self.scales,
            self.mins,
            self.out_features,
            out.view(torch.int16).numpy(),
            self.threads or torch.get_num_threads(),
            self.kernel,
        )
        return out.view(*shape[:-1], self.out_features)


class TorchInt4Linear:
    """Q4_1-scheme codes through PyTorch's int4 kernel (scales and zero points rounded to bf16)."""

    format, kernel, threads = "int4", "torch", None

    def __init__(self, weight: Tensor) -> None:
        codes, scale, low = quantize_int4(weight)
        self.out_features = weight.shape[0]
        self.qweight = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes, 1)
        # PyTorch's kernel computes (q - 8) * scale + zero: the zero point is the value of code 8.
        pairs = torch.stack([scale, low + 8 * scale], dim=-1)  # [out, groups, 2]
        self.scale_zero = pairs.transpose(0, 1).contiguous().to(torch.bfloat16)
        self.nbytes = self.qweight.numel() * self.qweight.element_size() + self.scale_zero.numel() * 2

    def __call__(self, x: Tensor) -> Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1]).contiguous()
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(flat, self.qweight, GROUP, self.scale_zero)
        return out.view(*shape[:-1], self.out_features)


class TorchInt8Linear:
    """Symmetric int8 per output channel through PyTorch's int8 kernel (one scale a row)."""

    format, kernel, threads = "int8", "torch", None

    def __init__(self, weight: Tensor) -> None:
        w = weight.detach().float()
        scale = (w.abs().amax(dim=1) / 127.0).clamp(min=torch.finfo(torch.float32).tiny)
        self.qweight = (w / scale[:, None]).round().clamp(-127, 127).to(torch.int8).contiguous()
        self.scale = scale.to(torch.bfloat16)
        self.out_features = w.shape[0]
        self.nbytes = self.qweight.numel() + self.scale.numel() * 2

    def __call__(self, x: Tensor) -> Tensor:
        shape = x.shape
        out = torch.ops.aten._weight_int8pack_mm(x.reshape(-1, shape[-1]), self.qweight, self.scale)
        return out.view(*shape[:-1], self.out_features)


def quantized_linear(weight: Tensor, weights: str, kernel: str = "auto"):
    """``weight [out, in]`` as an ``"int4"`` or ``"int8"`` layer. ``kernel``: "auto"
    (:func:`best_kernel`), "torch", or one of ``_core.lowbit_kernels()``."""
    bits = {"int4": 4, "int8": 8}[weights]
    kernel = best_kernel() if check_kernel(kernel) == "auto" else kernel
    if kernel == "torch":
        return TorchInt4Linear(weight) if bits == 4 else TorchInt8Linear(weight)
    return LowbitLinear(weight, bits, kernel)
