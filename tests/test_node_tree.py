"""best_nodes / best_nodes_batch equal brute force: every prefix of a lattice enumerated, scored
by an independent LM (pure-Python Katz backoff on random ARPA files, the kenlm module on the
shared lmplz model), sorted by the documented order, the first n kept; the trees are trees; ties
follow the rule; bad input raises."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

import draftlattice as dl
from arpa_writer import random_arpa
from draftlattice.node_tree import best_nodes, best_nodes_batch
from ngram_reference import BruteForceLM
from rescore_reference import python_scorer
from test_rescore import lmplz_models, random_lattice  # noqa: F401 (a fixture)

try:
    import kenlm  # noqa: F401
except ImportError as error:  # a test never passes by skipping
    raise ImportError("tests need the kenlm module: pip install kenlm (in the [test] extra)") from error


def enumerate_prefixes(lattice, lm_score, alpha):
    """Every prefix as (total, length, ranks, tokens), in the documented order; lm_score(tokens)
    is the prefix's natural-log LM probability (None: no LM)."""
    tokens, logprobs = lattice.tokens, lattice.logprobs
    h, k = tokens.shape
    rows = []
    for m in range(1, h + 1):
        for ranks in itertools.product(range(k), repeat=m):
            draft = tuple(int(tokens[t, r]) for t, r in enumerate(ranks))
            total = sum(float(logprobs[t, r]) for t, r in enumerate(ranks))
            if lm_score is not None and alpha > 0:
                total += alpha * lm_score(list(draft))
            if total > -math.inf:
                rows.append((total, m, ranks, draft))
    rows.sort(key=lambda row: (-row[0], row[1], row[2]))
    return rows


def check_tree(tree, lattice, rows, n, atol=1e-5):
    """The tree is the first n rows (robust to near-ties) and a well-formed tree."""
    count = min(n, len(rows))
    assert len(tree) == count
    np.testing.assert_allclose(tree.scores, [row[0] for row in rows[:count]], rtol=0, atol=atol)
    prefixes = []
    for i in range(count):
        parent = int(tree.parents[i])
        assert parent < i, "a parent precedes its children"
        assert tree.depths[i] == (1 if parent < 0 else tree.depths[parent] + 1)
        assert tree.tokens[i] == lattice.tokens[tree.depths[i] - 1, tree.ranks[i]]
        prefixes.append((() if parent < 0 else prefixes[parent]) + (int(tree.tokens[i]),))
    assert len(set(prefixes)) == count, "nodes are distinct prefixes"
    totals = [row[0] for row in rows]
    for i in range(count):  # a node whose total is isolated from its neighbours must match exactly
        before = totals[i - 1] - totals[i] if i > 0 else math.inf
        after = totals[i] - totals[i + 1] if i + 1 < len(rows) else math.inf
        if min(before, after) > 10 * atol:
            assert prefixes[i] == rows[i][3], f"node {i} differs"
    # paths(): one row per leaf, whose prefixes are exactly the nodes
    paths = tree.paths(lattice.h)
    covered = {tuple(int(t) for t in path[: j + 1]) for path in paths for j in range(len(path)) if path[j] >= 0}
    assert covered == set(prefixes)


@pytest.fixture(scope="module")
def random_models(tmp_path_factory):
    """(NgramLM, BruteForceLM) pairs over token ids 0..5 (6, 7 unknown to the LM)."""
    models = []
    base = tmp_path_factory.mktemp("arpa")
    for seed in range(8):
        path = base / f"m{seed}.arpa"
        random_arpa(path, 2 + seed % 4, seed=400 + seed, n_words=6, consistent=seed % 3 == 0, with_unk=seed % 2 == 1)
        models.append((dl.NgramLM(path, oov_logprob=-7.5), BruteForceLM(path, oov_ln=-7.5)))
    return models


def test_random_lattices_equal_brute_force(random_models):
    rng = random.Random(11)
    cases = 0
    for lm, reference in random_models:
        for _ in range(12):
            h, k = rng.randint(1, 4), rng.randint(1, 5)
            if k**h > 400:
                k = max(1, int(400 ** (1 / h)))
            lattice = random_lattice(rng, h, k, n_tokens=8)
            context = [rng.randrange(8) for _ in range(rng.randint(0, 5))]
            bos = rng.random() < 0.5
            alpha = rng.choice([0.0, 0.3, 1.0, 2.5])
            n = rng.randint(1, sum(k**m for m in range(1, h + 1)) + 3)
            rows = enumerate_prefixes(lattice, python_scorer(reference, str, context, bos), alpha)
            check_tree(best_nodes(lattice, lm, n, alpha, context, bos), lattice, rows, n)
            cases += 1
    assert cases == 8 * 12


def test_without_lm_ties_follow_the_rule():
    """Dyadic log-probabilities make exact ties: the order is then (length, ranks), exactly."""
    rng = random.Random(5)
    for _ in range(40):
        h, k = rng.randint(1, 4), rng.randint(1, 4)
        lattice = random_lattice(rng, h, k, n_tokens=9, dyadic=True)
        n = rng.randint(1, sum(k**m for m in range(1, h + 1)))
        rows = enumerate_prefixes(lattice, None, 0.0)
        tree = best_nodes(lattice, None, n)
        got = []
        for i in range(len(tree)):
            parent = int(tree.parents[i])
            got.append((got[parent] if parent >= 0 else ()) + (int(tree.ranks[i]),))
        assert got == [row[2] for row in rows[:n]]
        assert tree.scores.tolist() == [row[0] for row in rows[:n]]


