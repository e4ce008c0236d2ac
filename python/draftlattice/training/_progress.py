"""How long-running training work writes durations in its log lines (ETA)."""

from __future__ import annotations


def duration(seconds: float) -> str:
    """``"4m05s"``, or ``"1h02m"`` from an hour on."""
    seconds = int(seconds)
    return (
        f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"
    )
