"""The token -> LM word map of NgramLM without vocab= (csrc/ngram/token_lm.h): numeric LM words are
token ids however large, scores equal the kenlm module's on the same words, and the map's memory
grows with the vocabulary, not with the largest numeric word (a whitespace Wikipedia LM has words
like "220194953", which once cost a dense table of 880 MB)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from arpa_writer import random_arpa
from draftlattice import NgramLM

try:
    import kenlm
except ImportError as error:  # a test never passes by skipping
    raise ImportError("tests need the kenlm module: pip install kenlm (in the [test] extra)") from error

LN10 = math.log(10.0)

# Small ids (dense part) and ids far past 4 x the vocabulary (the sorted part), int32's maximum
# included.
WORD_IDS = [3, 11, 64, 70_000, 4_194_303, 220_194_953, 2_147_483_647]


def _renumbered_arpa(tmp_path, order: int, seed: int, consistent: bool = True):
    """A random ARPA whose words "0".."6" are renamed to WORD_IDS; returns (path, ids)."""
    path = tmp_path / f"numeric-{order}-{seed}.arpa"
    random_arpa(path, order, seed, n_words=len(WORD_IDS), consistent=consistent)
    rename = {str(i): str(word_id) for i, word_id in enumerate(WORD_IDS)}
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        if len(fields) >= 2:
            fields[1] = " ".join(rename.get(word, word) for word in fields[1].split(" "))
        lines.append("\t".join(fields))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _sentences(seed: int, count: int = 60) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.choice(WORD_IDS) for _ in range(rng.randint(1, 9))] for _ in range(count)]


@pytest.mark.parametrize("order,seed", [(2, 1), (3, 2), (4, 3), (5, 4)])
def test_large_numeric_words_score_as_kenlm(tmp_path, order, seed):
    path = _renumbered_arpa(tmp_path, order, seed)
    theirs = kenlm.Model(str(path))
    for lm in (NgramLM(path), NgramLM(_saved(lm_path=path, tmp_path=tmp_path))):
        assert lm.mapped_words == len(WORD_IDS)
        for sentence in _sentences(seed):
            ours = lm.token_scores(np.array(sentence, dtype=np.int32), bos=True, eos=True)
            words = " ".join(map(str, sentence))
            expected = np.array([s for s, _, _ in theirs.full_scores(words, bos=True, eos=True)]) * LN10
            np.testing.assert_allclose(ours, expected, atol=1e-4, rtol=0, err_msg=words)


def test_map_matches_an_explicit_vocab(tmp_path):
    """Without vocab= each numeric word maps to itself: the same scores as an explicit vocab
    that spells every id (the dense path), for known ids and for ids between and past them."""
    path = _renumbered_arpa(tmp_path, 3, 7, consistent=False)
    implicit = NgramLM(path)
    probe = sorted(set(WORD_IDS) | {0, 12, 69_999, 70_001, 220_194_952, 2_147_483_646})
    index = {word_id: i for i, word_id in enumerate(probe)}
    explicit = NgramLM(path, vocab=[str(word_id) for word_id in probe])
    for sentence in _sentences(8) + [[12, 3, 69_999, 220_194_952, 2_147_483_646]]:
        ours = implicit.token_scores(np.array(sentence, dtype=np.int32), bos=False, eos=True)
        reference = explicit.token_scores(np.array([index[t] for t in sentence], dtype=np.int32), bos=False, eos=True)
        np.testing.assert_array_equal(ours, reference)


def test_unknown_ids_between_large_words_score_as_oov(tmp_path):
    path = _renumbered_arpa(tmp_path, 2, 9)
    lm = NgramLM(path, oov_logprob=-50.0)
    for token in (0, 70_001, 220_194_952, 220_194_954, 2_147_483_646):
        assert lm.token_scores(np.array([token], dtype=np.int32), bos=False, eos=False)[0] == -50.0
    known = lm.token_scores(np.array([220_194_953], dtype=np.int32), bos=False, eos=False)[0]
    assert known != -50.0 and known <= 0.0


def test_map_memory_grows_with_the_vocabulary_not_the_largest_word(tmp_path):
    path = _renumbered_arpa(tmp_path, 2, 10)
    lm = NgramLM(path)
    # The dense part holds at most max(2^16, 4 V) slots; the 2 ids past it take 8 bytes each.
    assert lm.token_map_bytes <= 4 * (1 << 16) + 8 * len(WORD_IDS)
    dense_only = NgramLM(_renumbered_small(tmp_path))
    assert dense_only.token_map_bytes == 4 * (60_000 + 1)


def _renumbered_small(tmp_path):
    """An ARPA whose numeric words are all below the dense limit: a plain dense table."""
    path = tmp_path / "small.arpa"
    random_arpa(path, 2, 11, n_words=4)
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        if len(fields) >= 2:
            fields[1] = " ".join({"0": "3", "1": "11", "2": "64", "3": "60000"}.get(w, w) for w in fields[1].split(" "))
        lines.append("\t".join(fields))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _saved(lm_path, tmp_path):
    """The model compiled to .dlm (the mapped loader builds the same map)."""
    out = tmp_path / (lm_path.stem + ".dlm")
    NgramLM(lm_path).save(out, overwrite=True)
    return out
