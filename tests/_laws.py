"""The Monte-Carlo law test the sampling tests share: drawn outcomes against an exact law."""

from __future__ import annotations

import numpy as np
from scipy.stats import chisquare


def law_p_value(law: dict, counts: dict) -> float:
    """Chi-square p-value of ``counts`` (outcome -> times drawn) under ``law`` (outcome -> exact
    probability, e.g. every continuation enumerated).

    An outcome outside the law, or of probability 0 in it (cut by top-k / top-p; below 1e-9 of a
    draw, where float products leave crumbs), must never be drawn: either fails the test at once.
    Outcomes expected fewer than 5 times are pooled into one cell, where the chi-square
    approximation holds; with fewer than 2 cells left there is nothing to test (1.0).
    """
    draws = sum(counts.values())
    outside = set(counts) - set(law)
    assert not outside, f"outcomes outside the law: {sorted(outside)[:5]}"
    keys = sorted(law, key=law.get, reverse=True)
    expected = np.array([law[k] * draws for k in keys])
    observed = np.array([counts.get(k, 0) for k in keys], dtype=float)
    impossible = expected < 1e-9 * draws
    assert observed[impossible].sum() == 0, "sampled a sequence of probability 0"
    big = expected >= 5
    rare = ~big & ~impossible
    exp, obs = expected[big], observed[big]
    if rare.any():
        exp, obs = np.append(exp, expected[rare].sum()), np.append(obs, observed[rare].sum())
    if len(exp) < 2:
        return 1.0
    return float(chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)
