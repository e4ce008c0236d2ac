"""Issue 27 item 1: ARPA text is parsed as a stream of bounded lines, plain or compressed.

A compressed ARPA file used to be decompressed whole before parsing: 1.5 GB of NUL bytes,
gzipped, peaked at 1.46 GB before it was refused. Now the C++ reader pulls blocks from the bounded
decompressor and refuses a line over 16 MiB, so the peak stays near the interpreter's own. Peak
memory is measured in a child process (its ru_maxrss), beside a child that loads a tiny model.
"""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

import draftlattice as dl
from arpa_writer import random_arpa
from draftlattice import _core

MAX_LINE = 1 << 24  # kMaxArpaLineBytes

CHILD = r"""
import json, resource, sys
import draftlattice
try:
    draftlattice.NgramLM(sys.argv[1])
    outcome = "loaded"
except Exception as error:
    outcome = type(error).__name__ + ": " + str(error)
print(json.dumps({"outcome": outcome, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _load_in_child(path: Path) -> dict:
    # The child imports the draftlattice this process imported (installed, editable or in place).
    package_root = str(Path(dl.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_root, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], env=env, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _gzip_blocks(path: Path, blocks) -> None:
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)  # gzip framing
    with open(path, "wb") as out:
        for block in blocks:
            out.write(packer.compress(block))
        out.write(packer.flush())


@pytest.fixture(scope="module")
def reference_peak(tmp_path_factory) -> float:
    arpa = tmp_path_factory.mktemp("ref") / "tiny.arpa"
    random_arpa(arpa, 2, 0)
    result = _load_in_child(arpa)
    assert result["outcome"] == "loaded"
    return result["peak_mib"]


def test_nul_bomb_is_refused_at_the_line_bound_in_bounded_memory(tmp_path, reference_peak):
    # 256 MiB of NUL bytes in 256 KiB of gzip, under the default 16 GiB limit: only the line
    # bound stops it. Read whole, it would take 256 MiB or more.
    bomb = tmp_path / "nul.arpa.gz"
    _gzip_blocks(bomb, (bytes(1 << 24) for _ in range(16)))
    result = _load_in_child(bomb)
    assert (
        result["outcome"]
        == f"FormatError: {bomb}:1: line is longer than {MAX_LINE} bytes (not a text file of this format?)"
    )
    assert result["peak_mib"] - reference_peak < 96, result


def test_a_lying_header_in_a_stream_costs_no_memory(tmp_path, reference_peak):
    # A stream's size is unknown, so its header's counts cannot be checked up front: 4 billion
    # 1-grams claimed, 3 given. The tables must not be sized from the claim.
    path = tmp_path / "lying.arpa.xz"
    text = "\\data\\\nngram 1=4000000000\nngram 2=4000000000\n\n\\1-grams:\n-1 <s>\n-1 a\n-1 </s>\n\n"
    path.write_bytes(lzma.compress(text.encode()))
    result = _load_in_child(path)
    assert result["outcome"].startswith(
        f"FormatError: {path}:9: section \\1-grams: has 3 entries but the header says 4000000000"
    )
    assert result["peak_mib"] - reference_peak < 64, result


def test_long_lines_in_plain_files_are_refused_too(tmp_path):
    path = tmp_path / "long.arpa"
    path.write_bytes(b"# comment\n" + b"x" * (MAX_LINE + 1) + b"\n\\data\\\n")
    with pytest.raises(dl.FormatError, match=rf"{path}:2: line is longer than {MAX_LINE} bytes"):
        dl.NgramLM(path)


class _Trickle(io.RawIOBase):
    """A stream that hands out at most `step` bytes per read: lines cross every block boundary."""

    def __init__(self, data: bytes, step: int) -> None:
        super().__init__()
        self._data = memoryview(data)
        self._pos = 0
        self._step = step

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        got = min(len(buffer), self._step, len(self._data) - self._pos)
        buffer[:got] = self._data[self._pos : self._pos + got]
        self._pos += got
        return got


@pytest.mark.parametrize("step", [1, 3, 64])
def test_any_block_boundaries_give_the_same_model(tmp_path, step):
    arpa = tmp_path / "m.arpa"
    random_arpa(arpa, 3, 7, n_words=9, consistent=False, with_unk=True)
    text = arpa.read_bytes().replace(b"\n", b"\r\n")  # CRLF as well
    text = text.rstrip(b"\r\n")  # the last line without its newline
    plain = tmp_path / "crlf.arpa"
    plain.write_bytes(text)
    expected = dl.NgramLM(plain)
    expected.save(tmp_path / "expected.dlm")
    streamed = _core.NgramLM(_Trickle(text, step), "trickle", None, -1000.0)
    assert streamed.counts == expected.counts
    streamed.save(str(tmp_path / "streamed.dlm"), False)
    assert (tmp_path / "streamed.dlm").read_bytes() == (tmp_path / "expected.dlm").read_bytes()


@pytest.mark.parametrize("compress", [gzip.compress, bz2.compress, lzma.compress])
def test_compressed_arpa_equals_plain(tmp_path, compress):
    arpa = tmp_path / "m.arpa"
    random_arpa(arpa, 3, 11, with_unk=True)
    packed = tmp_path / "m.packed"  # recognised by content, not by name
    packed.write_bytes(compress(arpa.read_bytes()))
    plain, streamed = dl.NgramLM(arpa), dl.NgramLM(packed)
    assert streamed.file_format == dl.ngram.detect_format(packed) != "arpa"
    plain.save(tmp_path / "plain.dlm")
    streamed.save(tmp_path / "streamed.dlm")
    assert (tmp_path / "plain.dlm").read_bytes() == (tmp_path / "streamed.dlm").read_bytes()


def test_an_error_inside_the_stream_propagates_unchanged(tmp_path):
    class Broken(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:
            raise dl.FormatError("broken.gz: cannot decompress gz: invalid block type")

    with pytest.raises(dl.FormatError, match="^broken.gz: cannot decompress gz: invalid block type$"):
        _core.NgramLM(Broken(), "broken", None, -1000.0)
