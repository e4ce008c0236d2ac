"""The analyses of Kim et al. 2024 on a trace: per-position draft comparisons, the oracle top-k
curve (Figure 6), the p-best curve (Figure 7), alpha tuning on held-out prompts (Appendix E).

Per-position analyses (Tables 3 and 5) draft at *every* position n of the greedy decode that has
a full block ahead (n + h - 1 < T), with context prompt + y[: n + 1], independent of where a
decoding run would have stopped: every position is compared under both drafters.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from . import metrics
from .drafting import NgramRescore, TraceView, accepted_length
from .replay import replay

logger = logging.getLogger(__name__)


@dataclass
class PositionDrafts:
    """Top draft [N, h-1] and accepted length [N] of one drafter at every full-block position."""

    drafts: np.ndarray
    accepted: np.ndarray


def full_block_steps(view: TraceView, prompts: Sequence[int] | None = None):
    g = view.h - 1
    order = range(len(view.trace)) if prompts is None else prompts
    return [(i, n, g) for i in order for n in range(len(view.trace.tokens[i]) - g)]


def position_drafts(
    view: TraceView, drafter, prompts=None, chunk: int = 8192, num_threads: int | None = None, progress: bool = True
) -> PositionDrafts:
    steps = full_block_steps(view, prompts)
    if view.h < 2 or not steps:
        raise ValueError("per-position analyses need h >= 2 heads and decodes longer than h tokens")
    tops, acc = [], []
    for start in tqdm(
        range(0, len(steps), chunk), desc=f"positions {drafter.name}", disable=None if progress else True, leave=False
    ):
        batch = steps[start : start + chunk]
        for (i, n, g), rows in zip(batch, drafter.draft(view, batch, num_threads)):
            rows = np.asarray(rows)
            tops.append(rows[0])
            acc.append(accepted_length(rows, view.reference(i, n, g)))
    return PositionDrafts(np.stack(tops), np.asarray(acc))


def compare_drafters(view: TraceView, base, other, prompts=None, num_threads=None, progress: bool = True) -> dict:
    """Table 3 (repetition of both) and Table 5 (wins/ties/losses, repaired/introduced) rows."""
    a = position_drafts(view, base, prompts, num_threads=num_threads, progress=progress)
    b = position_drafts(view, other, prompts, num_threads=num_threads, progress=progress)
    return {
        "base": base.name,
        "other": other.name,
        "repetition_base": metrics.repetition(a.drafts),
        "repetition_other": metrics.repetition(b.drafts),
        **metrics.wins_ties_losses(a.accepted, b.accepted),
        **metrics.repairs(a.drafts, b.drafts),
        "mean_accepted_base": float(a.accepted.mean()),
        "mean_accepted_other": float(b.accepted.mean()),
    }


def split_prompts(count: int, heldout_fraction: float) -> tuple[list[int], list[int]]:
    """(held-out, rest): the first ceil(fraction * count) prompts tune, the others report."""
    if not 0 < heldout_fraction < 1 or count < 2:
        raise ValueError(
            f"alpha tuning needs >= 2 prompts and 0 < heldout_fraction < 1, "
            f"got {count} prompts, fraction {heldout_fraction}"
        )
    cut = min(max(1, int(np.ceil(heldout_fraction * count))), count - 1)
    return list(range(cut)), list(range(cut, count))


def tune_alpha(
    view: TraceView,
    lm,
    k: int,
    p: int,
    alphas: Sequence[float],
    heldout_fraction: float = 0.25,
    num_threads=None,
) -> dict:
    """Appendix E: alpha maximising block efficiency on the held-out prompts (ties: smaller
    alpha), with block efficiency reported on the remaining prompts."""
    held, rest = split_prompts(len(view.trace), heldout_fraction)
    tuning = {
        float(a): replay(view, NgramRescore(lm, k, p, float(a)), held, num_threads, progress=False).block_efficiency
        for a in alphas
    }
    best = max(sorted(tuning), key=lambda a: (tuning[a], -a))
    report = replay(view, NgramRescore(lm, k, p, best), rest, num_threads).block_efficiency
    return {
        "alpha": best,
        "heldout_prompts": held,
        "report_prompts": rest,
        "heldout_curve": tuning,
        "block_efficiency_rest": report,
    }
