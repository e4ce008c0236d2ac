"""Issue 15 item 3: a huge Python int for any numeric parameter is a ValueError naming the
parameter (never a pybind TypeError or an OverflowError), on every public entry point."""

from __future__ import annotations

import numpy as np
import pytest

import draftlattice as dl
from arpa_writer import random_arpa
from draftlattice import _core
from draftlattice.ngram.build import build_lm
from draftlattice.sample import sample_from_heads
from lm_helpers import KATZ_REF

HUGE = [2**63, 2**64, 2**70, -(2**70), 10**400]


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    path = tmp_path_factory.mktemp("huge") / "m.arpa"
    random_arpa(path, 2, 10, with_unk=True)
    return dl.NgramLM(path)


@pytest.fixture(scope="module")
def lattice():
    return dl.Lattice.from_logits(np.random.default_rng(0).standard_normal((2, 6)).astype(np.float32), 3)


def _calls(lm, lattice, tmp_path):
    logits = np.zeros((2, 6), np.float32)
    heads = np.log(np.full((2, 6), 1 / 6))
    corpus = KATZ_REF / "corpus.txt"
    out = tmp_path / "o.arpa"
    return {
        "k": [
            lambda v: dl.Lattice.from_logits(logits, v),
            lambda v: dl.Lattice.batch_from_logits(logits[None], v),
            lambda v: sample_from_heads(heads, v, lm, n=1, generator=0),
        ],
        "p": [
            lambda v: dl.rescore(lattice, lm, p=v, alpha=0.5),
            lambda v: dl.rescore_batch([lattice], lm, [[]], p=v, alpha=0.5),
        ],
        "n": [
            lambda v: dl.sample_drafts(lattice, lm, n=v, alpha=0.5, generator=0),
            lambda v: sample_from_heads(heads, 2, lm, n=v, generator=0),
        ],
        "num_threads": [lambda v: dl.rescore_batch([lattice], lm, [[]], p=2, alpha=0.5, num_threads=v)],
        "token": [lambda v: lm.step(lm.start(), v)],
        "tokens": [lambda v: lm.token_scores([v]), lambda v: lm.advance(lm.start(), [v])],
        "context": [lambda v: dl.rescore(lattice, lm, p=2, alpha=0.5, context=[v]), lambda v: lm.start([v])],
        "word id": [lambda v: lm.word(v)],
        "order": [lambda v: build_lm(corpus, v, out_path=out, overwrite=True), lambda v: _core.NgramCounter(v)],
        "prune_to": [lambda v: build_lm(corpus, 2, out_path=out, overwrite=True, prune_to=v)],
        "min_counts": [lambda v: build_lm(corpus, 2, out_path=out, overwrite=True, min_counts=[1, v])],
        "arpa_digits": [lambda v: build_lm(corpus, 2, out_path=out, overwrite=True, arpa_digits=v)],
    }


@pytest.mark.parametrize("value", HUGE)
def test_huge_ints_are_value_errors_naming_the_parameter(lm, lattice, tmp_path, value):
    for name, calls in _calls(lm, lattice, tmp_path).items():
        for call in calls:
            with pytest.raises(ValueError) as error:
                call(value)
            message = str(error.value)
            assert name.split()[0] in message or "token id" in message, (name, value, message)


@pytest.mark.parametrize("value", [10**400, -(10**400)])
def test_ints_beyond_float_range_are_value_errors(lm, lattice, tmp_path, value):
    calls = {
        "alpha": lambda: dl.rescore(lattice, lm, p=2, alpha=value),
        "oov_logprob": lambda: dl.NgramLM(KATZ_REF / "corpus.txt", oov_logprob=value),
        "temperature": lambda: dl.Lattice.from_logits(np.zeros((2, 6), np.float32), 2, temperature=value),
        "prune_threshold": lambda: build_lm(
            KATZ_REF / "corpus.txt", 2, out_path=tmp_path / "o.arpa", prune_threshold=value
        ),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=name):
            call()


def test_uint64_token_ids_report_their_true_value(lm):
    ids = np.array([2**63], dtype=np.uint64)
    with pytest.raises(ValueError, match=f"token id {2**63} outside int32"):
        lm.token_scores(ids)
    with pytest.raises(ValueError, match=f"token id {2**63} outside int32"):
        lm.token_scores([2**63])


def test_word_id_out_of_range(lm):
    with pytest.raises(ValueError, match=r"word id -1 is outside 0\.\."):
        lm.word(-1)
    assert lm.word(0) == lm.words()[0]
