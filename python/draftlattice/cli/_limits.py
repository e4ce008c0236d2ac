"""`--max-decompressed-bytes`: the decompression bound (draftlattice._compressed) as a CLI option."""

from __future__ import annotations

import argparse

from .._compressed import DEFAULT_MAX_DECOMPRESSED_BYTES

_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def _byte_count(text: str) -> int:
    """'1000', '64M', '16G' (binary units) -> bytes."""
    unit = _UNITS.get(text[-1:].upper(), 1)
    digits = text[:-1] if unit > 1 else text
    if not digits.isdigit() or int(digits) == 0:
        raise argparse.ArgumentTypeError(
            f"--max-decompressed-bytes takes a positive byte count such as 1000000, 512M or 16G, got {text!r}"
        )
    return int(digits) * unit


def add_decompression_limit(parser: argparse.ArgumentParser, what: str) -> None:
    """Adds --max-decompressed-bytes (dest max_decompressed_bytes) for the .gz/.xz inputs `what`."""
    parser.add_argument(
        "--max-decompressed-bytes",
        type=_byte_count,
        default=DEFAULT_MAX_DECOMPRESSED_BYTES,
        metavar="BYTES",
        help=f"refuse a compressed {what} that decompresses to more than BYTES (K/M/G/T suffixes; "
        "default 16G): a guard against decompression bombs",
    )
