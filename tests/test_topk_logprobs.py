"""The core's per-head top-k of log_softmax (``_core.topk_logprobs``), which CPU drafting reads
through ``topk_lattice``: against PyTorch's log_softmax and a stable sort (ties to the lower id),
masked heads, temperatures and the errors for bad logits."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from draftlattice import _core
from draftlattice.decode.drafters import topk_lattice


def _reference(logits: np.ndarray, k: int, temperature: float = 1.0):
    logprobs = torch.log_softmax(torch.from_numpy(logits).double() / temperature, dim=-1).numpy()
    order = np.argsort(-logits, axis=-1, kind="stable")[:, :k]  # highest first, lower id on ties
    return order, np.take_along_axis(logprobs, order, -1)


@pytest.mark.parametrize("vocab,k", [(1, 1), (7, 3), (100, 8), (4099, 16), (49152, 8)])
@pytest.mark.parametrize("temperature", [1.0, 0.7, 2.5])
def test_matches_log_softmax_and_a_stable_sort(vocab, k, temperature):
    rng = np.random.default_rng(vocab * 31 + k)
    logits = (rng.standard_normal((4, vocab)) * 3).astype(np.float32)
    logits[1, : vocab // 2] = np.round(logits[1, : vocab // 2])  # many ties
    tokens, logprobs = _core.topk_logprobs(logits, k, temperature)
    ids, expected = _reference(logits, k, temperature)
    assert tokens.dtype == np.int32 and logprobs.dtype == np.float32
    np.testing.assert_array_equal(tokens, ids)
    np.testing.assert_allclose(logprobs, expected, rtol=0, atol=2e-5)


def test_a_head_with_fewer_than_k_unmasked_logits_ends_in_minus_inf():
    logits = np.full((2, 10), -np.inf, dtype=np.float32)
    logits[0, [3, 7]] = [1.0, 2.0]
    logits[1] = np.arange(10, dtype=np.float32)
    tokens, logprobs = _core.topk_logprobs(logits, 4)
    assert tokens[0, :2].tolist() == [7, 3]
    assert np.isneginf(logprobs[0, 2:]).all() and np.isfinite(logprobs[0, :2]).all()
    np.testing.assert_allclose(np.exp(logprobs[0, :2]).sum(), 1.0, rtol=1e-6)
    assert tokens[1].tolist() == [9, 8, 7, 6]


@pytest.mark.parametrize(
    "bad,k,temperature,message",
    [
        ("nan", 2, 1.0, "head 1 token 5 is nan"),
        ("inf", 2, 1.0, "head 1 token 5 is inf"),
        ("all_masked", 2, 1.0, "head 1 has no logit above -inf"),
        (None, 0, 1.0, "k must be >= 1"),
        (None, 9, 1.0, r"k=9 > vocabulary size V=8"),
        (None, 2, 0.0, "temperature must be finite and > 0"),
        (None, 2, float("inf"), "temperature must be finite and > 0"),
    ],
)
def test_bad_input_is_one_clear_error(bad, k, temperature, message):
    logits = np.zeros((2, 8), dtype=np.float32)
    if bad == "nan":
        logits[1, 5] = np.nan
    elif bad == "inf":
        logits[1, 5] = np.inf
    elif bad == "all_masked":
        logits[1] = -np.inf
    with pytest.raises(ValueError, match=message):
        _core.topk_logprobs(logits, k, temperature)


def test_cpu_drafting_reads_the_same_lattice_as_pytorchs_top_k():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 5000) * 4  # continuous: no ties, so both orders agree
    logits[1, 2, 100:] = float("-inf")  # a head with a draft vocabulary of 100 tokens
    ids, logprobs = topk_lattice(logits, 8, temperature=0.8)
    expected, order = torch.log_softmax(logits / 0.8, dim=-1).topk(8, dim=-1)
    assert ids.dtype == torch.int64 and ids.shape == (2, 3, 8)
    assert torch.equal(ids, order)
    torch.testing.assert_close(logprobs, expected, rtol=0, atol=2e-5)
