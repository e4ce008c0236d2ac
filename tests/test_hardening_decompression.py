"""Issue 15 item 7: compressed inputs are decompressed as a stream with a bound on their size.

The bombs are made here: megabytes of one repeated byte pattern compress to a few kilobytes; a
low ``max_decompressed_bytes`` must stop them with a FormatError naming the file and the limit,
having held no more than about one read block in memory."""

from __future__ import annotations

import bz2
import gzip
import lzma
import tracemalloc

import pytest

import draftlattice as dl
from arpa_writer import random_arpa
from draftlattice._compressed import DEFAULT_MAX_DECOMPRESSED_BYTES, open_input
from draftlattice.cli.main import main
from draftlattice.ngram import build as build_module
from draftlattice.ngram.build import build_lm
from lm_helpers import KATZ_REF

_COMPRESS = {"gz": gzip.compress, "xz": lambda data: lzma.compress(data, preset=1), "bz2": bz2.compress}
_LIMIT = 1 << 20


def _bomb(tmp_path, name, compression, pattern=b"the\n", megabytes=8):
    data = pattern * ((megabytes << 20) // len(pattern))
    path = tmp_path / f"{name}.{compression}"
    path.write_bytes(_COMPRESS[compression](data))
    assert path.stat().st_size * 400 < len(data)  # kilobytes that expand to megabytes
    return path


@pytest.mark.parametrize("compression", ["gz", "xz"])
def test_arpa_bomb_stops_at_the_limit_without_holding_it(tmp_path, compression):
    # An ARPA header followed by megabytes of comment lines: valid-looking, and a bomb.
    path = _bomb(tmp_path, "bomb.arpa", compression, pattern=b"# padding\n", megabytes=64)
    tracemalloc.start()
    try:
        with pytest.raises(dl.FormatError) as error:
            dl.NgramLM(path, max_decompressed_bytes=_LIMIT)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(path) in str(error.value) and f"max_decompressed_bytes={_LIMIT}" in str(error.value)
    # Streamed: the limit, a read block and the decompressor's own state (zlib's buffers, xz's
    # dictionary) are traced, a few MiB in all; reading the bomb whole would take 64 MiB.
    assert peak < 2 * _LIMIT + (8 << 20)


@pytest.mark.parametrize("compression", ["gz", "xz", "bz2"])
def test_corpus_bomb_stops_at_the_limit(tmp_path, compression):
    path = _bomb(tmp_path, "bomb.txt", compression)
    with pytest.raises(dl.FormatError, match=f"max_decompressed_bytes={_LIMIT}") as error:
        build_lm(path, 2, out_path=tmp_path / "o.arpa", max_decompressed_bytes=_LIMIT)
    assert str(path) in str(error.value)
    assert not (tmp_path / "o.arpa").exists()


def test_the_limit_is_inclusive(tmp_path):
    arpa = tmp_path / "m.arpa"
    random_arpa(arpa, 2, 5, with_unk=True)
    text = arpa.read_bytes()
    packed = tmp_path / "m.arpa.gz"
    packed.write_bytes(gzip.compress(text))
    plain = dl.NgramLM(arpa)
    assert dl.NgramLM(packed, max_decompressed_bytes=len(text)).counts == plain.counts
    with pytest.raises(dl.FormatError, match=f"more than max_decompressed_bytes={len(text) - 1} "):
        dl.NgramLM(packed, max_decompressed_bytes=len(text) - 1)
    with open_input(packed, "gz", len(text)) as stream:
        assert stream.read() == text


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "16G"])
def test_the_limit_must_be_a_positive_int(tmp_path, bad):
    arpa = tmp_path / "m.arpa"
    random_arpa(arpa, 2, 1)
    with pytest.raises(ValueError, match="max_decompressed_bytes"):
        dl.NgramLM(arpa, max_decompressed_bytes=bad)
    with pytest.raises(ValueError, match="max_decompressed_bytes"):
        build_lm(KATZ_REF / "corpus.txt", 2, out_path=tmp_path / "o.arpa", max_decompressed_bytes=bad)


def test_default_limit_is_documented_value():
    assert DEFAULT_MAX_DECOMPRESSED_BYTES == 16 << 30


