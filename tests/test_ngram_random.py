"""Random and inconsistently pruned ARPA models: NgramLM equals an independent brute-force
implementation of the backoff formula (and kenlm on consistent models); states are minimal."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from arpa_writer import random_arpa
from draftlattice import NgramLM
from ngram_reference import BruteForceLM

try:
    import kenlm
except ImportError as error:  # a test never passes by skipping
    raise ImportError("tests need the kenlm module: pip install kenlm (in the [test] extra)") from error

LN10 = math.log(10.0)
CASES = [
    (order, seed, consistent, unk)
    for order in (2, 3, 4, 5)
    for seed in range(4)
    for consistent in (True, False)
    for unk in (False, True)
    if (seed + unk) % 2 == 0 or not consistent
]


def token_ids(words):
    """Random-model words are decimal ids; </s>, <s> are not tokens; 99 is unknown."""
    return [int(w) if w.isdigit() else 99 for w in words]


def random_sentence(rng, words, length):
    return [rng.choice(words + ["unseen"]) for _ in range(length)]


@pytest.mark.parametrize("order,seed,consistent,unk", CASES)
def test_random_model_equals_brute_force(tmp_path, order, seed, consistent, unk):
    path = tmp_path / "model.arpa"
    words = random_arpa(path, order, seed, consistent=consistent, with_unk=unk)
    lm = NgramLM(path, oov_logprob=-50.0)
    ref = BruteForceLM(path, oov_ln=-50.0)
    rng = random.Random(seed)
    for _ in range(60):
        sentence = random_sentence(rng, words, rng.randint(1, 8))
        context = random_sentence(rng, words, rng.randint(0, 6))
        bos, eos = rng.random() < 0.5, rng.random() < 0.5
        ours = lm.token_scores(token_ids(sentence), token_ids(context), bos=bos, eos=eos)
        expected = ref.sentence([w if w != "unseen" else "unseen" for w in sentence], context, bos, eos)
        np.testing.assert_allclose(ours, expected, atol=1e-4, rtol=0, err_msg=f"{context} | {sentence}")


@pytest.mark.parametrize("order,seed", [(o, s) for o in (2, 3, 4, 5) for s in range(3)])
def test_consistent_random_model_equals_kenlm(tmp_path, order, seed):
    path = tmp_path / "model.arpa"
    words = random_arpa(path, order, seed, consistent=True, with_unk=True)
    lm = NgramLM(path)
    model = kenlm.Model(str(path))
    rng = random.Random(seed)
    for _ in range(60):
        sentence = random_sentence(rng, words, rng.randint(1, 8))
        bos, eos = rng.random() < 0.5, rng.random() < 0.5
        theirs = [s * LN10 for s, _, _ in model.full_scores(" ".join(sentence), bos=bos, eos=eos)]
        ours = lm.token_scores(token_ids(sentence), bos=bos, eos=eos)
        np.testing.assert_allclose(ours, theirs, atol=1e-4, rtol=0, err_msg=str(sentence))


def relevant(ref: BruteForceLM, suffix: tuple[str, ...]) -> bool:
    """The definition: a proper prefix of a listed n-gram, or listed with a nonzero backoff."""
    if ref.backoffs.get(suffix, 0.0) != 0.0 and suffix in ref.probs:
        return True
    return any(len(g) > len(suffix) and g[: len(suffix)] == suffix for g in ref.probs)


@pytest.mark.parametrize(
    "order,seed,consistent", [(o, s, c) for o in (2, 3, 4, 5) for s in range(2) for c in (True, False)]
)
def test_states_are_minimal_and_stepping_matches(tmp_path, order, seed, consistent):
    path = tmp_path / "model.arpa"
    words = random_arpa(path, order, seed, consistent=consistent)
    lm = NgramLM(path)
    ref = BruteForceLM(path)
    rng = random.Random(seed)
    for _ in range(80):
        history = random_sentence(rng, words, rng.randint(0, 7))
        history = [w for w in history if w != "unseen"]
        bos = rng.random() < 0.5
        state = lm.start(bos=bos)
        total = 0.0
        for w in history:
            score, state = lm.step(state, int(w))
            total += score
        assert total == pytest.approx(lm.score(token_ids(history), bos=bos), abs=1e-5)
        full = (["<s>"] if bos else []) + history
        window = full[max(0, len(full) - (order - 1)) :]
        expected = ()
        for n in range(1, len(window) + 1):
            suffix = tuple(window[len(window) - n :])
            if relevant(ref, suffix):
                expected = suffix
        assert lm.state_words(state) == tuple(reversed(expected)), (full, expected)
        assert lm.start(token_ids(history), bos=bos) == state


def test_states_merge_for_irrelevant_older_words(tmp_path):
    path = tmp_path / "model.arpa"
    words = random_arpa(path, 4, 7, consistent=False)
    lm = NgramLM(path)
    ref = BruteForceLM(path)
    merged = 0
    for a in words:
        for b in words:
            tail = [int(words[1]), int(words[2]), int(words[0])]
            sa, sb = lm.start([int(a)] + tail), lm.start([int(b)] + tail)
            if sa == sb:
                merged += 1
                assert hash(sa) == hash(sb)
                for w in words:  # equal states score every continuation equally
                    assert lm.step(sa, int(w))[0] == lm.step(sb, int(w))[0]
                    assert ref.logprob([a] + [str(t) for t in tail], w) == pytest.approx(
                        ref.logprob([b] + [str(t) for t in tail], w), abs=1e-5
                    )
    assert merged > 0


@pytest.mark.parametrize("order", [1, 6, 7, 8])
def test_orders_one_and_up_to_eight(tmp_path, order):
    path = tmp_path / "model.arpa"
    words = random_arpa(path, order, 11, n_words=3, consistent=False, with_unk=True)
    lm = NgramLM(path)
    ref = BruteForceLM(path)
    assert lm.order == order
    rng = random.Random(order)
    for _ in range(40):
        sentence = random_sentence(rng, words, rng.randint(1, 12))
        context = random_sentence(rng, words, rng.randint(0, 9))
        ours = lm.token_scores(token_ids(sentence), token_ids(context), bos=True, eos=True)
        np.testing.assert_allclose(ours, ref.sentence(sentence, context, True, True), atol=1e-4, rtol=0)
        assert len(lm.start(token_ids(context), bos=True)) <= order - 1
