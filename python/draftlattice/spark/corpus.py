"""Reading a corpus on the executors: files -> byte-range splits -> sentences of words.

The one-machine trainer (``draftlattice.ngram.build``) reads its files in the order given, one line
one sentence. To get the same model, and the same word ids (order of first appearance), every
sentence here carries its *position* ``(file index << 48) | byte offset of the line``: sorting by
it replays the one-machine reading order, whatever the partitioning.

Splits are planned on the driver from file sizes only (no data is read there). A plain file is
cut into byte ranges of ``split_bytes``; a split owns the lines that *start* inside its range
(Hadoop's rule), so no line is lost or read twice. A compressed file (``.xz``, ``.gz``,
``.bz2``) cannot be cut and is one split; its offsets are offsets into the decompressed stream.

Line semantics follow the one-machine trainer exactly: lines end at ``\\n`` only; whitespace mode
splits on ASCII whitespace and skips lines without words; tokenizer mode strips the line (Python
``str.strip``), skips it if empty and encodes it without special tokens, words being the decimal
token ids. A NUL byte, invalid UTF-8 or a line over the one-machine bound (64 MiB) fails the job
with the file, line and byte offset, and a compressed file with the file and the limit once it
decompresses to more than ``max_decompressed_bytes``: the one-machine trainer's messages.

The files must be readable at the same path on the driver and on every executor (a local
path in local mode; a shared filesystem such as NFS or a mounted bucket on a cluster).
"""

from __future__ import annotations

import glob
import lzma
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, NamedTuple

from .._compressed import DEFAULT_MAX_DECOMPRESSED_BYTES

__all__ = ["CorpusError", "Split", "expand_inputs", "plan_splits", "read_split", "sentence_words"]

_COMPRESSED = (".xz", ".gz", ".bz2")
_ENCODE_BATCH_LINES = 4096
FILE_SHIFT = 48  # position = (file index << FILE_SHIFT) | byte offset; files below 256 TiB
ERROR_TAG = "[draftlattice corpus error] "  # marks our messages inside Spark's task failures


class CorpusError(ValueError):
    """A corpus file is unreadable or not UTF-8 text, raised on an executor. The message is
    tagged so that the driver can re-raise it as OSError or FormatError (session.py)."""

    def __init__(self, message: str, kind: str = "FormatError") -> None:
        super().__init__(f"{ERROR_TAG}{kind}: {message}")


class Split(NamedTuple):
    """A byte range [start, end) of file number ``file_index``; end None = to the end."""

    file_index: int
    path: str
    start: int
    end: int | None


