"""Oracle drafts follow the reference while it is among the candidates, then take top-1."""

from __future__ import annotations

import numpy as np
import pytest

import draftlattice as dl


def reference_oracle(tokens: np.ndarray, reference: np.ndarray):
    draft, accepted = [], 0
    following = True
    for t in range(tokens.shape[0]):
        if following and reference[t] in tokens[t]:
            draft.append(int(reference[t]))
            accepted += 1
        else:
            following = False
            draft.append(int(tokens[t, 0]))
    return draft, accepted


def test_oracle_matches_definition():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(50, 5, 12)).astype(np.float32)
    lattices = dl.Lattice.batch_from_logits(logits, 4)
    references = np.where(
        rng.random((50, 5)) < 0.6,
        np.stack([lat.tokens[np.arange(5), rng.integers(0, 4, 5)] for lat in lattices]),
        rng.integers(0, 12, (50, 5)),
    ).astype(np.int64)
    tokens, accepted = dl.oracle_drafts(lattices, references)
    assert tokens.shape == (50, 5) and accepted.shape == (50,)
    for b, lattice in enumerate(lattices):
        draft, n = reference_oracle(lattice.tokens, references[b])
        assert tokens[b].tolist() == draft and accepted[b] == n
        single, single_n = dl.oracle_draft(lattice, references[b])
        assert single.tolist() == draft and single_n == n
    from_logits, _ = dl.oracle_drafts(logits, references, k=4)
    np.testing.assert_array_equal(from_logits, tokens)
    assert accepted.min() >= 0 and accepted.max() <= 5 and 0 < accepted.mean() < 5


def test_oracle_bad_inputs():
    lattice = dl.Lattice.from_topk(np.array([[1, 2], [3, 4]]), np.array([[-1.0, -2.0], [-1.0, -2.0]]))
    with pytest.raises(ValueError, match="h=2"):
        dl.oracle_draft(lattice, [1, 2, 3])
    with pytest.raises(ValueError, match="references"):
        dl.oracle_drafts([lattice, lattice], np.array([[1, 3]]))
    with pytest.raises(ValueError, match="-1"):
        dl.oracle_draft(lattice, [1, -1])
