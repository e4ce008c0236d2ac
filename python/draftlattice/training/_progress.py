"""How long-running training work reports its pace in log lines: durations, and a rate over the
recent past for the ETA."""

from __future__ import annotations

from collections import deque


def duration(seconds: float) -> str:
    """``"4m05s"``, or ``"1h02m"`` from an hour on."""
    seconds = int(seconds)
    return (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
    )


class RecentRate:
    """Work done per second over about the last ``window`` seconds (since the start until then).

    Why: a resumable job shares its machine (other jobs, a paused stretch), and its speed also
    changes with the work (a feature build runs its shortest records first); the average since
    the start keeps the past's pace in the ETA for hours, the recent rate follows the present.
    """

    def __init__(self, start_time: float, window: float = 600.0) -> None:
        self.window = window
        self._samples: deque[tuple[float, float]] = deque([(start_time, 0.0)])

    def update(self, now: float, done: float) -> float:
        """Records ``done`` units of work in all at ``now``; returns units per second over the
        window (the oldest sample kept is the last one at least ``window`` seconds old)."""
        self._samples.append((now, done))
        while len(self._samples) > 2 and now - self._samples[1][0] >= self.window:
            self._samples.popleft()
        then, before = self._samples[0]
        return (done - before) / max(now - then, 1e-9)
