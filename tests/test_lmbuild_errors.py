"""build_lm / `lm build`: clear errors for bad input, tokenizer mode and its mismatch check."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from draftlattice import FormatError
from draftlattice.cli.lm_build import register_build
from draftlattice.ngram.build import TOKENIZER_SHA256_KEY, build_lm, read_arpa_metadata, tokenizer_sha256
from draftlattice.pairing import TokenizerMismatchError, check_lm_tokenizer
from lm_helpers import KATZ_REF

TOKENIZER = Path(__file__).resolve().parents[1] / "lm_models" / "tokenizer.json"


def _corpus(tmp_path, data: bytes, name="c.txt") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_empty_and_blank_corpora(tmp_path):
    for data in (b"", b"\n  \n\t\n"):
        with pytest.raises(ValueError, match="empty corpus"):
            build_lm(_corpus(tmp_path, data), 3, out_path=tmp_path / "o.arpa")


def test_binary_garbage_names_file_line_and_offset(tmp_path):
    path = _corpus(tmp_path, b"a b c\nd e\x00\x01\x02 f\n", "bin.dat")
    with pytest.raises(FormatError, match=r"bin\.dat: line 2 \(byte offset 9\).*NUL"):
        build_lm(path, 2, out_path=tmp_path / "o.arpa")


def test_invalid_utf8_names_file_line_and_offset(tmp_path):
    path = _corpus(tmp_path, b"ok line\nsecond\nbad \xff\xfe here\n", "latin.txt")
    with pytest.raises(FormatError, match=r"latin\.txt: line 3 \(byte offset 19\) is not valid UTF-8"):
        build_lm(path, 2, out_path=tmp_path / "o.arpa")


def test_tokenizer_that_does_not_parse(tmp_path):
    bad = _corpus(tmp_path, b'{"version": "1.0", "model": ', "tokenizer.json")
    with pytest.raises(FormatError, match="not a valid tokenizer.json"):
        build_lm(KATZ_REF / "corpus.txt", 2, out_path=tmp_path / "o.arpa", tokenizer=bad)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"order": 0}, "order must be in 1..8"),
        ({"order": 9}, "order must be in 1..8"),
        ({"order": 3, "min_counts": [1, 2]}, "one entry per order"),
        ({"order": 3, "min_counts": [1, -1, 2]}, ">= 1"),
        ({"order": 3, "min_counts": [1, 3, 2]}, "must not decrease"),
        ({"order": 3, "min_counts": [2, 2, 2]}, "unigram min count must be 1"),
        ({"order": 3, "prune_to": 100, "prune_threshold": 1e-7}, "at most one of"),
        ({"order": 3, "prune_to": 0}, "positive integer"),
        ({"order": 3, "prune_threshold": -1.0}, ">= 0"),
        ({"order": 3, "prune_to": 5}, "below the number of unigrams"),
    ],
)
def test_impossible_parameters(tmp_path, kwargs, message):
    order = kwargs.pop("order")
    with pytest.raises(ValueError, match=message):
        build_lm(KATZ_REF / "corpus.txt", order, out_path=tmp_path / "o.arpa", **kwargs)


def test_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="corpus file not found"):
        build_lm(tmp_path / "missing.txt", 2, out_path=tmp_path / "o.arpa")
    with pytest.raises(ValueError, match=r"\.arpa or \.dlm"):
        build_lm(KATZ_REF / "corpus.txt", 2, out_path=tmp_path / "o.bin")
    out = tmp_path / "o.arpa"
    build_lm(KATZ_REF / "corpus.txt", 2, out_path=out)
    with pytest.raises(FileExistsError, match="exists"):
        build_lm(KATZ_REF / "corpus.txt", 2, out_path=out)
    build_lm(KATZ_REF / "corpus.txt", 2, out_path=out, overwrite=True)
    assert list(tmp_path.glob(".*tmp")) == []  # no temporary files left behind


def test_compressed_corpus(tmp_path):
    import lzma

    path = tmp_path / "c.txt.xz"
    path.write_bytes(lzma.compress((KATZ_REF / "corpus.txt").read_bytes()))
    result = build_lm(path, 3, out_path=tmp_path / "o.arpa")
    assert result.counts == [15, 36, 51]


def test_tokenizer_mode_records_hash_and_detects_mismatch(tmp_path):
    out = tmp_path / "tok.arpa"
    result = build_lm(KATZ_REF / "corpus.txt", 3, out_path=out, tokenizer=TOKENIZER)
    sha = tokenizer_sha256(TOKENIZER)
    assert result.tokenizer_sha256 == sha
    assert read_arpa_metadata(out) == {TOKENIZER_SHA256_KEY: sha}
    assert out.read_text().startswith(f"# {TOKENIZER_SHA256_KEY}: {sha}\n")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(TOKENIZER))
    words = {w for w in read_words(out)} - {"<s>", "</s>"}
    ids = {i for line in (KATZ_REF / "corpus.txt").read_text().splitlines() for i in tok.encode(line).ids}
    assert words == {str(i) for i in ids}  # ARPA words are decimal token ids
    check_lm_tokenizer(out, TOKENIZER)
    other = tmp_path / "other.json"
    shutil.copy(TOKENIZER, other)
    with open(other, "a") as f:
        f.write("\n")
    with pytest.raises(TokenizerMismatchError, match="built over tokenizer sha256"):
        check_lm_tokenizer(out, other)
    words_lm = tmp_path / "words.arpa"
    build_lm(KATZ_REF / "corpus.txt", 2, out_path=words_lm)
    with pytest.raises(TokenizerMismatchError, match="records no tokenizer"):
        check_lm_tokenizer(words_lm, TOKENIZER)


def read_words(arpa: Path) -> list[str]:
    words, in_unigrams = [], False
    for line in arpa.read_text().splitlines():
        if line == "\\1-grams:":
            in_unigrams = True
        elif in_unigrams and line.startswith("\\"):
            break
        elif in_unigrams and line:
            words.append(line.split("\t")[1])
    return words


def test_cli_build(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    register_build(parser.add_subparsers())
    out = tmp_path / "cli.arpa"
    args = parser.parse_args(
        ["build", str(KATZ_REF / "corpus.txt"), "--order", "3", "--min-count", "1,1,2", "-o", str(out)]
    )
    assert args.func(args) == 0
    assert "n-grams per order 15 / 36 / 10" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        parser.parse_args(["build", "c.txt", "--prune-to", "5", "--prune-threshold", "1", "-o", "x.arpa"])
