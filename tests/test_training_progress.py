"""The pace reported by long training work (draftlattice.training._progress)."""

from __future__ import annotations

import pytest

from draftlattice.training._progress import RecentRate, duration


def test_durations_read_as_minutes_then_hours():
    assert duration(245) == "4m05s" and duration(3720) == "1h02m" and duration(0) == "0m00s"


def test_the_recent_rate_follows_a_change_of_pace():
    rate = RecentRate(0.0, window=100.0)
    assert rate.update(50.0, 500.0) == pytest.approx(10.0)  # the start is inside the window
    for t in range(60, 400, 10):  # then 1 unit a second (the machine got busy)
        done = 500.0 + (t - 50)
        latest = rate.update(float(t), done)
    assert latest == pytest.approx(1.0)  # the average since the start would read ~2.3
    assert rate.update(400.0, done) < 1.0  # a stalled stretch lowers it at once
