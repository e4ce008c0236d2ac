"""Compressed inputs (.gz, .xz, .bz2) read as a stream, with a bound on the decompressed bytes.

A few kilobytes of gzip or xz can expand to gigabytes (a decompression bomb). Every compressed
input (ARPA files for ``NgramLM``, corpora for ``lm build``) is read through :func:`open_input`,
which decompresses block by block and raises :class:`FormatError` naming the file and the limit
as soon as more than ``max_decompressed_bytes`` come out, before they are kept anywhere. Readers
consume the stream line by line with a bound on the line length (the ARPA parser in C++, corpora
in ``ngram.build``), so neither holds more than a block and a line of text. The default,
:data:`DEFAULT_MAX_DECOMPRESSED_BYTES` (16 GiB), leaves room for large ARPA files and corpora;
pass a larger value (``--max-decompressed-bytes`` on the command line) for bigger genuine inputs.
Plain files are opened as they are: their size is known before reading.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import zlib
from typing import IO

from ._core import FormatError

DEFAULT_MAX_DECOMPRESSED_BYTES = 16 << 30
_READ_BLOCK = 1 << 20
_OPENERS = {"gz": gzip.open, "xz": lzma.open, "bz2": bz2.open}
# What the decompressors raise on corrupt or truncated input.
_DECOMPRESS_ERRORS = (lzma.LZMAError, zlib.error, EOFError, OSError)


def compression_of_name(path: str | os.PathLike[str]) -> str | None:
    """'gz', 'xz', 'bz2' from the file name's suffix (corpora are named so), else None."""
    name = os.fspath(path).lower()
    for suffix in _OPENERS:
        if name.endswith("." + suffix):
            return suffix
    return None


def check_limit(max_decompressed_bytes: int) -> int:
    """The limit as an int; ValueError unless it is a positive integer."""
    if isinstance(max_decompressed_bytes, bool) or not isinstance(max_decompressed_bytes, int):
        raise ValueError(f"max_decompressed_bytes must be an integer, got {max_decompressed_bytes!r}")
    if max_decompressed_bytes < 1:
        raise ValueError(f"max_decompressed_bytes must be positive, got {max_decompressed_bytes}")
    return max_decompressed_bytes


class _Bounded(io.RawIOBase):
    """A decompressing reader that fails once more than `limit` bytes have come out."""

    def __init__(self, inner: IO[bytes], path: str, compression: str, limit: int) -> None:
        super().__init__()
        self._inner = inner
        self._path = path
        self._compression = compression
        self._limit = limit
        self._total = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        # Never ask for more than one byte past the limit, so a bomb stops right there.
        want = min(len(buffer), self._limit - self._total + 1)
        try:
            got = self._inner.readinto(memoryview(buffer)[:want])
        except _DECOMPRESS_ERRORS as error:
            raise FormatError(f"{self._path}: cannot decompress {self._compression}: {error}") from None
        self._total += got
        if self._total > self._limit:
            raise FormatError(
                f"{self._path}: decompresses to more than max_decompressed_bytes={self._limit} bytes "
                "(a decompression bomb, or a genuine input larger than the limit: raise it with "
                "max_decompressed_bytes= / --max-decompressed-bytes)"
            )
        return got

    def close(self) -> None:
        if not self.closed:
            self._inner.close()
        super().close()


def open_input(
    path: str | os.PathLike[str],
    compression: str | None,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> IO[bytes]:
    """A buffered binary reader of ``path``, decompressed (``compression``: 'gz', 'xz', 'bz2' or
    None for a plain file) with at most ``max_decompressed_bytes`` coming out.

    Raises OSError when the file cannot be opened; reading raises FormatError for corrupt
    compressed data or output beyond the limit.
    """
    limit = check_limit(max_decompressed_bytes)
    if compression is None:
        return open(path, "rb")
    inner = _OPENERS[compression](path, "rb")
    return io.BufferedReader(_Bounded(inner, os.fspath(path), compression, limit), _READ_BLOCK)
