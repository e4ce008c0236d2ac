"""bench/draft_budget.py writes the table fastest_drafting reads: a run with other heads, or without
the copy rows, must name its own output instead of replacing the shipped table (checked before the
model loads, so this runs without it). The script runs with this interpreter and environment: the
installed package, or the source tree where PYTHONPATH names it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--heads", "some/heads"], "name the output (-o), not the shipped table"),
        (["--copy-tokens"], "name the output (-o), not the shipped table"),
        (["--nodes"], "name the output (-o), not the shipped table"),
        (["--temperature", "0"], "--temperature must be > 0, got 0.0"),
        (["--temperature", "0.7", "-0.5"], "--temperature must be > 0, got -0.5"),
        (["--temperature", "0.7", "--seeds", "0"], "--seeds must be >= 1, got 0"),
        (["--temperature", "0.7", "--nodes"], "--temperature measures the tree of best prefixes: give --nodes"),
    ],
)
def test_a_partial_or_foreign_table_needs_its_own_output(arguments, message):
    shipped = ROOT / "lm_models" / "smollm2" / "draft_budget.json"
    before = shipped.read_bytes()
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "draft_budget.py"), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 2
    assert message in run.stderr
    assert shipped.read_bytes() == before
