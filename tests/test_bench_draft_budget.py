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


@pytest.mark.parametrize("arguments", [["--heads", "some/heads"], ["--copy-tokens"], ["--nodes"]])
def test_a_partial_or_foreign_table_needs_its_own_output(arguments):
    shipped = ROOT / "lm_models" / "smollm2" / "draft_budget.json"
    before = shipped.read_bytes()
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "draft_budget.py"), *arguments],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 2
    assert "name the output (-o), not the shipped table" in run.stderr
    assert shipped.read_bytes() == before
