"""NgramLM scoring equals the kenlm module's on the shared lmplz models, and stepping equals
scoring. Random and pruned models are in test_ngram_random.py."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

import draftlattice
from draftlattice import NgramLM

try:
    import kenlm
except ImportError as error:  # a test never passes by skipping
    raise ImportError("tests need the kenlm module: pip install kenlm (in the [test] extra)") from error

LN10 = math.log(10.0)
TOL = 1e-4  # nats


def arpa_words(path) -> list[str]:
    words = []
    with open(path, encoding="utf-8") as handle:
        in_unigrams = False
        for line in handle:
            line = line.rstrip("\n")
            if line == "\\1-grams:":
                in_unigrams = True
                continue
            if in_unigrams:
                if not line.strip():
                    break
                words.append(line.split("\t")[1])
    return words


class Fixture:
    """An LM loaded by us (from the .xz) and by kenlm (from the decompressed ARPA)."""

    def __init__(self, name, shared_data, decompressed_lm):
        arpa = decompressed_lm(name)
        words = arpa_words(arpa)
        random.Random(0).shuffle(words)
        self.vocab = words + ["word-the-lm-never-saw"]
        self.token = {w: i for i, w in enumerate(self.vocab)}
        self.lm = NgramLM(shared_data / "lm" / f"{name}.arpa.xz", vocab=self.vocab)
        self.kenlm = kenlm.Model(str(arpa))
        lines = (shared_data / "wikitext-2" / "test.txt").read_text(encoding="utf-8").splitlines()
        self.sentences = [line.split() for line in lines if len(line.split()) >= 3][:300]
        self.unknown = len(self.vocab) - 1

    def ids(self, words):
        return [self.token.get(w, self.unknown) for w in words]

    def kenlm_scores(self, words, bos, eos):
        return np.array([s for s, _, _ in self.kenlm.full_scores(" ".join(words), bos=bos, eos=eos)]) * LN10


@pytest.fixture(scope="module", params=["wt2_kn3_pruned", "wt2_kn4"])
def model(request, shared_data, decompressed_lm):
    return Fixture(request.param, shared_data, decompressed_lm)


def test_counts_and_order(model):
    assert model.lm.order == model.kenlm.order
    assert model.lm.vocab_size == len(model.vocab) - 1
    assert model.lm.source_format == "arpa"


@pytest.mark.parametrize("bos,eos", [(True, True), (False, False), (True, False), (False, True)])
def test_token_scores_equal_kenlm(model, bos, eos):
    for words in model.sentences:
        ours = model.lm.token_scores(model.ids(words), bos=bos, eos=eos)
        theirs = model.kenlm_scores(words, bos, eos)
        assert ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, atol=TOL, rtol=0, err_msg=" ".join(words))
        assert model.lm.score(model.ids(words), bos=bos, eos=eos) == pytest.approx(theirs.sum(), abs=TOL * len(theirs))


def test_context_equals_kenlm_state_api(model):
    rng = random.Random(1)
    for words in model.sentences[:100]:
        cut = rng.randrange(1, len(words))
        context, rest = words[:cut], words[cut:]
        state, out = kenlm.State(), kenlm.State()
        model.kenlm.BeginSentenceWrite(state)
        for w in context:
            model.kenlm.BaseScore(state, w, out)
            state, out = out, state
        expected = []
        for w in rest:
            expected.append(model.kenlm.BaseScore(state, w, out) * LN10)
            state, out = out, state
        ours = model.lm.token_scores(model.ids(rest), context=model.ids(context), bos=True)
        np.testing.assert_allclose(ours, expected, atol=TOL, rtol=0)


def test_stepping_equals_scoring(model):
    for words in model.sentences[:100]:
        ids = model.ids(words)
        state = model.lm.start(bos=True)
        stepped = []
        for t in ids:
            score, state = model.lm.step(state, t)
            stepped.append(score)
        score, _ = model.lm.step_eos(state)
        stepped.append(score)
        np.testing.assert_allclose(stepped, model.lm.token_scores(ids, bos=True, eos=True), atol=1e-6)


def test_states_merge_on_irrelevant_history(model):
    """Histories that differ only in words the model cannot use give equal states."""
    ids = model.ids("the game was released in".split())
    a = model.lm.start(context=[model.token["Valkyria"]] + ids)
    b = model.lm.start(context=[model.token["the"]] + ids)
    assert a == b and hash(a) == hash(b)
    assert len(a) <= model.lm.order - 1
    assert model.lm.start(ids) != model.lm.start(ids[:-1])
    assert {a, b} == {a}


def test_unknown_token_scores_as_unk(model):
    unk = model.lm.step(model.lm.start(), model.unknown)[0]
    assert unk == pytest.approx(model.kenlm.score("<unk>", bos=False, eos=False) * LN10, abs=TOL)


def test_exported_from_package():
    assert draftlattice.NgramLM is NgramLM


def test_opengrm_katz_model_matches_ngramperplexity(shared_data):
    """OpenGrm NGram's Katz ARPA and its ngramperplexity output (in ../shared/data/katz-reference)."""
    ref_dir = shared_data / "katz-reference"
    plain = NgramLM(ref_dir / "katz3.arpa")
    vocab = plain.words()
    lm = plain.with_vocab(vocab)
    expected = [
        float(line.split()[-1]) * -LN10
        for line in (ref_dir / "test_scores.txt").read_text(encoding="utf-8").splitlines()
        if line.strip().startswith("p(")
    ]
    ours = []
    for line in (ref_dir / "test.txt").read_text(encoding="utf-8").splitlines():
        ours.extend(lm.token_scores([vocab.index(w) for w in line.split()], bos=True, eos=True))
    assert len(ours) == len(expected) == 13
    np.testing.assert_allclose(ours, expected, atol=1e-5 * LN10 * 5, rtol=0)
