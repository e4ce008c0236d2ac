"""The low-bit matrix product (csrc/lowbit/, draftlattice.lean.lowbit): every kernel this CPU runs
against a float64 product of the dequantized weights, bit-identical rows whatever the other rows
and the thread count, and one clear error per bad argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from _q8 import INTEGER_KERNELS, q8_activations
from draftlattice import _core
from draftlattice.lean.lowbit import LowbitLinear, pack, pack_lanes, quantize_int4, quantize_int8

KERNELS = _core.lowbit_kernels()


def _weight(n: int, k: int, seed: int) -> torch.Tensor:
    return torch.randn(n, k, generator=torch.Generator().manual_seed(seed))


def _dequantized(weight: torch.Tensor, bits: int) -> torch.Tensor:
    n, k = weight.shape
    if bits == 4:
        codes, scale, low = quantize_int4(weight)
        return (codes.view(n, -1, 32) * scale[..., None] + low[..., None]).view(n, k)
    codes, scale = quantize_int8(weight)
    return (codes.view(n, -1, 32) * scale[..., None]).view(n, k)


def test_the_portable_kernel_is_always_there():
    assert KERNELS[-1] == "portable"


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n,k,m", [(16, 32, 1), (37, 64, 3), (100, 96, 9), (48, 160, 16)])
def test_matches_the_dequantized_product(bits, kernel, n, k, m):
    weight = _weight(n, k, seed=n + k)
    layer = LowbitLinear(weight, bits, kernel)
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(m)).bfloat16()
    exact = x.double() @ _dequantized(weight, bits).double().t()
    got = layer(x)
    assert got.dtype == torch.bfloat16 and got.shape == (m, n)
    # float32 sums rounded once to bf16: within a few bf16 ulps of the exact product
    torch.testing.assert_close(got.double(), exact, rtol=1e-2, atol=1e-2 * exact.abs().max().item())


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("kernel", KERNELS)
def test_a_row_does_not_depend_on_the_other_rows_or_the_threads(bits, kernel):
    """Why it matters: a drafted step verifies several tokens in one call; each must come out as
    a one-token step computes it, bit for bit."""
    layer = LowbitLinear(_weight(200, 128, seed=3), bits, kernel)
    x = torch.randn(16, 128, generator=torch.Generator().manual_seed(4)).bfloat16()
    layer.threads = 2
    together = layer(x)
    layer.threads = 1
    for row in (0, 5, 15):
        assert torch.equal(layer(x[row : row + 1]), together[row : row + 1])
    assert torch.equal(layer(x[3:12]), together[3:12])


def test_the_vector_kernels_agree_with_the_portable_one():
    weight = _weight(64, 256, seed=5)
    x = torch.randn(5, 256, generator=torch.Generator().manual_seed(6)).bfloat16()
    for bits in (4, 8):
        reference = LowbitLinear(weight, bits, "portable")(x).float()
        for kernel in set(KERNELS) - set(INTEGER_KERNELS):
            torch.testing.assert_close(LowbitLinear(weight, bits, kernel)(x).float(), reference, rtol=8e-3, atol=1e-2)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("kernel", INTEGER_KERNELS)
@pytest.mark.parametrize("n,k,m", [(16, 32, 1), (37, 64, 3), (100, 96, 9), (48, 160, 16)])
def test_the_integer_kernels_multiply_q8_activations_exactly(bits, kernel, n, k, m):
    """Exact integer sums and float32 group terms: the product of the quantized activations and
    the dequantized weights, rounded once to bf16 (within half a bf16 ulp, 2^-8 relative, plus float32's
    rounding of the group terms)."""
    weight = _weight(n, k, seed=n + k)
    x = (3 * torch.randn(m, k, generator=torch.Generator().manual_seed(m))).bfloat16()
    x[0, :32] = 0  # a group of zeros (scale 0)
    exact = q8_activations(x) @ _dequantized(weight, bits).double().t()
    got = LowbitLinear(weight, bits, kernel)(x).double()
    torch.testing.assert_close(got, exact, rtol=2**-8, atol=1e-5 * exact.abs().max().item())


def test_exact_codes_give_exact_integers():
    """Codes and activations that are small integers: every product and sum is exact in float32,
    so each kernel returns the integer result exactly."""
    g = torch.Generator().manual_seed(7)
    codes = torch.randint(-7, 8, (32, 64), generator=g)
    codes[:, 0] = 127  # the group's scale becomes exactly 1
    codes[:, 32] = 127
    x = torch.randint(-3, 4, (4, 64), generator=g).bfloat16()
    x[:, 0] = x[:, 32] = 127  # the integer kernels' activation scale becomes exactly 1
    for kernel in KERNELS:
        got = LowbitLinear(codes.float(), 8, kernel)(x)
        assert torch.equal(got.float(), (x.float() @ codes.float().t()).bfloat16().float())


def _arrays(bits=4, n=20, k=64, m=2):
    weight = _weight(n, k, seed=8)
    if bits == 4:
        codes, scale, low = quantize_int4(weight)
        mins = pack_lanes(low)
    else:
        codes, scale = quantize_int8(weight)
        mins = None
    x = np.zeros((m, k), dtype=np.int16)
    out = np.zeros((m, n), dtype=np.int16)
    return dict(x=x, bits=bits, codes=pack(codes, bits), scales=pack_lanes(scale), mins=mins, n=n, out=out, threads=1)


@pytest.mark.parametrize(
    "change,message",
    [
        (dict(bits=5), "bits must be 4 or 8"),
        (dict(mins=None), "4-bit codes need mins"),
        (dict(x=np.zeros((2, 64), dtype=np.float32)), "x must have dtype int16"),
        (dict(x=np.zeros((2, 60), dtype=np.int16)), "not a multiple of 32"),
        (dict(x=np.zeros((2, 128), dtype=np.int16)), "codes has shape"),
        (dict(x=np.zeros((2, 2, 64), dtype=np.int16)), "x must have 2 dimensions"),
        (dict(n=0), "n must be positive"),
        (dict(n=40), "codes has shape"),
        (dict(out=np.zeros((3, 20), dtype=np.int16)), "out has shape"),
        (dict(out=np.zeros((20, 2), dtype=np.int16).T), "out must be C-contiguous"),
        (dict(kernel="avx9000"), "kernel 'avx9000' is not available"),
    ],
)
def test_bad_arguments_are_one_clear_error(change, message):
    args = _arrays() | change
    with pytest.raises(ValueError, match=message):
        _core.lowbit_matmul(**args)


def test_symmetric_codes_take_no_mins():
    args = _arrays(bits=8) | dict(mins=np.zeros((2, 2, 16), dtype=np.float32))
    with pytest.raises(ValueError, match="8-bit codes are symmetric"):
        _core.lowbit_matmul(**args)


def test_a_read_only_output_is_refused():
    args = _arrays()
    args["out"].setflags(write=False)
    with pytest.raises(ValueError, match="out must be writable"):
        _core.lowbit_matmul(**args)


def test_layers_refuse_float32_activations():
    layer = LowbitLinear(_weight(16, 32, seed=9), 4, KERNELS[0])
    with pytest.raises(ValueError, match="bfloat16 CPU activations"):
        layer(torch.zeros(1, 32))


def test_weights_beyond_float16_scales_are_one_clear_error():
    with pytest.raises(ValueError, match="group scales within float16's range"):
        LowbitLinear(torch.full((16, 32), 1e7) * torch.arange(32), 8, KERNELS[0])


def test_the_fused_stack_refuses_an_unknown_kernel_and_a_misshapen_final_norm():
    norm = np.zeros(64, dtype=np.int16)
    with pytest.raises(ValueError, match="kernel 'avx9000' is not available"):
        _core.LlamaStack(64, 2, 1, 32, 128, 1e-5, [], norm, "avx9000")
    with pytest.raises(ValueError, match="final_norm of shape"):
        _core.LlamaStack(64, 2, 1, 32, 128, 1e-5, [], norm[:10], "auto")
