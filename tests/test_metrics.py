"""Each statistic on small hand-made inputs with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from draftlattice.evaluate import metrics
from draftlattice.evaluate.adaptive import hull_value, upper_hull
from draftlattice.evaluate.analyses import compare_drafters, split_prompts
from draftlattice.evaluate.drafting import Oracle, TraceView, Vanilla
from draftlattice.evaluate.replay import replay
from draftlattice.evaluate.trace import Trace


def test_repetition_known_values():
    drafts = np.array([[5, 5, 5, 1], [1, 2, 3, 4], [7, 7, 2, 2]])
    # neighbouring pairs: 3 per draft, identical: 2 + 0 + 2 = 4 of 9
    r = metrics.repetition(drafts)
    assert r["repeated_pct"] == pytest.approx(400 / 9)
    assert r["mean_max_run"] == pytest.approx((3 + 1 + 2) / 3)
    assert metrics.has_repetition(drafts).tolist() == [True, False, True]
    assert metrics.max_runs(np.zeros((2, 0), int)).tolist() == [0, 0]


def test_wins_ties_losses_and_repairs():
    w = metrics.wins_ties_losses([0, 1, 2, 3], [1, 1, 0, 3])
    assert (w["wins_pct"], w["ties_pct"], w["losses_pct"]) == (25.0, 50.0, 25.0)
    a = np.array([[1, 1, 2], [3, 4, 5], [6, 6, 6], [1, 2, 3]])
    b = np.array([[1, 2, 2], [3, 4, 5], [6, 7, 8], [1, 1, 3]])
    r = metrics.repairs(a, b)
    # A repeats in drafts 0 and 2; B repairs 2 (draft 0 still repeats 2 2) -> 50 %.
    # A is clean in 1 and 3; B introduces one in 3 -> 50 %.
    assert r["repaired_pct"] == 50.0 and r["introduced_pct"] == 50.0
    with pytest.raises(ValueError):
        metrics.wins_ties_losses([], [])


def tiny_trace() -> Trace:
    """h = 3, K = 2, one prompt, T = 4. y = 0 1 2 3."""
    y = np.array([0, 1, 2, 3], np.int32)
    ids = np.array(
        [
            [[0, 9], [1, 8], [5, 2]],  # head 2 right (top-1), head 3 right at rank 1
            [[1, 9], [5, 2], [5, 5 + 1]],  # head 2 wrong (y2 = 2 at rank 1), head 3 wrong
            [[2, 9], [3, 8], [5, 6]],
            [[3, 9], [4, 8], [5, 6]],
        ],
        np.int32,
    )
    lps = np.tile(np.array([-0.5, -1.0], np.float32), (4, 3, 1))
    ent = np.array([[0.1, 0.5, 2.0]] * 4, np.float32)
    return Trace([np.array([7], np.int32)], [y], [ids], [lps], [ent], 10)


def test_head_entropy_accuracy_and_h_max():
    trace = tiny_trace()
    np.testing.assert_allclose(metrics.head_entropy(trace), [0.1, 0.5, 2.0])
    # head 1: always right (4/4). head 2 at t=0..2 predicts y1..y3: 1 ok, 5 no, 3 ok -> 2/3.
    # head 3 at t=0..1 predicts y2, y3: 5, 5 -> 0/2.
    np.testing.assert_allclose(metrics.head_accuracy(trace), [1.0, 2 / 3, 0.0])
    assert metrics.h_max_entropy([0.1, 0.5, 2.0], 1.0) == 2
    assert metrics.h_max_entropy([0.1, 3.0, 0.5], 1.0) == 1  # heads must be good from the start
    assert metrics.h_max_accuracy([1.0, 2 / 3, 0.0], 0.5) == 2
    assert metrics.h_max_entropy([5.0], 1.0) == 1  # head 1 always counts


def test_oracle_curve_and_position_comparison():
    view = TraceView(tiny_trace())
    # T = 4: n=0, g=2. vanilla (1, 5) vs y (1, 2): a=1 -> commit 2, n=2: g=0 -> commit 1, n=3 last.
    # calls: prefill + 2 = 3 -> 4/3. oracle k=2: (1, 2) both in top-2 -> commit 3, n=3 -> 4/2.
    oracle = {k: replay(view, Oracle(k), progress=False).block_efficiency for k in (1, 2)}
    assert oracle == {1: pytest.approx(4 / 3), 2: 2.0}
    comparison = compare_drafters(view, Vanilla(), Oracle(2), progress=False)
    # full-block positions: n = 0, 1 (n + 2 < 4). vanilla accepts 1 at n=0, 0 at n=1;
    # oracle accepts 2 at n=0, 1 at n=1 (y2 = 2 at rank 1 of head 2, y3 not in head 3's top-2).
    assert comparison["wins_pct"] == 100.0 and comparison["mean_accepted_other"] == 1.5
    assert comparison["repetition_base"]["repeated_pct"] == 50.0  # (5, 5) at n = 1


def test_split_and_hull():
    assert split_prompts(8, 0.25) == ([0, 1], [2, 3, 4, 5, 6, 7])
    with pytest.raises(ValueError):
        split_prompts(1, 0.5)
    hull = upper_hull([(1, 2.0), (2, 2.1), (4, 3.0), (8, 2.9), (16, 3.2)])
    assert hull == [(1, 2.0), (4, 3.0), (16, 3.2)]  # (2, 2.1) under the chord, (8, 2.9) dominated
    assert hull_value(hull, 2.5) == pytest.approx(2.5)