def expand_inputs(inputs: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Corpus files from paths, directories (their files, sorted by name) and glob patterns.

    The order is the order given (each directory or glob expanded in sorted order); it fixes
    the reading order, hence the word ids and the ARPA line order, as in the one-machine build.
    """
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    files: list[Path] = []
    for item in inputs:
        text = os.fspath(item)
        path = Path(text)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith((".", "_")))
            if not found:
                raise FileNotFoundError(f"corpus directory holds no files: {path}")
            files.extend(found)
        elif path.is_file():
            files.append(path)
        elif glob.has_magic(text):
            found = sorted(Path(p) for p in glob.glob(text) if Path(p).is_file())
            if not found:
                raise FileNotFoundError(f"no corpus files match {text!r}")
            files.extend(found)
        else:
            raise FileNotFoundError(f"corpus file not found: {path}")
    if not files:
        raise ValueError("no corpus files given")
    return files


def plan_splits(files: list[Path], split_bytes: int) -> list[Split]:
    """Byte-range splits of ``files`` (one per compressed file), in reading order."""
    if split_bytes < 1:
        raise ValueError(f"split_bytes must be >= 1, got {split_bytes}")
    splits: list[Split] = []
    for index, path in enumerate(files):
        absolute = str(path.resolve())
        size = path.stat().st_size
        if path.name.lower().endswith(_COMPRESSED) or size <= split_bytes:
            splits.append(Split(index, absolute, 0, None))
            continue
        for start in range(0, size, split_bytes):
            splits.append(Split(index, absolute, start, min(start + split_bytes, size)))
    return splits


def _open(path: str, max_decompressed_bytes: int) -> IO[bytes]:
    """The one-machine trainer's opener (.xz/.gz/.bz2 by suffix, the decompressed bytes bounded),
    so both engines read alike."""
    from ..ngram.build import _open_binary

    return _open_binary(Path(path), max_decompressed_bytes)


def _line_number(path: str, offset: int) -> int:
    """1-based number of the line holding byte ``offset`` (only computed for error messages; the
    bytes before it have been read once already, within the limit)."""
    lines = 1
    with _open(path, DEFAULT_MAX_DECOMPRESSED_BYTES) as file:
        remaining = offset
        while remaining > 0:
            block = file.read(min(remaining, 1 << 20))
            if not block:
                break
            lines += block.count(b"\n")
            remaining -= len(block)
    return lines


def _check_line(path: str, line: bytes, offset: int) -> str:
    """The decoded line; CorpusError (same wording as the one-machine build) on bad bytes."""
    nul = line.find(b"\x00")
    if nul >= 0:
        at = offset + nul
        raise CorpusError(
            f"{path}: line {_line_number(path, at)} (byte offset {at}) contains a NUL byte; "
            "this looks like a binary file, not a text corpus"
        )
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as error:
        at = offset + error.start
        raise CorpusError(
            f"{path}: line {_line_number(path, at)} (byte offset {at}) is not valid UTF-8 ({error.reason})"
        ) from None


def read_split(
    split: Split, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> Iterator[tuple[int, bytes, str]]:
    """(position, raw line, decoded line) for every line that starts inside ``split``.

    The one-machine reader's limits: a compressed file that decompresses to more than
    ``max_decompressed_bytes``, or a line longer than its bound (without the newline), is a
    CorpusError with the one-machine message; no line is read further than one byte past the bound.
    """
    from ..ngram import build as one_machine

    base = split.file_index << FILE_SHIFT
    longest = one_machine._MAX_LINE_BYTES
    try:
        file = _open(split.path, max_decompressed_bytes)
    except OSError as error:
        raise CorpusError(f"cannot read corpus {split.path}: {error.strerror or error}", "OSError") from None
    with file:
        offset = 0
        if split.start > 0:
            file.seek(split.start - 1)
            offset = split.start - 1
            while line := file.readline(longest + 1):  # finish the line owned by the split before
                offset += len(line)
                if line.endswith(b"\n"):
                    break
        while split.end is None or offset < split.end:
            try:
                line = file.readline(longest + 1)
            except (lzma.LZMAError, OSError, EOFError) as error:
                raise CorpusError(f"{split.path}: cannot decompress ({error})") from None
            except ValueError as error:  # the bounded decompressing reader's FormatError names the file
                raise CorpusError(str(error)) from None
            if not line:
                return
            if len(line) - line.endswith(b"\n") > longest:
                raise CorpusError(str(one_machine.line_too_long(split.path, _line_number(split.path, offset), offset)))
            yield base | offset, line, _check_line(split.path, line, offset)
            offset += len(line)


def sentence_words(
    lines: Iterator[tuple[int, bytes, str]], tokenizer_json: str | None
) -> Iterator[tuple[int, list[str]]]:
    """(position, words) per non-empty sentence of ``lines`` (see the module docstring)."""
    if tokenizer_json is None:
        for position, raw, _text in lines:
            words = raw.split()  # ASCII whitespace, as the C++ counter
            if words:
                yield position, [w.decode("utf-8") for w in words]
        return
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(tokenizer_json)
    batch: list[tuple[int, str]] = []
    for position, _raw, text in lines:
        stripped = text.strip()
        if stripped:
            batch.append((position, stripped))
        if len(batch) >= _ENCODE_BATCH_LINES:
            yield from _encode(tokenizer, batch)
            batch = []
    yield from _encode(tokenizer, batch)


def _encode(tokenizer, batch: list[tuple[int, str]]) -> Iterator[tuple[int, list[str]]]:
    if not batch:
        return
    encodings = tokenizer.encode_batch([text for _, text in batch], add_special_tokens=False)
    for (position, _), encoding in zip(batch, encodings):
        if encoding.ids:
            yield position, [str(token) for token in encoding.ids]
