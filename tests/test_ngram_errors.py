"""Bad LM files, vocabularies and tokens raise clear exceptions (never crash)."""

from __future__ import annotations

import gzip
import lzma
import math

import numpy as np
import pytest

from draftlattice import FormatError, NgramLM

GOOD = """\\data\\
ngram 1=4
ngram 2=2

\\1-grams:
-1.0\t<s>\t-0.5
-0.5\t1\t-0.2
-0.7\t2
-0.9\t</s>

\\2-grams:
-0.1\t<s> 1
-0.3\t1 2

\\end\\
"""


def write(tmp_path, text, name="model.arpa"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_good_fixture_loads(tmp_path):
    lm = NgramLM(write(tmp_path, GOOD))
    assert lm.order == 2 and list(lm.counts) == [4, 2]


@pytest.mark.parametrize(
    "text,problem",
    [
        ("", "empty ARPA file"),
        ("\n  \n", "empty ARPA file"),
        ("hello\nworld\n", r"no \\data\\ section"),
        (GOOD.replace("ngram 2=2", "ngram 2=3"), r":1[45]: section \\2-grams: has 2 entries but the header says 3"),
        (GOOD.replace("ngram 2=2", "ngram 2=1"), r":13: section \\2-grams: has more entries"),
        (GOOD.replace("ngram 1=4", "ngram 1=5"), r"section \\1-grams: has 4 entries but the header says 5"),
        (GOOD.replace("-0.7\t2", "-0.x7\t2"), r":8: cannot parse probability '-0.x7'"),
        (GOOD.replace("-0.5\t1\t-0.2", "-0.5\t1\tbo"), r":7: cannot parse backoff 'bo'"),
        (GOOD.replace("-0.7\t2", "nan\t2"), r":8: cannot parse probability 'nan'"),
        (GOOD.replace("ngram 2=2", "ngram two=2"), r":3: cannot parse n-gram count 'two'"),
        (GOOD.replace("ngram 2=2", "ngram 3=2"), r":3: expected 'ngram 2=...', found order 3"),
        (GOOD.split("\\2-grams:")[0], r"missing \\2-grams: section"),
        (GOOD.replace("\\2-grams:", "\\3-grams:"), r":11: expected '\\2-grams:'"),
        (GOOD.replace("\\end\\", ""), r"missing \\end\\"),
        (GOOD.replace("\\end\\", "\\the end\\"), r"expected \\end\\"),
        (GOOD.replace("-0.3\t1 2", "-0.3\t1 3"), r":13: word '3' of this 2-gram has no 1-gram entry"),
        (GOOD.replace("-0.3\t1 2", "-0.1\t<s> 1"), r":13: duplicate 2-gram"),
        (GOOD.replace("-0.7\t2", "-0.5\t1"), r":8: duplicate 1-gram '1'"),
        (GOOD.replace("-0.3\t1 2", "-0.3\t1 2\t-0.1"), r":13: a 2-gram line needs 3 fields"),
        (GOOD.replace("-0.3\t1 2", "-0.3\t1"), r":13: a 2-gram line needs 3 fields"),
        (GOOD.replace("ngram 1=4", "ngram 1=0"), "no 1-grams"),
        ("\\data\\\n\n\\1-grams:\n", r"lists no 'ngram N=COUNT' lines"),
        (
            "\\data\\\n" + "".join(f"ngram {n}=1\n" for n in range(1, 10)),
            r"order 9 is not supported \(at most 8\)",
        ),
        (GOOD[: GOOD.index("-0.3\t1 2")], r"section \\2-grams: has 1 entries but the header says 2"),
    ],
    ids=lambda value: value[:40] if isinstance(value, str) else None,
)
def test_malformed_arpa_names_file_line_and_problem(tmp_path, text, problem):
    path = write(tmp_path, text)
    with pytest.raises(FormatError, match=str(path).replace(".", r"\.") + ".*" + problem):
        NgramLM(path)


def test_compressed_inputs_load_and_truncated_ones_raise(tmp_path):
    xz = tmp_path / "model.arpa.xz"
    xz.write_bytes(lzma.compress(GOOD.encode()))
    gz = tmp_path / "model.arpa.gz"
    gz.write_bytes(gzip.compress(GOOD.encode()))
    plain = NgramLM(write(tmp_path, GOOD))
    for path in (xz, gz):
        assert NgramLM(path).score([1, 2], bos=True) == plain.score([1, 2], bos=True)
        path.write_bytes(path.read_bytes()[:-10])
        with pytest.raises(FormatError, match="cannot decompress"):
            NgramLM(path)


def test_missing_file_raises_oserror(tmp_path):
    with pytest.raises(FileNotFoundError, match="No such file"):
        NgramLM(tmp_path / "absent.arpa")


def test_vocab_not_covering_the_lm(tmp_path):
    path = write(tmp_path, GOOD)
    with pytest.raises(ValueError, match=r"does not cover 1 of the LM's 4 words, e.g. '2'"):
        NgramLM(path, vocab=["1", "x"])
    NgramLM(path, vocab=["2", "1", "x"])  # covering: fine, extra words are unknown tokens


@pytest.mark.parametrize("oov", [math.nan, 0.5, math.inf])
def test_bad_oov_logprob(tmp_path, oov):
    with pytest.raises(ValueError, match="oov_logprob"):
        NgramLM(write(tmp_path, GOOD), oov_logprob=oov)


def test_tokens_out_of_range(tmp_path):
    path = write(tmp_path, GOOD)
    with_vocab = NgramLM(path, vocab=["1", "2", "other"])
    with pytest.raises(ValueError, match=r"tokens\[1\] = 3 is not a token id of the 3-token vocab"):
        with_vocab.score([0, 3])
    with pytest.raises(ValueError, match=r"context\[0\] = -1"):
        with_vocab.score([0], context=[-1])
    with pytest.raises(ValueError, match=r"token\[0\] = 7"):
        with_vocab.step(with_vocab.start(), 7)
    plain = NgramLM(path)
    with pytest.raises(ValueError, match="negative"):
        plain.token_scores([1, -5])
    with pytest.raises(ValueError, match="outside int32"):
        plain.score([2**40])
    with pytest.raises(ValueError, match="integer token ids"):
        plain.score([1.5])
    with pytest.raises(ValueError, match="1-D"):
        plain.score(np.zeros((2, 2), dtype=np.int32))
    # Unknown but valid ids score oov_logprob (no <unk> in this model) and reset the state.
    assert plain.score([1000]) == -1000.0
    assert plain.step(plain.start(bos=True), 1000)[1] == plain.start()


def test_oov_and_unknown_words_without_unk(tmp_path):
    lm = NgramLM(write(tmp_path, GOOD), oov_logprob=-7.0)
    scores = lm.token_scores([1, 9, 2], bos=True)
    assert scores[1] == -7.0
    assert scores[2] == pytest.approx(-0.7 * math.log(10))  # history was reset
