"""rescore / rescore_batch equal brute-force enumeration of all k**h drafts, scored by
independent references (pure-Python Katz backoff on random ARPA files, the kenlm module on the
shared lmplz models); ties follow the documented rule; bad input raises."""

from __future__ import annotations

import dataclasses
import random

import numpy as np
import pytest

import draftlattice as dl
from arpa_writer import random_arpa, rewrite_backoffs, skewed_arpa
from ngram_reference import BruteForceLM
from rescore_reference import KenlmScorer, check_against_reference, enumerate_drafts, python_scorer, with_tokens

try:
    import kenlm
except ImportError as error:  # a test never passes by skipping
    raise ImportError("tests need the kenlm module: pip install kenlm (in the [test] extra)") from error


def random_lattice(rng: random.Random, h: int, k: int, n_tokens: int, dyadic: bool = False) -> dl.Lattice:
    tokens = np.array([rng.sample(range(n_tokens), k) for _ in range(h)], dtype=np.int32)
    if dyadic:
        logprobs = np.array([[-rng.randint(0, 8) / 4 for _ in range(k)] for _ in range(h)], np.float32)
    else:
        logprobs = np.array([[-rng.expovariate(0.7) for _ in range(k)] for _ in range(h)], np.float32)
    return dl.Lattice.from_topk(tokens, logprobs)


@pytest.fixture(scope="module")
def random_models(tmp_path_factory):
    """(NgramLM, BruteForceLM) pairs: orders 2..5, consistent and inconsistently pruned, with and
    without <unk>; words are token ids 0..5 (ids 6, 7 are unknown to the LM)."""
    models = []
    base = tmp_path_factory.mktemp("arpa")
    for seed in range(12):
        order = 2 + seed % 4
        path = base / f"m{seed}.arpa"
        random_arpa(path, order, seed=100 + seed, n_words=6, consistent=seed % 3 == 0, with_unk=seed % 2 == 1)
        models.append((dl.NgramLM(path, oov_logprob=-7.5), BruteForceLM(path, oov_ln=-7.5)))
    return models


def test_random_lattices_equal_brute_force(random_models):
    rng = random.Random(7)
    cases = 0
    for lm, reference in random_models:
        for _ in range(14):
            h, k = rng.randint(1, 5), rng.randint(1, 5)
            if k**h > 800:
                k = max(1, int(800 ** (1 / h)))
            lattice = random_lattice(rng, h, k, n_tokens=8)
            context = [rng.randrange(8) for _ in range(rng.randint(0, 5))]
            bos = rng.random() < 0.5
            alpha = rng.choice([0.0, 0.3, 1.0, 2.5])
            p = rng.randint(1, k**h + 3)
            rows = enumerate_drafts(
                lattice.tokens, lattice.logprobs, python_scorer(reference, str, context, bos), alpha
            )
            result = dl.rescore(lattice, lm, p=p, alpha=alpha, context=context, bos=bos)
            check_against_reference(result, with_tokens(rows, lattice.tokens), p)
            np.testing.assert_allclose(result.scores, result.head_scores + alpha * result.lm_scores, atol=1e-6)
            cases += 1
    assert cases == 12 * 14


def check_random_lattices(rng, lm, reference, count, h_range, k_range, n_tokens, context_max, alphas, p_max) -> int:
    """Rescores `count` random lattices (at most 800 drafts each, random context, <s>, alpha, p)
    and checks each p-best list against brute-force enumeration scored by `reference`."""
    for _ in range(count):
        h, k = rng.randint(*h_range), rng.randint(*k_range)
        if k**h > 800:
            k = max(k_range[0], int(800 ** (1 / h)))
        lattice = random_lattice(rng, h, k, n_tokens=n_tokens)
        context = [rng.randrange(n_tokens) for _ in range(rng.randint(0, context_max))]
        bos = rng.random() < 0.5
        alpha = rng.choice(alphas)
        p = rng.randint(1, min(k**h, p_max))
        rows = enumerate_drafts(lattice.tokens, lattice.logprobs, python_scorer(reference, str, context, bos), alpha)
        result = dl.rescore(lattice, lm, p=p, alpha=alpha, context=context, bos=bos)
        check_against_reference(result, with_tokens(rows, lattice.tokens), p)
    return count


