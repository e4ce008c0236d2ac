"""bench/soak.py's report: the RSS slope is measured after the warm-up, which ends once every
setting of the soak's cycle has run (not after a share of the steps). The soak itself runs for
an hour on the default model; these are its pure functions on made-up samples."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

SOAK = Path(__file__).resolve().parents[1] / "bench" / "soak.py"


@pytest.fixture(scope="module")
def soak():
    """bench/soak.py as a module (bench/ is scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("bench_soak", SOAK)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def record(calls: int, steps: int, rss_mb: float) -> dict:
    """One sample as soak.sample() takes it (fds, threads and memos constant)."""
    memos = {"live": 0, "created": calls, "most_alive": 1}
    return {
        "seconds": steps / 10,
        "steps": steps,
        "calls": calls,
        "rss_mb": rss_mb,
        "fds": 5,
        "threads_python": 1,
        "threads_os": 7,
        "memos": memos,
    }


def run_samples(settings: int, calls: int, steps_per_call: int, growth_mb: float, leak_mb_per_step: float):
    """A sample after every call: each setting's first call grows RSS by ``growth_mb`` once (new
    shapes), and RSS also grows by ``leak_mb_per_step`` per step throughout."""
    samples = [record(0, 0, 800.0)]
    for n in range(1, calls + 1):
        steps = n * steps_per_call
        samples.append(record(n, steps, 800.0 + growth_mb * min(n, settings) + leak_mb_per_step * steps))
    return samples


def test_every_setting_of_the_cycle_is_distinct_so_one_pass_runs_each(soak):
    labels = [setting.label for setting in soak.call_settings()]
    assert len(labels) == 22
    assert len(set(labels)) == len(labels), "two settings share a label: steps_per_setting would merge them"


def test_warm_up_ends_once_every_setting_has_run(soak):
    samples = run_samples(settings=22, calls=60, steps_per_call=30, growth_mb=8.0, leak_mb_per_step=0.0)
    after = soak.after_warmup(samples, 22)
    assert [s["calls"] for s in after] == list(range(22, 61))
    assert soak.after_warmup(samples, 0) == samples


def test_the_slope_after_the_first_pass_is_the_leak_alone(soak):
    """One-off growth during the first pass (8 MB per setting) and a leak of 2 MB per 1,000
    steps: the slope after the pass is the leak; a 10% cut (the old rule, 180 steps) falls inside
    the first pass and reports mostly the one-off growth."""
    samples = run_samples(settings=22, calls=60, steps_per_call=30, growth_mb=8.0, leak_mb_per_step=0.002)
    summary = soak.summarize(samples, 22)
    assert summary["warmup_calls"] == 22
    assert summary["warmup_steps"] == 22 * 30
    assert summary["samples_after_warmup"] == 60 - 22 + 1
    assert summary["rss_slope_mb_per_1000_steps"] == pytest.approx(2.0)
    assert summary["rss_slope_mb_per_hour"] == pytest.approx(2.0 / 1000 * 36000)  # 10 steps a second
    assert summary["rss_after_warmup_first_mb"] == pytest.approx(800 + 8 * 22 + 0.002 * 660)
    assert summary["rss_start_mb"] == 800.0
    assert summary["fds"] == [5, 5]

    share = [s for s in samples if s["steps"] >= 0.1 * samples[-1]["steps"]]
    old = 1000 * soak.slope([s["steps"] for s in share], [s["rss_mb"] for s in share])
    assert old > 10 * summary["rss_slope_mb_per_1000_steps"]
    assert "slope +2.000 MB per 1,000 steps" in soak.rss_line(summary)


def test_a_run_that_ends_in_its_warm_up_reports_no_slope(soak):
    samples = run_samples(settings=22, calls=22, steps_per_call=30, growth_mb=8.0, leak_mb_per_step=0.0)
    summary = soak.summarize(samples, 22)
    assert summary["samples_after_warmup"] == 1
    assert math.isnan(summary["rss_slope_mb_per_1000_steps"])
    assert soak.rss_line(summary).startswith("RSS after warm-up: no slope, 1 samples after the first 22 calls")

    summary = soak.summarize(samples[:5], 22)
    assert summary["samples_after_warmup"] == 0
    assert summary["warmup_steps"] is None
    assert "no slope, 0 samples" in soak.rss_line(summary)
