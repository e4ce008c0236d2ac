"""What a file is, from its first bytes: for error messages that say "X is a Y, expected a Z".

Used where a command opens a file of a fixed kind, so that an ARPA given as a trace, a model
folder given as an LM or a trace given as a model fails with one line naming both kinds, not a
parser's traceback.
"""

from __future__ import annotations

import os
from pathlib import Path

# (magic prefix, description), longest first where prefixes overlap.
_MAGICS = (
    (b"DLNGRAM\0", "a draftlattice binary n-gram LM (.dlm)"),
    (b"DLTRACE\0", "a draftlattice decoding trace"),
    (b"\x1f\x8b", "a gzip-compressed file"),
    (b"\xfd7zXZ\x00", "an xz-compressed file"),
    (b"PK\x03\x04", "a zip archive (.npz, .pt, ...)"),
    (b"\x93NUMPY", "a NumPy array (.npy)"),
    (b"\x80\x02", "a Python pickle"),
)


def describe(path: str | os.PathLike) -> str:
    """A short phrase naming what ``path`` is ("a model folder", "an ARPA n-gram LM", ...)."""
    p = Path(path)
    if not p.exists():
        return "missing"
    if p.is_dir():
        if (p / "config.json").is_file():
            return "a model folder (config.json)"
        return "a folder"
    try:
        with open(p, "rb") as f:
            head = f.read(512)
    except OSError as error:
        return f"unreadable ({error.strerror})"
    if not head:
        return "an empty file"
    for magic, what in _MAGICS:
        if head.startswith(magic):
            return what
    if _is_safetensors(head):
        return "a safetensors weights file"
    text = head.lstrip()
    if text.startswith(b"\\data\\"):
        return "an ARPA n-gram LM"
    if text.startswith(b"{"):
        return "a JSON file"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.start < len(head) - 4:  # not just a multi-byte character cut at 512 bytes
            return "a binary file of unknown kind"
    return "a text file"


def _is_safetensors(head: bytes) -> bool:
    # 8-byte little-endian header length, then a JSON header.
    return len(head) > 9 and head[8:9] == b"{" and 0 < int.from_bytes(head[:8], "little") < 100_000_000


def expect_lm(path: str | os.PathLike) -> None:
    """ValueError unless ``path`` looks like an n-gram LM (.dlm, ARPA, compressed ARPA) or is missing."""
    expect(
        path,
        "an n-gram LM (.arpa[.gz|.xz] or .dlm)",
        ("a draftlattice binary n-gram LM", "an ARPA", "a gzip", "an xz", "a text file"),
    )


def expect_text(path: str | os.PathLike) -> None:
    """ValueError unless ``path`` is a non-empty UTF-8 text file (judged on its first bytes) or is missing."""
    expect(path, "a UTF-8 text file", ("a text file", "an ARPA", "a JSON"))


def expect(path: str | os.PathLike, wanted: str, accepted: tuple[str, ...]) -> None:
    """ValueError "PATH: is K, expected WANTED" unless ``describe(path)`` starts with one of ``accepted``.

    A missing path passes (the opener's own FileNotFoundError names it).
    """
    kind = describe(path)
    if kind != "missing" and not kind.startswith(accepted):
        raise ValueError(f"{os.fspath(path)}: is {kind}, expected {wanted}")