def test_suffix_closed_models_with_positive_backoffs_equal_brute_force(tmp_path):
    """The search's pair bounds (an absent bigram "v w" in a suffix-closed model bounds
    ln p(w | ... v) by the unigram, v's backoff and the largest positive longer backoffs) stay
    admissible when backoff weights exceed 1: sparse consistent models, backoffs in [-1, +1]."""
    rng = random.Random(23)
    cases = 0
    for seed in range(8):
        order = 2 + seed % 3
        path = tmp_path / f"pos{seed}.arpa"
        random_arpa(path, order, seed=300 + seed, n_words=9, consistent=True, with_unk=seed % 2 == 1)
        rewrite_backoffs(path, 5000 + seed, -1.0, 1.0)
        lm, reference = dl.NgramLM(path, oov_logprob=-7.5), BruteForceLM(path, oov_ln=-7.5)
        assert lm.suffix_closed  # the pair bounds apply only to suffix-closed models
        cases += check_random_lattices(rng, lm, reference, 12, (1, 5), (1, 6), 11, 4, [0.3, 1.0, 2.5], 20)
    assert cases == 8 * 12


def test_wide_lattices_equal_brute_force(tmp_path):
    """k > 8, where the beam expands only each node's arcs of highest bound gain (nbest.h): the
    lower bound it finds, and for p > 1 its subgraph's, must stay real drafts' totals."""
    rng = random.Random(61)
    cases = 0
    for seed in range(8):
        order = 2 + seed % 4
        path = tmp_path / f"wide{seed}.arpa"
        random_arpa(path, order, seed=700 + seed, n_words=24, consistent=seed % 2 == 0, with_unk=seed % 3 == 0)
        if seed % 4 == 1:
            rewrite_backoffs(path, 7000 + seed, -1.0, 1.0)
        lm, reference = dl.NgramLM(path, oov_logprob=-7.5), BruteForceLM(path, oov_ln=-7.5)
        cases += check_random_lattices(rng, lm, reference, 6, (2, 3), (9, 20), 26, 4, [0.5, 1.0, 2.5], 60)
    assert cases == 8 * 6


def test_skewed_models_with_blank_bigrams_equal_brute_force(tmp_path):
    """Exactness where a too tight pair bound would prune the best drafts (a pair bound from the
    bigram alone, or one that forgets the backoff path of a blank bigram, fails here)."""
    rng = random.Random(41)
    cases = blanks = 0
    for seed in range(10):
        order = 3 + seed % 2
        path = tmp_path / f"skew{seed}.arpa"
        blanks += skewed_arpa(path, order, 900 + seed)
        lm, reference = dl.NgramLM(path, oov_logprob=-7.5), BruteForceLM(path, oov_ln=-7.5)
        assert lm.suffix_closed
        cases += check_random_lattices(rng, lm, reference, 15, (2, 5), (2, 5), 6, 3, [1.0, 2.5, 4.0], 3)
    assert cases == 10 * 15 and blanks > 10


def test_p_beyond_all_paths_returns_all(random_models):
    lm, _ = random_models[1]
    lattice = random_lattice(random.Random(3), 3, 2, n_tokens=6)
    result = dl.rescore(lattice, lm, p=1000)
    assert len(result) == 8
    assert len({tuple(d) for d in result.tokens.tolist()}) == 8


