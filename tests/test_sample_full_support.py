"""Full-support draft sampling: the "other" arc of each position makes q's support the head's,
and the returned q is the exact law of the concrete drafts, by enumeration of every concrete
draft over a tiny vocabulary scored by the pure-Python backoff reference."""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest

import draftlattice as dl
from arpa_writer import random_arpa
from draftlattice.sample import sample_from_heads
from ngram_reference import BruteForceLM

V = 7  # the LM knows tokens 0..5; token 6 is out of its vocabulary


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    base = tmp_path_factory.mktemp("arpa")
    out = []
    for seed, order in enumerate((2, 3, 4)):
        path = base / f"s{seed}.arpa"
        random_arpa(path, order, seed=70 + seed, n_words=6, consistent=seed != 1)
        out.append((dl.NgramLM(path, oov_logprob=-6.0), BruteForceLM(path, oov_ln=-6.0)))
    return out


def random_heads(rng: random.Random, h: int, zeros: bool) -> np.ndarray:
    """[h, V] log-probabilities, some exact zeros (-inf) when ``zeros``."""
    out = np.empty((h, V))
    for t in range(h):
        x = np.array([rng.expovariate(1.0) ** 2 for _ in range(V)])
        if zeros:
            x[rng.sample(range(V), 2)] = 0.0
        with np.errstate(divide="ignore"):
            out[t] = np.log(x / x.sum())
    return out


def reference_law(logp, k, reference, context, alpha, bos) -> dict[tuple, float]:
    """Probability of every concrete draft under the documented proposal: arcs = top-k candidates
    (lattice log-probs rounded to float32 as the lattice stores them) or "other"; the LM scores a
    candidate in its segment's history, "other" by ln(1 - LM mass of the candidates), and restarts
    from an empty history after "other"; the concrete "other" token follows the head outside the
    top-k."""
    h = logp.shape[0]
    tops = [sorted(range(V), key=lambda c: (-logp[t, c], c))[:k] for t in range(h)]
    weights: dict[tuple, float] = {}
    for draft in itertools.product(range(V), repeat=h):
        if any(not math.isfinite(logp[t, c]) for t, c in enumerate(draft)):
            continue
        history = (["<s>"] if bos else []) + [str(c) for c in context]
        total = 0.0
        for t, c in enumerate(draft):
            if c in tops[t]:
                total += float(np.float32(logp[t, c])) + alpha * reference.logprob(history, str(c))
                history = history + [str(c)]
            else:
                outside = [logp[t, x] for x in range(V) if x not in tops[t]]
                mass = math.log(sum(math.exp(v) for v in outside))
                lm_mass = sum(math.exp(np.float32(reference.logprob(history, str(x)))) for x in tops[t])
                total += mass + alpha * math.log(max(1 - lm_mass, 1e-10)) + logp[t, c] - mass
                history = []
        weights[draft] = total
    log_z = np.logaddexp.reduce(np.array(list(weights.values())))
    return {d: math.exp(w - log_z) for d, w in weights.items()}


def test_q_is_the_exact_law_of_the_concrete_drafts(models):
    rng = random.Random(3)
    for case in range(12):
        lm, reference = models[case % 3]
        h, k = rng.randint(1, 3), rng.randint(1, 3)
        logp = random_heads(rng, h, zeros=case % 2 == 1)
        context = [rng.randrange(6) for _ in range(rng.randint(0, 3))]
        alpha, bos = rng.choice([0.0, 0.5, 1.0]), rng.random() < 0.5
        law = reference_law(logp, k, reference, context, alpha, bos)
        n = 60
        s = sample_from_heads(logp, k, lm, n=n, alpha=alpha, context=context, bos=bos, generator=rng.randrange(2**63))
        assert s.tokens.shape == (n, h) and s.q.shape == (n, h, V)
        np.testing.assert_allclose(s.q.sum(-1), 1.0, atol=1e-12)
        np.testing.assert_array_equal(s.q > 0, np.broadcast_to(np.isfinite(logp), (n, h, V)))  # head's support
        for i in range(n):
            draft = tuple(int(c) for c in s.tokens[i])
            assert law[draft] > 0
            for t in range(h):  # q[i, t, c] = law(prefix + c) / law(prefix), by marginalisation
                prefix = draft[:t]
                marg = np.zeros(V)
                for d, pr in law.items():
                    if d[:t] == prefix:
                        marg[d[t]] += pr
                np.testing.assert_allclose(s.q[i, t], marg / marg.sum(), rtol=2e-5, atol=1e-9)


def test_chi_square_over_concrete_drafts(models):
    from scipy.stats import chisquare

    lm, reference = models[2]
    rng = random.Random(8)
    logp = random_heads(rng, 2, zeros=True)
    law = reference_law(logp, 2, reference, [1, 4], 0.7, False)
    n = 20000
    s = sample_from_heads(logp, 2, lm, n=n, alpha=0.7, context=[1, 4], generator=np.random.default_rng(5))
    keys = sorted(law)
    index = {d: j for j, d in enumerate(keys)}
    counts = np.bincount([index[tuple(d)] for d in s.tokens.tolist()], minlength=len(keys))
    assert chisquare(counts, np.array([law[d] for d in keys]) * n).pvalue > 1e-3
    assert (s.tokens >= 0).all() and (s.arc_q[..., -1] > 0).any()  # "other" arcs were drawn


def test_full_support_equals_plain_sampling_when_k_is_the_vocabulary(models):
    lm, _ = models[0]
    logp = random_heads(random.Random(1), 2, zeros=False)
    s = sample_from_heads(logp, V, lm, n=5, alpha=0.5, context=[2], generator=7)
    assert s.lattice.k == V and float(s.arc_q[..., -1].max()) == 0.0
    plain = dl.sample_drafts(s.lattice, lm, n=5, alpha=0.5, context=[2], generator=7)
    np.testing.assert_allclose(s.arc_q[..., :V], plain.q, atol=1e-12)
    np.testing.assert_array_equal(s.tokens, plain.tokens)


def test_bad_inputs_raise(models):
    lm, _ = models[0]
    lattice = dl.Lattice.from_logits(np.zeros((2, V), np.float32), 2)
    with pytest.raises(ValueError, match="other"):
        dl.sample_drafts(lattice, lm, other_logprobs=[0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="other"):
        dl.sample_drafts(lattice, lm, other_logprobs=[0.5, -1.0])
    with pytest.raises(ValueError, match="head_logprobs"):
        sample_from_heads(np.zeros(V), 2, lm)
    with pytest.raises(ValueError, match="log-probabilities"):
        sample_from_heads(np.full((2, V), 0.5), 2, lm)


def test_top_k_only_proposals_keep_the_lattice_support(models):
    lm, _ = models[1]
    logp = random_heads(random.Random(6), 3, zeros=False)
    s = sample_from_heads(logp, 2, lm, n=20, alpha=0.5, context=[3], generator=11, full_support=False)
    np.testing.assert_allclose(s.q.sum(-1), 1.0, atol=1e-12)
    for t in range(3):
        support = set(np.flatnonzero(s.q[0, t] > 0).tolist())
        assert support <= set(s.lattice.tokens[t].tolist())
        assert set(s.tokens[:, t].tolist()) <= set(s.lattice.tokens[t].tolist())
    full = sample_from_heads(logp, 2, lm, n=20, alpha=0.5, context=[3], generator=11)
    assert (full.q > 0).all()  # the head has no zero: full support is the whole vocabulary
