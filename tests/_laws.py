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


def sampled_continuations_p_value(model, step, logits_of, seed: int, prompt=(1, 2, 3), new: int = 3, rows: int = 6000):
    """Lossless sampling through ``step`` (p = 2 drafts of untrained heads, recursive rejection,
    temperature 0.9, top-k 5) from ``rows`` copies of ``prompt``: the chi-square p-value of the
    ``new``-token continuations drawn against their exact law, enumerated from ``logits_of(batch)``
    (``[N, P + new, V]`` logits of every continuation after the prompt)."""
    import itertools

    import torch

    import draftlattice.hf as dlhf
    from draftlattice.decode import Engine, LatticeDrafter, RowStopper, Sampling
    from draftlattice.verify import sampling_distribution

    prompt = list(prompt)
    sampling = Sampling(temperature=0.9, top_k=5)
    continuations = list(itertools.product(range(model.config.vocab_size), repeat=new))
    batch = torch.tensor([prompt + list(c) for c in continuations])
    with torch.inference_mode():
        logits = logits_of(batch)[:, len(prompt) - 1 : -1].double()
    probs = sampling_distribution(logits, sampling.temperature, sampling.top_k, sampling.top_p)
    law = probs.gather(-1, batch[:, len(prompt) :, None]).squeeze(-1).prod(-1)
    torch.manual_seed(seed)
    engine = Engine(
        model,
        dlhf.DraftHeads.for_model(model, horizon=3),
        LatticeDrafter(None, k=4, p=2, sample_alpha=1.0),
        sample_rule="multi",
        sampling=sampling,
        processors=sampling.processors(),
        step=step,
    )
    ids = torch.tensor([prompt] * rows)
    tokens, _ = engine.run(ids, RowStopper(ids, new, set(), [], 0), max_length=len(prompt) + new)
    counts: dict[tuple[int, ...], int] = {}
    for row in tokens:
        counts[tuple(row)] = counts.get(tuple(row), 0) + 1
    return law_p_value({c: float(p) for c, p in zip(continuations, law)}, counts)