def test_ties_follow_rank_order(random_models):
    """Exact ties (dyadic lattice scores, alpha = 0 or tokens all unknown to the LM) are ordered by
    the lexicographic order of the rank sequences."""
    rng = random.Random(11)
    lm, reference = random_models[0]  # no <unk>: unknown tokens score oov_logprob exactly
    for case in range(30):
        h, k = rng.randint(1, 4), rng.randint(1, 4)
        unknown = case % 2 == 1
        tokens = np.array([rng.sample(range(100, 110) if unknown else range(8), k) for _ in range(h)], dtype=np.int32)
        logprobs = np.array([[-rng.randint(0, 3) / 2 for _ in range(k)] for _ in range(h)], np.float32)
        lattice = dl.Lattice.from_topk(tokens, logprobs)
        alpha = 1.0 if unknown else 0.0
        rows = enumerate_drafts(lattice.tokens, lattice.logprobs, python_scorer(reference, str, [], False), alpha)
        result = dl.rescore(lattice, lm, p=k**h, alpha=alpha)
        expected = [tuple(int(lattice.tokens[t, r]) for t, r in enumerate(row[1])) for row in rows]
        assert [tuple(d) for d in result.tokens.tolist()] == expected
        assert result.scores.tolist() == [row[0] for row in rows]


@pytest.fixture(scope="module")
def lmplz_models(shared_data, decompressed_lm):
    """name -> (NgramLM with the ARPA's words as vocab, kenlm scorer factory, vocab)."""
    models = {}
    for name in ("wt2_kn3_pruned", "wt2_kn4"):
        arpa = decompressed_lm(name)
        vocab = []
        with open(arpa, encoding="utf-8") as handle:
            section = False
            for line in handle:
                if line.startswith("\\1-grams:"):
                    section = True
                elif section and line.startswith("\\"):
                    break
                elif section and line.strip():
                    vocab.append(line.split("\t")[1].strip())
        models[name] = (dl.NgramLM(arpa, vocab=vocab), KenlmScorer(kenlm.Model(str(arpa)), vocab), vocab)
    return models


@pytest.mark.slow
@pytest.mark.parametrize("name,cases", [("wt2_kn3_pruned", 25), ("wt2_kn4", 6)])
def test_lmplz_models_equal_kenlm_brute_force(lmplz_models, name, cases):
    lm, scorer, vocab = lmplz_models[name]
    rng = random.Random(5)
    common = list(range(2, 300))  # frequent words: long matched n-grams, real backoff
    for _ in range(cases):
        h, k = rng.randint(2, 4), rng.randint(2, 4)
        pool = common if rng.random() < 0.7 else range(len(vocab))
        tokens = np.array([rng.sample(pool, k) for _ in range(h)], dtype=np.int32)
        logprobs = np.array([[-rng.expovariate(0.5) for _ in range(k)] for _ in range(h)], np.float32)
        lattice = dl.Lattice.from_topk(tokens, logprobs)
        context = [rng.choice(common) for _ in range(rng.randint(0, 4))]
        bos = rng.random() < 0.3
        alpha = rng.choice([0.5, 1.0])
        p = rng.randint(1, k**h)
        rows = enumerate_drafts(lattice.tokens, lattice.logprobs, scorer(context, bos), alpha)
        result = dl.rescore(lattice, lm, p=p, alpha=alpha, context=context, bos=bos)
        check_against_reference(result, with_tokens(rows, lattice.tokens), p, atol=2e-4)


def test_batch_equals_single_calls(random_models):
    lm, _ = random_models[5]
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(7, 4, 9)).astype(np.float32)
    contexts = [rng.integers(0, 8, size=rng.integers(0, 4)) for _ in range(7)]
    for threads in (1, 2, 3):
        batch = dl.rescore_batch(logits, lm, contexts, p=5, alpha=0.7, k=3, num_threads=threads)
        for b in range(7):
            single = dl.rescore(dl.Lattice.from_logits(logits[b], 3), lm, p=5, alpha=0.7, context=contexts[b])
            np.testing.assert_array_equal(batch[b].tokens, single.tokens)
            np.testing.assert_array_equal(batch[b].scores, single.scores)
            np.testing.assert_array_equal(batch[b].lm_scores, single.lm_scores)
    lattices = dl.Lattice.batch_from_logits(logits, 3)
    topk = (np.stack([lat.tokens for lat in lattices]), np.stack([lat.logprobs for lat in lattices]))
    from_topk = dl.rescore_batch(topk, lm, contexts, p=5, alpha=0.7)
    from_list = dl.rescore_batch(lattices, lm, contexts, p=5, alpha=0.7, bos=False)
    for a, b in zip(from_topk, from_list):
        np.testing.assert_array_equal(a.tokens, b.tokens)


