"""Entropy-adaptive drafting: more drafts where the heads' entropies say they help.

Policy (two levels): at a step, let H be the mean entropy (nats) of heads 2..g+1 at the current
position (known before drafting, no extra cost). ``ThresholdPolicy`` uses p_hi drafts when H is
on the chosen side of a threshold tau ("high": H > tau, "low": H <= tau), else p_lo drafts; k is
fixed. Verification cost = mean draft rows verified per serial call.

Fair comparison: mixing two fixed configurations at random per step (time-sharing) reaches every
point on the segment between them, so an adaptive policy only *beats* fixed drafting if its block
efficiency lies above the upper concave hull of the fixed (cost, block efficiency) points at its
cost. Policies (tau from quantiles of H, side, p_hi) are chosen on held-out prompts and reported
on the rest.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .analyses import split_prompts
from .drafting import Adaptive, NgramRescore, TraceView
from .replay import replay


@dataclass(frozen=True)
class ThresholdPolicy:
    k: int
    p_lo: int
    p_hi: int
    tau: float
    side: str  # "high" or "low"

    def __call__(self, entropy: np.ndarray) -> tuple[int, int]:
        h = float(np.mean(entropy))
        hi = h > self.tau if self.side == "high" else h <= self.tau
        return self.k, self.p_hi if hi else self.p_lo

    @property
    def name(self) -> str:
        test = "H>" if self.side == "high" else "H<="
        return f"adaptive(k={self.k},p={self.p_hi} if {test}{self.tau:.3f} else {self.p_lo})"


def upper_hull(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """Upper concave hull of (cost, value) points, sorted by cost."""
    hull: list[tuple[float, float]] = []
    for x, y in sorted(set(points)):
        if hull and y <= hull[-1][1]:
            continue  # dominated: costs more, gains no more
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (y2 - y1) * (x - x1) <= (y - y1) * (x2 - x1):
                hull.pop()
            else:
                break
        hull.append((x, y))
    return hull


def hull_value(hull: Sequence[tuple[float, float]], cost: float) -> float:
    """Best block efficiency reachable by mixing fixed configs at mean cost ``cost``."""
    xs, ys = [p[0] for p in hull], [p[1] for p in hull]
    if cost <= xs[0]:
        return ys[0] if cost >= xs[0] - 1e-12 else float("nan")
    return float(np.interp(cost, xs, ys))


def step_entropies(view: TraceView, prompts: Sequence[int]) -> np.ndarray:
    """Mean entropy of heads 2..h at every position of the given prompts (for quantiles)."""
    return np.concatenate([view.trace.entropy[i][:, 1:].mean(1) for i in prompts])


def compare_adaptive(
    view: TraceView,
    lm,
    k: int,
    alpha: float,
    fixed_ps: Sequence[int] = (1, 2, 4, 8, 16),
    p_his: Sequence[int] = (4, 16),
    quantiles: Sequence[float] = (0.25, 0.5, 0.75),
    heldout_fraction: float = 0.25,
    num_threads=None,
) -> dict:
    """Fixed p vs entropy-adaptive p at equal verification cost (see the module docstring)."""
    held, rest = split_prompts(len(view.trace), heldout_fraction)

    def run(spec, prompts):
        r = replay(view, spec, prompts, num_threads, progress=False)
        return {"name": spec.name, "block_efficiency": r.block_efficiency, "cost": r.drafts_per_call}

    fixed = {
        s: [run(NgramRescore(lm, k, p, alpha), ps) for p in fixed_ps] for s, ps in (("held", held), ("rest", rest))
    }
    hulls = {s: upper_hull([(f["cost"], f["block_efficiency"]) for f in fixed[s]]) for s in fixed}
    taus = np.quantile(step_entropies(view, held), quantiles)
    candidates = []
    for side in ("high", "low"):
        for p_hi in p_his:
            for tau in taus:
                policy = ThresholdPolicy(k, 1, int(p_hi), float(tau), side)
                spec = Adaptive(lm, policy, alpha, name=policy.name)
                h = run(spec, held)
                h["margin"] = h["block_efficiency"] - hull_value(hulls["held"], h["cost"])
                candidates.append((policy, spec, h))
    policy, spec, held_result = max(candidates, key=lambda c: c[2]["margin"])
    chosen = run(spec, rest)
    chosen["fixed_hull_at_cost"] = hull_value(hulls["rest"], chosen["cost"])
    chosen["margin"] = chosen["block_efficiency"] - chosen["fixed_hull_at_cost"]
    return {
        "k": k,
        "alpha": alpha,
        "fixed_rest": fixed["rest"],
        "heldout_candidates": [c[2] for c in candidates],
        "chosen_on_heldout": held_result,
        "chosen_on_rest": chosen,
        "heldout_prompts": len(held),
        "report_prompts": len(rest),
    }
