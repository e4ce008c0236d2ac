"""Writing the estimated levels as one ARPA file, streamed from sorted partitions.

Each order's rows arrive range-partitioned and sorted by key (partition.py), i.e. by their word
ids, numbered by first appearance: the C++ writer's line order (csrc/train/arpa_writer.cc).
Partitions are pulled to the driver one at a time (``toLocalIterator``), so the driver holds
one partition, never the table. Numbers are formatted as the C++ writer formats them
(``%.*g`` of ln x / ln 10), so equal estimates give byte-identical files.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from .._files import give_usual_permissions
from .keys import unpack

__all__ = ["write_arpa_atomically"]

_TO_LOG10 = 1.0 / math.log(10.0)


def _write_levels(
    file,
    levels: dict[int, object],
    counts: list[int],
    spellings: list[str],
    digits: int,
    metadata: list[tuple[str, str]],
    progress: Callable[[int], None],
) -> None:
    for key, value in metadata:
        file.write(f"# {key}: {value}\n")
    file.write("\n\\data\\\n")
    for k, count in enumerate(counts, start=1):
        file.write(f"ngram {k}={count}\n")
    spec = f".{digits}g"  # C's %.*g, as the C++ writer
    for k in range(1, len(counts) + 1):
        file.write(f"\n\\{k}-grams:\n")
        lines = []
        for key, (p, backoff) in levels[k].toLocalIterator():
            number = "-99" if k == 1 and key == 0 else format(math.log(p) * _TO_LOG10, spec)
            words = " ".join(spellings[w] for w in unpack(key, k))
            if backoff is None:
                lines.append(f"{number}\t{words}\n")
            else:
                lines.append(f"{number}\t{words}\t{format(backoff * _TO_LOG10, spec)}\n")
            if len(lines) >= 65536:
                file.writelines(lines)
                progress(len(lines))
                lines = []
        file.writelines(lines)
        progress(len(lines))
    file.write("\n\\end\\\n")


def write_arpa_atomically(
    out: Path,
    levels: dict[int, object],
    counts: list[int],
    spellings: list[str],
    digits: int,
    metadata: list[tuple[str, str]],
    progress: Callable[[int], None] = lambda n: None,
) -> Path:
    """Writes ``levels`` ({k: RDD of (key, (p, ln alpha or None)) in key order}) as ARPA to a
    temporary file next to ``out`` and returns its path (the caller renames or converts it)."""
    if not 1 <= digits <= 17:
        raise ValueError(f"ARPA digits must be in 1..17, got {digits}")
    fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".arpa.tmp", dir=out.parent)
    give_usual_permissions(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n", buffering=1 << 22) as file:
            _write_levels(file, levels, counts, spellings, digits, metadata, progress)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return Path(name)
