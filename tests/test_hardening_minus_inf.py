"""Issue 15 item 4: -inf LM scores in rescoring and sampling, checked against brute force.

Semantics: alpha = 0 means the LM term is not used at all (total = lattice score, even where the
LM gives -inf; never 0 * -inf = NaN). With alpha > 0 a -inf LM score makes a draft impossible:
rescoring returns only the possible drafts (fewer than p when some are impossible), sampling
gives them probability 0, and a lattice whose every draft is impossible is a ValueError."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

import draftlattice as dl

# Token 3 is impossible after anything (-inf unigram), and so is "1 2": after token 1 every
# continuation among {2, 3} is impossible; after 2 both are fine except 3. Token 7 is not in the
# LM at all (oov_logprob decides).
_ARPA = """\\data\\
ngram 1=5
ngram 2=2

\\1-grams:
-1.0 <s> -0.3
-1.0 </s>
-0.6 1 -0.2
-0.4 2 -0.1
-inf 3

\\2-grams:
-0.3 <s> 1
-inf 1 2

\\end\\
"""


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    path = tmp_path_factory.mktemp("minf") / "m.arpa"
    path.write_text(_ARPA)
    return dl.NgramLM(path, oov_logprob=-math.inf)


def _lattice(token_rows, seed=0):
    """A lattice whose head t puts its top-k on token_rows[t] (in that order)."""
    rng = np.random.default_rng(seed)
    vocab = 8
    logits = np.full((len(token_rows), vocab), -50.0, np.float32)
    for t, tokens in enumerate(token_rows):
        logits[t, tokens] = np.sort(rng.normal(size=len(tokens)))[::-1] + 5
    lattice = dl.Lattice.from_logits(logits, len(token_rows[0]))
    assert [list(row) for row in lattice.tokens] == [list(row) for row in token_rows]
    return lattice


def _brute_force(lattice, lm, alpha, context=()):
    """(draft, total, head, lm) for every draft, with alpha = 0 dropping the LM term."""
    out = []
    for ranks in itertools.product(range(lattice.k), repeat=lattice.h):
        draft = tuple(int(lattice.tokens[t, r]) for t, r in enumerate(ranks))
        head = sum(float(lattice.logprobs[t, r]) for t, r in enumerate(ranks))
        lm_score = lm.score(list(draft), list(context))
        out.append((draft, head + (0.0 if alpha == 0 else alpha * lm_score), head, lm_score))
    return out


_ROWS = [[[1, 2], [2, 3]], [[7, 1, 2], [2, 7, 1], [3, 1, 2]], [[1, 2, 7], [2, 3, 1]]]


@pytest.mark.parametrize("rows", _ROWS)
@pytest.mark.parametrize("alpha", [0.0, 0.7])
def test_rescore_matches_brute_force_with_minus_inf_lm(lm, rows, alpha):
    lattice = _lattice(rows)
    expected = sorted(_brute_force(lattice, lm, alpha), key=lambda d: -d[1])
    possible = [d for d in expected if d[1] > -math.inf]
    if alpha == 0:
        assert len(possible) == len(expected)  # nothing is impossible without the LM term
    result = dl.rescore(lattice, lm, p=len(expected), alpha=alpha)
    assert not np.isnan(result.scores).any()
    assert len(result.tokens) == len(possible)
    np.testing.assert_allclose(result.scores, [d[1] for d in possible], rtol=1e-6)
    np.testing.assert_allclose(result.head_scores, [d[2] for d in possible], rtol=1e-6)
    np.testing.assert_array_equal(
        result.lm_scores, np.array([d[3] for d in possible], np.float64) if alpha else result.lm_scores
    )
    by_draft = {d[0]: d for d in possible}
    for tokens, score in zip(result.tokens, result.scores):
        assert by_draft[tuple(tokens)][1] == pytest.approx(score, rel=1e-6)
    if alpha == 0:  # the unweighted LM scores are still reported, -inf included
        assert np.isneginf(result.lm_scores).any()


@pytest.mark.parametrize("rows", _ROWS)
@pytest.mark.parametrize("alpha", [0.0, 0.7])
def test_sampling_matches_brute_force_with_minus_inf_lm(lm, rows, alpha):
    lattice = _lattice(rows)
    drafts = _brute_force(lattice, lm, alpha)
    totals = np.array([d[1] for d in drafts])
    log_z = np.logaddexp.reduce(totals)
    samples = dl.sample_drafts(lattice, lm, n=200, alpha=alpha, generator=1)
    assert not np.isnan(samples.q).any() and not np.isnan(samples.logprobs).any()
    assert samples.log_z == pytest.approx(log_z, rel=1e-9)
    exact = {d[0]: d[1] - log_z for d in drafts}
    for tokens, logprob in zip(samples.tokens, samples.logprobs):
        assert exact[tuple(tokens)] > -math.inf  # an impossible draft is never drawn
        assert logprob == pytest.approx(exact[tuple(tokens)], abs=1e-9)


def test_sampling_with_every_draft_impossible_is_an_error(lm):
    lattice = _lattice([[1, 2], [3, 7]])  # every draft ends in 3 (-inf) or 7 (oov, -inf)
    with pytest.raises(ValueError, match="every draft has probability 0"):
        dl.sample_drafts(lattice, lm, n=1, alpha=0.5, generator=0)
    assert len(dl.rescore(lattice, lm, p=4, alpha=0.5).tokens) == 0  # none possible
    # Without the LM term every draft is possible again.
    samples = dl.sample_drafts(lattice, lm, n=3, alpha=0.0, generator=0)
    assert np.isfinite(samples.log_z) and not np.isnan(samples.q).any()
    assert len(dl.rescore(lattice, lm, p=4, alpha=0.0).tokens) == 4


def test_rescore_batch_alpha_zero_with_minus_inf_lm(lm):
    lattices = [_lattice(rows) for rows in _ROWS]
    results = dl.rescore_batch(lattices, lm, [[]] * len(lattices), p=64, alpha=0.0, num_threads=2)
    for lattice, result in zip(lattices, results):
        assert len(result.tokens) == lattice.k**lattice.h
        np.testing.assert_allclose(result.scores, result.head_scores)


def test_impossible_word_has_a_minus_inf_bound_in_arpa_and_dlm(lm, tmp_path):
    # The bound of a word whose every probability is -inf was NaN (-inf + margin * inf), which
    # disabled the search's pruning test and lost possible drafts.
    three = lm.words().index("3")
    assert lm.word_bounds[three] == -np.inf and not np.isnan(lm.word_bounds).any()
    lm.save(tmp_path / "m.dlm")
    binary = dl.NgramLM(tmp_path / "m.dlm", oov_logprob=-math.inf)
    assert binary.word_bounds[three] == -np.inf
    lattice = _lattice(_ROWS[1])
    a, b = dl.rescore(lattice, lm, p=27, alpha=0.7), dl.rescore(lattice, binary, p=27, alpha=0.7)
    np.testing.assert_array_equal(a.tokens, b.tokens)
    np.testing.assert_array_equal(a.scores, b.scores)


def test_dlm_with_a_nan_word_bound_is_refused(lm, tmp_path):
    import struct

    from test_ngram_binary import _reseal

    lm.save(tmp_path / "m.dlm")
    data = bytearray((tmp_path / "m.dlm").read_bytes())
    offset = struct.unpack_from("<Q", data, 296)[0]  # BinaryHeader.word_bound_offset
    struct.pack_into("<f", data, offset + 4 * 2, math.nan)
    _reseal(data)
    (tmp_path / "bad.dlm").write_bytes(bytes(data))
    with pytest.raises(dl.FormatError, match="word bound of word 2 is NaN"):
        dl.NgramLM(tmp_path / "bad.dlm")
