"""Byte-level BPE training: determinism, round trip, the CLI, hashing, and bad corpora."""

from __future__ import annotations

import hashlib

import pytest

from draftlattice.cli.main import main
from draftlattice.tokenizer import load_tokenizer, tokenizer_sha256, train_tokenizer

TEXT = (
    "\n".join(
        ["  the cat sat on the mat .  ", " ", "", "the dog sat on the log .", "a cat and a dog ; café 東京 ."] * 20
    )
    + "\n"
)


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def test_train_round_trip_and_determinism(corpus, tmp_path):
    tok = train_tokenizer([corpus], 280, tmp_path / "a.json", ["<|endoftext|>"])
    assert tok.get_vocab_size() == 280
    assert tok.token_to_id("<|endoftext|>") == 0
    for text in ["the cat sat on the log .", "unseen wörds ✓ 😀", "a  double  space"]:
        assert tok.decode(tok.encode(text).ids) == text  # byte-level: any string round-trips
    assert len(tok.encode("the cat sat").ids) < len("the cat sat")  # merges were learned
    train_tokenizer([corpus], 280, tmp_path / "b.json", ["<|endoftext|>"])
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert tokenizer_sha256(tmp_path / "a.json") == hashlib.sha256((tmp_path / "a.json").read_bytes()).hexdigest()
    assert load_tokenizer(tmp_path / "a.json").get_vocab_size() == 280


def test_cli_train_and_force(corpus, tmp_path, capsys):
    out = tmp_path / "tok.json"
    assert main(["tokenizer", "train", str(corpus), "--vocab-size", "270", "-o", str(out)]) == 0
    assert "sha256 " + tokenizer_sha256(out) in capsys.readouterr().out
    assert main(["tokenizer", "train", str(corpus), "--vocab-size", "270", "-o", str(out)]) == 1
    assert "--force" in capsys.readouterr().err
    assert main(["tokenizer", "train", str(corpus), "--vocab-size", "275", "-o", str(out), "--force"]) == 0
    assert load_tokenizer(out).get_vocab_size() == 275


def test_bad_corpora_and_files(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text(" \n\n  \n")
    with pytest.raises(ValueError, match="empty"):
        train_tokenizer([empty], 300, tmp_path / "t.json")
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"fine line\n\xff\xfe\x00\x81 bytes\n")
    with pytest.raises(ValueError, match=r"garbage.bin:2: not valid UTF-8"):
        train_tokenizer([garbage], 300, tmp_path / "t.json")
    with pytest.raises(ValueError, match="not found"):
        train_tokenizer([tmp_path / "missing.txt"], 300, tmp_path / "t.json")
    with pytest.raises(ValueError, match="too small"):
        train_tokenizer([garbage], 100, tmp_path / "t.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"model": 3')
    with pytest.raises(ValueError, match="not a valid tokenizer.json"):
        load_tokenizer(bad)
