"""Relative-entropy pruning (ngramshrink --method=relative_entropy) and minimum counts."""

from __future__ import annotations

import math

import pytest

from arpa_scorer import ArpaScorer, perplexity
from draftlattice.ngram.build import build_lm
from lm_helpers import KATZ_REF, cleaned_wikitext, context_sums, parse_arpa, sample_contexts


def _recomputed_backoffs(entries):
    """log10 alpha(h) = log10 (1 - sum p(w|h)) - log10 (1 - sum p(w|h')) over listed successors."""
    hi, lo = {}, {}
    for words, (p, _) in entries.items():
        if len(words) < 2:
            continue
        h = words[:-1]
        hi[h] = hi.get(h, 0.0) + 10**p
        lo[h] = lo.get(h, 0.0) + 10 ** entries[words[1:]][0]
    return {h: math.log10(1 - hi[h]) - math.log10(1 - lo[h]) for h in hi}


@pytest.fixture(scope="module")
def wt_slice(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wt")
    corpus = cleaned_wikitext("train", tmp, max_lines=4000)
    full = tmp / "full.arpa"
    build_lm(corpus, 3, out_path=full, arpa_digits=12)
    return corpus, full, tmp


def test_prune_to_target_keeps_probabilities_recomputes_backoffs(wt_slice):
    corpus, full_path, tmp = wt_slice
    full, _ = parse_arpa(full_path)
    unigrams = sum(1 for w in full if len(w) == 1)
    target = unigrams + 40000
    out = tmp / "pruned.arpa"
    result = build_lm(corpus, 3, out_path=out, prune_to=target, arpa_digits=12)
    pruned, _ = parse_arpa(out)
    assert sum(result.counts) == len(pruned) == target  # target size reached exactly
    assert result.counts[0] == unigrams  # unigrams never pruned
    for words, (p, _) in pruned.items():
        assert p == full[words][0], words  # kept probabilities unchanged
        if len(words) >= 2:  # no holes: every kept n-gram keeps its prefix and suffix
            assert words[:-1] in pruned and words[1:] in pruned
    expected = _recomputed_backoffs(pruned)
    for words, (_, bo) in pruned.items():
        if words in expected:
            assert bo == pytest.approx(expected[words], abs=1e-9), words
        elif words != ("<s>",):
            assert bo is None, words  # backoffs only on n-grams that remain contexts
    scorer = ArpaScorer(str(out))
    contexts = sample_contexts(scorer, 25)
    for h, s in zip(contexts, context_sums(scorer, contexts, sorted(scorer.vocab))):
        assert s == pytest.approx(1.0, abs=1e-6), h


def test_prune_threshold_monotone(wt_slice):
    corpus, _, tmp = wt_slice
    sizes = []
    for threshold in (0.0, 1e-8, 1e-7, 1e-6):
        out = tmp / f"t{threshold}.arpa"
        sizes.append(sum(build_lm(corpus, 3, out_path=out, prune_threshold=threshold).counts))
    assert sizes == sorted(sizes, reverse=True)
    assert sizes[-1] < sizes[0]


def test_min_counts_remove_rare_ngrams_and_keep_context_totals(tmp_path):
    out = tmp_path / "m.arpa"
    result = build_lm(KATZ_REF / "corpus.txt", 3, out_path=out, min_counts=[1, 1, 2])
    entries, _ = parse_arpa(out)
    assert result.counts[:2] == [15, 36]  # unigrams and bigrams untouched
    assert result.count_of_counts[2][0] == 0  # no singleton trigrams left
    assert result.counts[2] == 7 + 2 + 1  # n_2 + n_3 + n_4 of the trigram counts
    # p(sat | the cat) = d_2 * 2 / c(the cat) with c(the cat) = 5 (removed counts stay in c(h)).
    n2, n3 = 7, 2  # trigram count-of-counts; rnorm = 0 since n_6 = 0
    d2 = (3 * n3 / n2) / 2
    assert entries[("the", "cat", "sat")][0] == pytest.approx(math.log10(d2 * 2 / 5), abs=1e-6)
    scorer = ArpaScorer(str(out))
    contexts = [("<s>",), ("the", "cat"), ("a", "bone"), ("sat", "on"), ("on", "the")]
    for s in context_sums(scorer, contexts, sorted(scorer.vocab)):
        assert s == pytest.approx(1.0, abs=1e-5)


@pytest.mark.slow
def test_wikitext2_pruned_to_1m_matches_opengrm(tmp_path):
    train = cleaned_wikitext("train", tmp_path)
    out = tmp_path / "wt2.re1M.arpa"
    result = build_lm(train, 4, out_path=out, prune_to=1_000_000)
    assert result.counts == [33279, 545526, 363806, 57389]
    scorer = ArpaScorer(str(out))
    for split, expected in (("valid", 284.277), ("test", 264.849)):
        lines = cleaned_wikitext(split, tmp_path).read_text().splitlines()
        ppl, _n, _oov = perplexity(scorer, (line.split() for line in lines))
        assert ppl == pytest.approx(expected, abs=0.01), split