def test_impossible_prefixes_are_never_chosen(tmp_path):
    """oov_logprob=-inf: with alpha > 0 a prefix holding a token unknown to the LM is impossible."""
    path = tmp_path / "m.arpa"
    random_arpa(path, 3, seed=9, n_words=6, consistent=True, with_unk=False)
    lm = dl.NgramLM(path, oov_logprob=-math.inf)
    lattice = dl.Lattice.from_topk(
        np.array([[6, 1], [2, 7]], np.int32), np.array([[-0.1, -3.0], [-0.1, -2.0]], np.float32)
    )
    tree = best_nodes(lattice, lm, 10, alpha=0.5, context=[1])
    assert [int(t) for t in tree.tokens] == [1, 2]  # 6 and 7 are unknown to the LM
    with_zero_alpha = best_nodes(lattice, lm, 10, alpha=0.0, context=[1])
    assert len(with_zero_alpha) == 6


@pytest.mark.slow
def test_lmplz_model_equals_kenlm_brute_force(lmplz_models):  # noqa: F811 (the fixture)
    lm, scorer, vocab = lmplz_models["wt2_kn3_pruned"]
    rng = random.Random(8)
    common = list(range(2, 300))  # frequent words: long matched n-grams, real backoff
    for _ in range(20):
        h, k = rng.randint(2, 4), rng.randint(2, 5)
        tokens = np.array([rng.sample(common, k) for _ in range(h)], dtype=np.int32)
        logprobs = np.array([[-rng.expovariate(0.5) for _ in range(k)] for _ in range(h)], np.float32)
        lattice = dl.Lattice.from_topk(tokens, logprobs)
        context = [rng.choice(common) for _ in range(rng.randint(0, 4))]
        bos = rng.random() < 0.3
        alpha = rng.choice([0.5, 1.0])
        n = rng.randint(1, 2 * k * h)
        rows = enumerate_prefixes(lattice, scorer(context, bos), alpha)
        check_tree(best_nodes(lattice, lm, n, alpha, context, bos), lattice, rows, n, atol=2e-4)


def test_batch_equals_single_calls_and_states(random_models):
    lm, _ = random_models[5]
    rng = np.random.default_rng(0)
    tokens = np.stack([np.stack([rng.permutation(8)[:3] for _ in range(4)]) for _ in range(7)]).astype(np.int32)
    logprobs = -rng.exponential(1.0, size=(7, 4, 3)).astype(np.float32)
    contexts = [rng.integers(0, 8, size=rng.integers(0, 4)) for _ in range(7)]
    memos = [dl.LmMemo() for _ in range(7)]
    for threads in (1, 2, 3):
        batch = best_nodes_batch((tokens, logprobs), lm, 9, 0.7, contexts, num_threads=threads, memos=memos)
        for b in range(7):
            lattice = dl.Lattice.from_topk(tokens[b], logprobs[b])
            for context in (contexts[b], lm.start(contexts[b])):
                single = best_nodes(lattice, lm, 9, 0.7, context)
                for field in ("parents", "ranks", "depths", "tokens", "scores"):
                    np.testing.assert_array_equal(getattr(batch[b], field), getattr(single, field))


def test_paths_pad_short_branches():
    lattice = dl.Lattice.from_topk(
        np.array([[1, 2], [3, 4], [5, 6]], np.int32), np.log([[0.9, 0.1]] * 3).astype(np.float32)
    )
    tree = best_nodes(lattice, None, 4)
    # 1, 1-3, 1-3-5, then 2 (0.1) ties 1-4 (0.09)? no: 1-3-6 = 0.081 < 0.1 = 2 > 0.09 = 1-4
    assert [int(t) for t in tree.tokens] == [1, 3, 5, 2]
    np.testing.assert_array_equal(tree.paths(), [[1, 3, 5], [2, -1, -1]])
    np.testing.assert_array_equal(tree.paths(4), [[1, 3, 5, -1], [2, -1, -1, -1]])
    with pytest.raises(ValueError, match="width=2 is shorter"):
        tree.paths(2)


def test_bad_input_raises(random_models):
    lm, _ = random_models[0]
    lattice = dl.Lattice.from_topk(np.array([[1, 2]], np.int32), np.array([[-0.1, -1.0]], np.float32))
    with pytest.raises(ValueError, match="nodes must be >= 1"):
        best_nodes(lattice, lm, 0)
    with pytest.raises(TypeError, match="nodes must be an integer"):
        best_nodes(lattice, lm, True)
    with pytest.raises(TypeError, match="nodes must be an integer"):
        best_nodes(lattice, lm, 2.0)
    for alpha in (-1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="alpha must be finite and >= 0"):
            best_nodes(lattice, lm, 2, alpha=alpha)
    with pytest.raises(TypeError, match="lm"):
        best_nodes(lattice, "katz4.dlm", 2)
    six_words = lm.with_vocab([str(i) for i in range(6)])
    unknown = dl.Lattice.from_topk(np.array([[10]], np.int32), np.array([[-0.1]], np.float32))
    with pytest.raises(ValueError, match=r"lattice tokens\[0\] = 10 is not a token id of the 6-token vocab"):
        best_nodes(unknown, six_words, 1)
    with pytest.raises(ValueError, match=r"context\[1\] = -1 is negative"):
        best_nodes(lattice, lm, 1, context=[1, -1])
    with pytest.raises(TypeError, match="lattice"):
        best_nodes_batch([object()], lm, 2)