def test_bad_inputs_raise(random_models, tmp_path):
    lm, _ = random_models[0]
    lattice = random_lattice(random.Random(1), 2, 2, n_tokens=6)
    for kwargs, words in [
        ({"p": 0}, "p must be >= 1"),
        ({"p": -3}, "p must be >= 1"),
        ({"alpha": -0.1}, "alpha"),
        ({"alpha": float("nan")}, "alpha"),
        ({"alpha": float("inf")}, "alpha"),
        ({"context": [1, -2]}, "-2"),
        ({"context": [[1, 2]]}, "shape"),
        ({"context": [0.5]}, "integer"),
    ]:
        with pytest.raises(ValueError, match=words):
            dl.rescore(lattice, lm, **kwargs)
    # wrong types are TypeErrors (the values are the core's to check: ValueErrors above)
    for kwargs, words in [
        ({"p": 1.5}, "p must be an integer, got 1.5"),
        ({"p": True}, "p must be an integer"),
        ({"alpha": "x"}, "alpha must be a number"),
    ]:
        with pytest.raises(TypeError, match=words):
            dl.rescore(lattice, lm, **kwargs)
    with pytest.raises(TypeError, match="NgramLM"):
        dl.rescore(lattice, object())
    with pytest.raises(TypeError, match="Lattice"):
        dl.rescore(np.zeros((2, 2)), lm)
    # a vocab-mapped LM rejects token ids beyond its vocabulary
    path = tmp_path / "v.arpa"
    random_arpa(path, 2, seed=3, n_words=4)
    vocab_lm = dl.NgramLM(path, vocab=["0", "1", "2", "3"])
    far = dl.Lattice.from_topk(np.array([[1, 9]]), np.array([[-0.1, -2.0]]))
    with pytest.raises(ValueError, match="9"):
        dl.rescore(far, vocab_lm)
    with pytest.raises(ValueError, match="7"):
        dl.rescore(random_lattice(random.Random(0), 1, 2, n_tokens=4), vocab_lm, context=[7])
    logits = np.zeros((2, 3, 5), np.float32)
    with pytest.raises(ValueError, match="contexts"):
        dl.rescore_batch(logits, lm, [[1]], k=2)
    with pytest.raises(ValueError, match="k is required"):
        dl.rescore_batch(logits, lm)
    with pytest.raises(ValueError, match="empty"):
        dl.rescore_batch([], lm)
    with pytest.raises(ValueError, match="num_threads"):
        dl.rescore_batch(logits, lm, k=2, num_threads=0)
    with pytest.raises(ValueError, match="k="):
        dl.rescore_batch(logits, lm, k=6)


def test_state_start_equals_token_context(random_models):
    """rescore from lm.start(context, bos), or from a state advanced token by token, equals
    rescore from the context tokens (also for inconsistently pruned models and unknown ids)."""
    rng = random.Random(11)
    for lm, _ in random_models:
        for _ in range(10):
            lattice = random_lattice(rng, rng.randint(1, 4), rng.randint(1, 4), n_tokens=8)
            context = [rng.randrange(8) for _ in range(rng.randint(0, 7))]
            bos = rng.random() < 0.5
            cut = rng.randint(0, len(context))
            advanced = lm.advance(lm.start(context[:cut], bos), context[cut:])
            assert advanced == lm.start(context, bos)
            p, alpha = rng.randint(1, 6), rng.choice([0.0, 0.5, 2.0])
            want = dl.rescore(lattice, lm, p, alpha, context, bos)
            for state in (lm.start(context, bos), advanced):
                got = dl.rescore(lattice, lm, p, alpha, state)
                np.testing.assert_array_equal(got.tokens, want.tokens)
                np.testing.assert_array_equal(got.scores, want.scores)
                np.testing.assert_array_equal(got.lm_scores, want.lm_scores)