def test_cli_reports_the_bomb_in_one_line(tmp_path, capsys):
    corpus = _bomb(tmp_path, "bomb.txt", "gz")
    assert (
        main(
            [
                "lm",
                "build",
                str(corpus),
                "--order",
                "2",
                "-o",
                str(tmp_path / "o.dlm"),
                "--max-decompressed-bytes",
                "1M",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(corpus) in err and "max_decompressed_bytes=1048576" in err
    arpa = _bomb(tmp_path, "bomb.arpa", "xz", pattern=b"# padding\n")
    for command in (["lm", "info", str(arpa)], ["lm", "compile", str(arpa), "-o", str(tmp_path / "x.dlm")]):
        assert main([*command, "--max-decompressed-bytes", "512K"]) == 1
        err = capsys.readouterr().err.strip()
        assert str(arpa) in err and "max_decompressed_bytes=524288" in err
    with pytest.raises(SystemExit):
        main(["lm", "info", str(arpa), "--max-decompressed-bytes", "0"])
    assert "positive byte count" in capsys.readouterr().err


def test_corpus_line_longer_than_the_bound_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(build_module, "_MAX_LINE_BYTES", 100)
    monkeypatch.setattr(build_module, "_CHUNK_BYTES", 16)
    path = tmp_path / "c.txt"
    path.write_bytes(b"a b\nc d\n" + b"x" * 200 + b"\nlast\n")
    with pytest.raises(dl.FormatError, match=r"line 3 \(byte offset 8\) is longer than 100 bytes"):
        build_lm(path, 2, out_path=tmp_path / "o.arpa")


def test_a_long_line_that_ends_inside_a_block_is_refused_too(tmp_path, monkeypatch):
    # The bound is exact: a line over it is refused even when its newline arrives in the block
    # that completes it (the Spark engine reads line by line and must agree).
    monkeypatch.setattr(build_module, "_MAX_LINE_BYTES", 100)
    path = tmp_path / "c.txt"
    path.write_bytes(b"a b\n" + b"x" * 100 + b"\n" + b"y" * 101 + b"\nlast\n")
    with pytest.raises(dl.FormatError, match=r"line 3 \(byte offset 105\) is longer than 100 bytes"):
        build_lm(path, 2, out_path=tmp_path / "o.arpa")
    # The lines before it are checked first, as they are read.
    path.write_bytes(b"a b\n\xff\n" + b"y" * 101 + b"\n")
    with pytest.raises(dl.FormatError, match=r"line 2 \(byte offset 4\) is not valid UTF-8"):
        build_lm(path, 2, out_path=tmp_path / "o.arpa")


@pytest.mark.parametrize("chunk", [1, 7, 64])
def test_block_reading_counts_like_whole_lines(tmp_path, monkeypatch, chunk):
    # Blocks cut lines anywhere; the counts (and the written model) must not change.
    source = (KATZ_REF / "corpus.txt").read_bytes().rstrip(b"\n")  # last line without newline
    corpus = tmp_path / "c.txt.xz"
    corpus.write_bytes(lzma.compress(source))
    expected = build_lm(corpus, 3, out_path=tmp_path / "whole.arpa")
    monkeypatch.setattr(build_module, "_CHUNK_BYTES", chunk)
    got = build_lm(corpus, 3, out_path=tmp_path / "blocks.arpa")
    assert got.counts == expected.counts == [15, 36, 51]
    assert (tmp_path / "blocks.arpa").read_bytes() == (tmp_path / "whole.arpa").read_bytes()


def test_bad_utf8_position_survives_block_cuts(tmp_path, monkeypatch):
    monkeypatch.setattr(build_module, "_CHUNK_BYTES", 5)
    path = tmp_path / "c.txt.gz"
    path.write_bytes(gzip.compress(b"ab cd\nef gh\nij \xff kl\n"))
    with pytest.raises(dl.FormatError, match=r"line 3 \(byte offset 15\) is not valid UTF-8"):
        build_lm(path, 2, out_path=tmp_path / "o.arpa")


def test_corrupt_compressed_corpus_is_a_format_error(tmp_path):
    path = tmp_path / "c.txt.gz"
    path.write_bytes(gzip.compress(b"a b c\n" * 1000)[:-20])
    with pytest.raises(dl.FormatError, match="cannot decompress gz"):
        build_lm(path, 2, out_path=tmp_path / "o.arpa")
