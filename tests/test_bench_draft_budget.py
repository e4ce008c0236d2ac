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
        (["--tree-copy-tokens", "3", "0"], "--tree-copy-tokens must be >= 1, got 0"),
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


def test_the_trees_copies_are_the_copy_alones_fastest_length_and_the_default_unless_given():
    """The tree's options are measured beside two copies: the copy alone's fastest length here
    (short where extra nodes cost, long where they are nearly free; options with a retrieval
    branch, which the tree has not, left out) and the library's; --tree-copy-tokens names others.
    The sampled entries take the greedy options' copies."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from draft_budget import greedy_tree_copies, tree_copy_tokens
        from draftlattice.decode.drafters.lookup import LOOKUP_TOKENS
        from draftlattice.lean.fit import CostCurve
    finally:
        sys.path.remove(str(ROOT / "bench"))

    class Args:
        tree_copy_tokens = None

    copies = [
        {"copy_tokens": 2, "retrieval": 0, "tokens_per_call": 1.5, "nodes": 2.5, "host_ms": 0.3},
        {"copy_tokens": 8, "retrieval": 0, "tokens_per_call": 1.8, "nodes": 7.0, "host_ms": 0.4},
        {"copy_tokens": 4, "retrieval": 3, "tokens_per_call": 3.0, "nodes": 3.0, "host_ms": 0.3},
    ]
    steep = CostCurve((1, 8), (4.0, 12.0))
    flat = CostCurve((1, 8), (4.0, 4.2))
    assert tree_copy_tokens(Args, steep, copies) == [2, LOOKUP_TOKENS]
    assert tree_copy_tokens(Args, flat, copies) == [8, LOOKUP_TOKENS]
    assert tree_copy_tokens(Args, flat, []) == [LOOKUP_TOKENS]
    Args.tree_copy_tokens = [5, 3, 5]
    assert tree_copy_tokens(Args, steep, copies) == [5, 3]
    table = {"settings": {"copy_tokens": 6}, "node_options": [{"copy_tokens": 2}, {"copy_tokens": 2}, {}]}
    assert greedy_tree_copies(table) == [2, 6]
    assert greedy_tree_copies({"settings": {"copy_tokens": 6}}) == [6]