def test_batch_mixes_states_and_token_contexts(random_models):
    lm, _ = random_models[5]
    rng = random.Random(3)
    lattices = [random_lattice(rng, 3, 3, n_tokens=8) for _ in range(4)]
    contexts = [[1, 2, 3], lm.start([4, 0], True), (), np.array([5], np.int64)]
    batch = dl.rescore_batch(lattices, lm, contexts, p=4, alpha=0.8, num_threads=2)
    for lattice, context, got in zip(lattices, contexts, batch):
        want = dl.rescore(lattice, lm, 4, 0.8, context)
        np.testing.assert_array_equal(got.tokens, want.tokens)
        np.testing.assert_array_equal(got.scores, want.scores)


def test_bad_states_raise(random_models, tmp_path):
    lm, _ = random_models[1]  # order 3
    lattice = random_lattice(random.Random(2), 2, 2, n_tokens=6)
    with pytest.raises(ValueError, match="bos=True applies to token contexts"):
        dl.rescore(lattice, lm, context=lm.start([1]), bos=True)
    big = tmp_path / "big.arpa"
    random_arpa(big, 5, seed=9, n_words=40)
    other = dl.NgramLM(big)
    foreign = other.start(list(range(30, 34)))  # 4 words, ids beyond this LM's 6 words
    with pytest.raises(ValueError, match="LM state"):
        dl.rescore(lattice, lm, context=foreign)
    with pytest.raises(ValueError, match="LM state"):
        lm.advance(foreign, [1])
    with pytest.raises(TypeError, match="contexts must be a sequence"):
        dl.rescore_batch([lattice], lm, contexts=5)


def test_rescore_seconds_validates_like_rescore(random_models):
    """The benchmark's C++-timed search (_core.rescore_seconds) takes rescore's arguments and
    refuses what rescore refuses, plus repeats < 1."""
    from draftlattice import _core

    lm, _ = random_models[0]
    lattice = random_lattice(random.Random(1), 3, 2, n_tokens=6)
    seconds = _core.rescore_seconds(lattice._core, lm, 2, 1.0, [1, 2], True, 3)
    assert 0 < seconds < 1
    state = lm.start([1, 2], bos=True)
    assert 0 < _core.rescore_seconds(lattice._core, lm, 1, 0.5, state, False, 1) < 1
    with pytest.raises(ValueError, match="repeats must be >= 1"):
        _core.rescore_seconds(lattice._core, lm, 1, 1.0, [], False, 0)
    with pytest.raises(ValueError, match="p must be >= 1"):
        _core.rescore_seconds(lattice._core, lm, 0, 1.0, [], False, 1)
    with pytest.raises(ValueError, match="-2"):
        _core.rescore_seconds(lattice._core, lm, 1, 1.0, [1, -2], False, 1)
    with pytest.raises(ValueError, match="bos=True"):
        _core.rescore_seconds(lattice._core, lm, 1, 1.0, state, True, 1)


def test_core_builds_the_result_type(random_models):
    """_core.rescore builds the public RescoreResult itself when given the class (the public call's
    fast path), returns the four arrays as a tuple without it, and refuses a result_type that is
    not a class."""
    from draftlattice import _core

    lm, _ = random_models[0]
    for h, k in ((1, 1), (2, 3), (3, 4)):  # enumerated (<= 16 drafts) and searched lattices
        lattice = random_lattice(random.Random(h * 10 + k), h, k, n_tokens=6)
        result = dl.rescore(lattice, lm, p=3, context=[1, 2])
        assert type(result) is dl.RescoreResult
        raw = _core.rescore(lattice._core, lm, 3, 1.0, [1, 2], False)
        assert type(raw) is tuple and len(raw) == 4
        for got, want in zip((result.tokens, result.scores, result.head_scores, result.lm_scores), raw):
            assert got.dtype == want.dtype and got.flags.owndata and np.array_equal(got, want)
        assert result.tokens.shape == (min(3, k**h), h)
        with pytest.raises(dataclasses.FrozenInstanceError):
            result.scores = raw[1]
        for bad in (5, type(None), bool, int, dl.Lattice):  # not a class, built-in, own __new__ (slots)
            with pytest.raises((TypeError, AttributeError)):
                _core.rescore(lattice._core, lm, 1, 1.0, [], False, bad)
