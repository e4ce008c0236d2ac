"""Token strings made readable for the lattice and draft views.

Tokens arrive as the tokenizer decodes them (a byte-level BPE piece such as ``" the"``, or
``"\\ufffd"`` for an incomplete UTF-8 sequence). In a table cell leading spaces, newlines and
tabs would be invisible, so :func:`visible` shows space as ``·``, newline as ``↵``, tab as ``⇥``,
carriage return as ``␍``, no-break space as ``⍽``, other control characters as ``\\xNN`` / ``\\uNNNN`` and the empty
string as ``∅``. The running text keeps the real characters. HTML escaping is a separate step
(the page escapes every string it writes).
"""

from __future__ import annotations

import unicodedata

_MARKS = {" ": "·", "\n": "↵", "\t": "⇥", "\r": "␍"}
EMPTY = "∅"


def visible(token: str) -> str:
    """``token`` with whitespace and control characters made visible (see the module docstring)."""
    if not token:
        return EMPTY
    return "".join(_MARKS.get(ch) or _escape_control(ch) for ch in token)


def _escape_control(ch: str) -> str:
    if ch == "\u00a0":
        return "⍽"  # no-break space
    if unicodedata.category(ch) not in ("Cc", "Cf", "Zl", "Zp", "Zs"):
        return ch
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
