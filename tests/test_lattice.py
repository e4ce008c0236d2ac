"""Lattice.from_logits / from_topk against a numpy reference; exports; bad inputs raise."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import draftlattice as dl


def reference_topk(logits: np.ndarray, k: int, temperature: float):
    scaled = logits.astype(np.float64) / temperature
    logz = scaled.max(axis=1, keepdims=True)
    logz = logz + np.log(np.exp(scaled - logz).sum(axis=1, keepdims=True))
    tokens, logprobs = [], []
    for row, lz in zip(scaled, logz[:, 0]):
        order = np.lexsort((np.arange(row.size), -row))[:k]  # score desc, then lower id
        tokens.append(order)
        logprobs.append(row[order] - lz)
    return np.array(tokens), np.array(logprobs)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("temperature", [1.0, 0.5, 3.0])
def test_from_logits_matches_reference(dtype, temperature):
    rng = np.random.default_rng(0)
    logits = (rng.normal(size=(5, 300)) * 4).astype(dtype)
    logits[1, 10:20] = logits[1, 7]  # ties: lower token id first
    lattice = dl.Lattice.from_logits(logits, 12, temperature)
    tokens, logprobs = reference_topk(logits.astype(np.float32), 12, temperature)
    assert lattice.tokens.dtype == np.int32 and lattice.logprobs.dtype == np.float32
    assert (lattice.h, lattice.k) == (5, 12)
    np.testing.assert_array_equal(lattice.tokens, tokens)
    np.testing.assert_allclose(lattice.logprobs, logprobs, atol=1e-5)


@pytest.mark.parametrize("vocab", [1, 15, 16, 17, 4096, 50257])
@pytest.mark.parametrize("scale, temperature", [(0.01, 1.0), (4.0, 1.0), (30.0, 0.7), (2.0, 1e-3), (1.0, 40.0)])
def test_from_logits_normalizer_and_selection_at_vocabulary_sizes(vocab, scale, temperature):
    # Vocabulary sizes around the core's 16-logit blocks and 64-logit exp chunks, masked logits,
    # ascending rows (every logit displaces the k-th best), ties, and sharp and flat softmaxes: the
    # selection equals the reference exactly and the log-probabilities within float32 rounding.
    rng = np.random.default_rng(vocab)
    logits = (rng.normal(size=(4, vocab)) * scale).astype(np.float32)
    logits[1] = np.sort(logits[1])
    logits[2, ::3] = -np.inf
    logits[2, 0] = 0.0
    logits[3, vocab // 2 :] = logits[3, 0]
    k = min(vocab // 3 + 1, 40)
    lattice = dl.Lattice.from_logits(logits, k, temperature)
    tokens, logprobs = reference_topk(logits, k, temperature)
    np.testing.assert_array_equal(lattice.tokens, tokens)
    np.testing.assert_allclose(lattice.logprobs, logprobs, rtol=3e-7, atol=3e-7)


def test_from_logits_accepts_torch_and_full_vocab():
    logits = torch.randn(3, 7, dtype=torch.bfloat16)
    lattice = dl.Lattice.from_logits(logits, 7)
    np.testing.assert_allclose(np.exp(lattice.logprobs.astype(np.float64)).sum(axis=1), 1.0, atol=1e-5)
    tokens, _ = reference_topk(logits.float().numpy(), 7, 1.0)
    np.testing.assert_array_equal(lattice.tokens, tokens)


def test_batch_from_logits_equals_single():
    logits = np.random.default_rng(1).normal(size=(4, 3, 50)).astype(np.float32)
    for threads in (None, 1, 2):
        for b, lattice in enumerate(dl.Lattice.batch_from_logits(logits, 5, 0.8, num_threads=threads)):
            single = dl.Lattice.from_logits(logits[b], 5, 0.8)
            np.testing.assert_array_equal(lattice.tokens, single.tokens)
            np.testing.assert_array_equal(lattice.logprobs, single.logprobs)


def test_from_topk_sorts_candidates():
    lattice = dl.Lattice.from_topk(np.array([[5, 2, 9], [1, 0, 3]]), np.array([[-2.0, -0.5, -0.5], [-1.0, -3.0, -0.1]]))
    np.testing.assert_array_equal(lattice.tokens, [[2, 9, 5], [3, 1, 0]])
    np.testing.assert_array_equal(lattice.logprobs, np.float32([[-0.5, -0.5, -2.0], [-0.1, -1.0, -3.0]]))


def test_fst_text_and_dot():
    lattice = dl.Lattice.from_topk(np.array([[0, 4], [2, 1]]), np.array([[-0.25, -1.5], [-0.5, -2.0]]))
    lines = lattice.to_fst_text().strip().split("\n")
    arcs = [line.split("\t") for line in lines[:-1]]
    assert lines[-1] == "2"
    assert [(int(a), int(b), int(i), int(o)) for a, b, i, o, _ in arcs] == [
        (0, 1, 1, 1),
        (0, 1, 5, 5),
        (1, 2, 3, 3),
        (1, 2, 2, 2),
    ]
    assert [float(w) for *_, w in arcs] == [0.25, 1.5, 0.5, 2.0]
    dot = lattice.to_dot(["a", "b", "c", "d", 'q"e'])
    assert dot.startswith("digraph") and '0 -> 1 [label="q\\"e (-1.5)"]' in dot and "c (-0.5)" in dot


@pytest.mark.parametrize(
    "logits,k,temperature,words",
    [
        (np.zeros((0, 5), np.float32), 1, 1.0, "h=0"),
        (np.zeros((2, 5), np.float32), 0, 1.0, "k must be >= 1"),
        (np.zeros((2, 5), np.float32), 6, 1.0, "k=6 > vocabulary size V=5"),
        (np.zeros((2, 5), np.float32), 2, 0.0, "temperature"),
        (np.zeros((2, 5), np.float32), 2, -1.0, "temperature"),
        (np.zeros((2, 5), np.float32), 2, float("nan"), "temperature"),
        (np.zeros(5, np.float32), 2, 1.0, r"shape \[h, V\]"),
        (np.zeros((1, 2, 5), np.float32), 2, 1.0, r"shape \[h, V\]"),
        (np.zeros((2, 5), np.int64), 2, 1.0, "dtype int64"),
        (np.array([[0.0, np.nan, 1.0]], np.float32), 2, 1.0, "head 0 token 1 is nan"),
        (np.array([[0.0, 1.0], [np.inf, 1.0]], np.float32), 1, 1.0, "head 1 token 0 is inf"),
    ],
)
def test_from_logits_bad_inputs(logits, k, temperature, words):
    with pytest.raises(ValueError, match=words):
        dl.Lattice.from_logits(logits, k, temperature)


@pytest.mark.parametrize(
    "k,temperature,words",
    [
        (2.0, 1.0, "k must be an integer, got 2.0"),
        (True, 1.0, "k must be an integer"),
        (2, "hot", "temperature must be a number"),
    ],
)
def test_from_logits_wrong_types(k, temperature, words):
    with pytest.raises(TypeError, match=words):
        dl.Lattice.from_logits(np.zeros((2, 5), np.float32), k, temperature)


@pytest.mark.parametrize(
    "tokens,logprobs,words",
    [
        (np.array([[1, 1]]), np.array([[-1.0, -2.0]]), "token 1 appears twice in head 0"),
        (np.array([[1, -1]]), np.array([[-1.0, -2.0]]), "-1"),
        (np.array([[1, 2]]), np.array([[-1.0, 0.5]]), "0.5"),
        (np.array([[1, 2]]), np.array([[-1.0, np.nan]]), "nan"),
        (np.array([[1, 2]]), np.array([[-np.inf, -1.0]]), "inf"),
        (np.array([[1, 2]]), np.array([[-1.0, -2.0, -3.0]]), "shape"),
        (np.array([1, 2]), np.array([-1.0, -2.0]), "shape"),
        (np.zeros((0, 2), np.int32), np.zeros((0, 2)), "h=0"),
        (np.zeros((2, 0), np.int32), np.zeros((2, 0)), "k must be >= 1"),
        (np.array([[1.0, 2.0]]), np.array([[-1.0, -2.0]]), "integer"),
    ],
)
def test_from_topk_bad_inputs(tokens, logprobs, words):
    with pytest.raises(ValueError, match=words):
        dl.Lattice.from_topk(tokens, logprobs)


def test_from_topk_unknown_token():
    with pytest.raises(ValueError, match="unknown token id 7: vocab_size=5"):
        dl.Lattice.from_topk(np.array([[1, 7]]), np.array([[-1.0, -2.0]]), vocab_size=5)


def test_float64_logits_beyond_float32_are_refused_with_their_value():
    logits = np.array([[1e300, 0.0, -1.0]])
    with pytest.raises(ValueError, match="must fit float32.*1e\\+300"):
        dl.Lattice.from_logits(logits, 1)
    with pytest.raises(ValueError, match="must fit float32"):
        dl.Lattice.batch_from_logits(logits[None], 1)


def test_a_failed_cast_in_the_bindings_is_an_error_not_a_crash():
    import warnings

    from draftlattice import _core

    # numpy's float64 -> float32 cast warns on overflow; as an error, pybind11 got an empty
    # array back, which the bindings once read through (a segfault)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="logits could not be converted to float32"):
            _core.Lattice.from_logits(np.array([[1e300, 0.0]]), 1, 1.0)
