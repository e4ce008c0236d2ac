"""Katz estimation against OpenGrm NGram 1.3.11's own output (shared/data/katz-reference)."""

from __future__ import annotations

import math

import pytest

from arpa_scorer import ArpaScorer, perplexity
from draftlattice import _core
from draftlattice.ngram.build import build_lm
from lm_helpers import KATZ_REF, cleaned_wikitext, context_sums, parse_arpa, sample_contexts


def _import_kenlm():
    try:
        import kenlm
    except ImportError:  # never skip: the test says what to install
        pytest.fail("the kenlm module is needed: pip install kenlm (or pip install '.[test]')")
    return kenlm


@pytest.fixture(scope="module")
def toy_arpa(tmp_path_factory):
    out = tmp_path_factory.mktemp("toy") / "katz3.arpa"
    build_lm(KATZ_REF / "corpus.txt", 3, out_path=out)
    return out


def test_toy_arpa_equals_opengrm_entry_by_entry(toy_arpa):
    ours, our_order = parse_arpa(toy_arpa)
    ref, ref_order = parse_arpa(KATZ_REF / "katz3.arpa")
    assert our_order == ref_order  # same n-grams, same line order
    for words, (ref_p, ref_bo) in ref.items():
        p, bo = ours[words]
        assert p == pytest.approx(ref_p, abs=1e-6), words
        if ref_bo is None:
            assert bo is None, words
        else:
            assert bo == pytest.approx(ref_bo, abs=1e-4), words
    header = [line for line in toy_arpa.read_text().splitlines() if line.startswith("ngram ")]
    assert header == ["ngram 1=15", "ngram 2=36", "ngram 3=51"]


def test_toy_counts_equal_ngramcount():
    counter = _core.NgramCounter(3)
    counter.add_text((KATZ_REF / "corpus.txt").read_bytes())
    ours = {}
    for k in (1, 2, 3):
        for words, count in counter.items(k):
            ours[" ".join(words)] = count
    ref = {}
    for line in (KATZ_REF / "counts3.txt").read_text().splitlines():
        ngram, count = line.split("\t")
        ref[ngram] = float(count)
    assert ours == ref


def test_toy_discounts_and_count_of_counts():
    counter = _core.NgramCounter(3)
    counter.add_text((KATZ_REF / "corpus.txt").read_bytes())
    model = _core.estimate_katz(counter)
    assert model.count_of_counts == [[1, 3, 1, 2, 2, 1], [12, 18, 1, 2, 2, 0], [41, 7, 2, 1, 0, 0]]
    rows = (KATZ_REF / "discounts3.txt").read_text().splitlines()[1:]
    assert len(rows) == 6
    for r, row in enumerate(rows):
        values = [float(v) for v in row.split()[-1].split("/")]
        for k in range(3):
            assert model.discounts[k][r] == pytest.approx(values[k], rel=1e-5), (r + 1, k + 1)


def test_toy_test_scores_reproduced(toy_arpa):
    """Per-word -log10 p and sentence totals of ngramperplexity --v=1 (test_scores.txt)."""
    scorer = ArpaScorer(str(toy_arpa))
    lines = (KATZ_REF / "test_scores.txt").read_text().splitlines()
    expected_words = [float(line.split()[-1]) for line in lines if line.strip().startswith("p(")]
    expected_totals = [float(line.split("=")[1].split(";")[0]) for line in lines if line.startswith("logprob")]
    got_words, got_totals = [], []
    for sentence in (KATZ_REF / "test.txt").read_text().splitlines():
        words = sentence.split()
        history = ("<s>",)
        for w in words + ["</s>"]:
            lp, _ = scorer.log10_prob(history, w)
            got_words.append(-lp)
            history += (w,)
        got_totals.append(scorer.sentence_log10(words)[0])

    # ngramperplexity prints 6 significant digits (of float32 values): within half a unit of the
    # last printed digit, plus 1e-6 for OpenGrm's float32 arithmetic.
    def close(ours, printed):
        unit = 10.0 ** (math.floor(math.log10(abs(printed))) - 5)
        return abs(ours - printed) <= unit / 2 + 1e-6

    assert len(got_words) == len(expected_words)
    for ours, printed in zip(got_words + got_totals + [sum(got_totals)], expected_words + expected_totals):
        assert close(ours, printed), (ours, printed)


def test_complete_state_gets_reserved_mass_on_eos(tmp_path):
    # After "a" every unigram successor (a, b, </s>) is seen: "a" is a complete state.
    corpus = tmp_path / "c.txt"
    corpus.write_text("a\na a\na b\nb\nb b a\n")
    out = tmp_path / "c.arpa"
    build_lm(corpus, 2, out_path=out)
    entries, _ = parse_arpa(out)
    assert entries[("a",)][1] == pytest.approx(-99 / math.log(10), abs=1e-4)  # -42.99515
    total = sum(10 ** entries[words][0] for words in entries if len(words) == 2 and words[0] == "a")
    assert total == pytest.approx(1.0, abs=1e-6)  # 7 printed digits


def test_wikitext_slice_contexts_normalised(tmp_path):
    """Every sampled context's distribution sums to 1 over the whole vocabulary (exact backoff)."""
    corpus = cleaned_wikitext("train", tmp_path, max_lines=3000)
    out = tmp_path / "wt3.arpa"
    build_lm(corpus, 3, out_path=out, arpa_digits=12)  # 7 digits would round sums by ~1e-6
    scorer = ArpaScorer(str(out))
    contexts = sample_contexts(scorer, 40, seed=1) + [("never-seen-word",), ("the", "zzz")]
    sums = context_sums(scorer, contexts, sorted(scorer.vocab))
    for h, s in zip(contexts, sums):
        assert s == pytest.approx(1.0, abs=1e-6), h


def test_kenlm_loads_our_arpa_and_agrees(tmp_path):
    kenlm = _import_kenlm()
    corpus = cleaned_wikitext("train", tmp_path, max_lines=2000)
    out = tmp_path / "wt4.arpa"
    build_lm(corpus, 4, out_path=out, min_counts=[1, 1, 2, 2])
    model = kenlm.Model(str(out))
    scorer = ArpaScorer(str(out))
    valid = cleaned_wikitext("valid", tmp_path, max_lines=200).read_text().splitlines()
    for line in valid[:200]:
        words = line.split()
        if any(w not in scorer.vocab for w in words):
            continue
        ours = scorer.sentence_log10(words)[0]
        assert model.score(" ".join(words), bos=True, eos=True) == pytest.approx(ours, abs=1e-3)


@pytest.mark.slow
def test_wikitext2_recipe_matches_opengrm(tmp_path):
    """The paper's recipe: counts per order and ngramperplexity's valid/test perplexity."""
    train = cleaned_wikitext("train", tmp_path)
    out = tmp_path / "wt2.katz4.arpa"
    result = build_lm(train, 4, out_path=out)
    assert result.counts == [33279, 619591, 1398959, 1794725]
    assert result.discounts[3][:5] == pytest.approx([0.0810831, 0.322543, 0.552338, 0.646438, 0.704179], abs=1e-6)
    scorer = ArpaScorer(str(out))
    for split, expected in (("valid", 287.805), ("test", 269.25)):
        lines = cleaned_wikitext(split, tmp_path).read_text().splitlines()
        ppl, _n, oov = perplexity(scorer, (line.split() for line in lines))
        assert oov == 0
        assert ppl == pytest.approx(expected, abs=0.01), split
