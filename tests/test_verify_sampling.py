"""Token and block verification: exact output laws, the full speculative loop by enumeration,
optimality of block verification, and a Monte-Carlo check of the batched samplers."""

from __future__ import annotations

import itertools
import random

import pytest
import torch
from scipy.stats import chi2

from _verify_helpers import ContextModel, random_dist
from draftlattice.verify import (
    block_accept_probs,
    block_verify,
    block_verify_distribution,
    residual_distribution,
    sampling_distribution,
    token_accept_probs,
    token_verify,
    token_verify_distribution,
)

F64 = torch.float64
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="not applicable: CUDA is not available"),
    ),
]
LAWS = {"token": token_verify_distribution, "block": block_verify_distribution}
SAMPLERS = {"token": token_verify, "block": block_verify}


# ----------------------------------------------------------------------------- scalar references


def _norm_pos(v: list[float]) -> list[float] | None:
    v = [max(x, 0.0) for x in v]
    s = sum(v)
    return [x / s for x in v] if s > 0 else None


def ref_token_law(X, q, p, L):
    """Pr(k, y) of token verification, written from the papers with scalar loops."""
    V = len(p[0])
    out = [[0.0] * V for _ in range(len(X) + 1)]
    reach = 1.0
    for i in range(L):
        a = 1.0 if q[i][X[i]] <= p[i][X[i]] else p[i][X[i]] / q[i][X[i]]
        res = _norm_pos([p[i][x] - q[i][x] for x in range(V)]) or p[i]
        for y in range(V):
            out[i][y] += reach * (1 - a) * res[y]
        reach *= a
    for y in range(V):
        out[L][y] += reach * p[L][y]
    return out


def ref_block_law(X, q, p, L):
    """Pr(tau, y) of block verification (Sun et al. 2024), scalar loops."""
    V = len(p[0])
    w = [1.0]
    for i in range(1, L + 1):
        r = w[-1] * p[i - 1][X[i - 1]]
        w.append(1.0 if r >= q[i - 1][X[i - 1]] else r / q[i - 1][X[i - 1]])
    h = [1.0]
    for i in range(1, L):
        S = sum(max(w[i] * p[i][x] - q[i][x], 0.0) for x in range(V))
        den = S + (1 - w[i])
        h.append(min(max(S / den, 0.0), 1.0) if den > 0 else 1.0)
    h.append(w[L])
    out = [[0.0] * V for _ in range(len(X) + 1)]
    for tau in range(L + 1):
        pt = h[tau]
        for j in range(tau + 1, L + 1):
            pt *= 1 - h[j]
        if tau == L:
            dist = p[L]
        else:
            dist = _norm_pos([w[tau] * p[tau][x] - q[tau][x] for x in range(V)]) or p[tau]
        for y in range(V):
            out[tau][y] += pt * dist[y]
    return out


REFS = {"token": ref_token_law, "block": ref_block_law}


def random_case(rng: random.Random, V: int, g: int, B: int, with_lengths: bool):
    X = torch.tensor([[rng.randrange(V) for _ in range(g)] for _ in range(B)])
    q = torch.tensor([[random_dist(rng, V) for _ in range(g)] for _ in range(B)], dtype=F64)
    p = torch.tensor([[random_dist(rng, V) for _ in range(g + 1)] for _ in range(B)], dtype=F64)
    for b in range(B):  # q = p at some positions; make the drafted tokens possible under q
        for i in range(g):
            if rng.random() < 0.25:
                q[b, i] = p[b, i]
            if q[b, i, X[b, i]] == 0:
                q[b, i, X[b, i]] = 0.3
                q[b, i] /= q[b, i].sum()
    L = torch.tensor([rng.randrange(g + 1) for _ in range(B)]) if with_lengths else None
    return X, q, p, L


@pytest.mark.parametrize("rule", ["token", "block"])
@pytest.mark.parametrize("with_lengths", [False, True])
def test_law_matches_scalar_reference(rule, with_lengths):
    rng = random.Random(1)
    for V, g in [(3, 3), (4, 3), (5, 1), (4, 6)]:
        X, q, p, L = random_case(rng, V, g, 24, with_lengths)
        law = LAWS[rule](X, q, p, L)
        assert law.shape == (24, g + 1, V)
        for b in range(24):
            Lb = g if L is None else int(L[b])
            ref = torch.tensor(REFS[rule](X[b].tolist(), q[b].tolist(), p[b].tolist(), Lb), dtype=F64)
            torch.testing.assert_close(law[b], ref, atol=1e-12, rtol=0)
            assert abs(float(law[b].sum()) - 1) < 1e-12
            assert float(law[b, Lb + 1 :].abs().sum()) == 0.0


def test_deterministic_parts():
    X = torch.tensor([[0, 1]])
    q = torch.tensor([[[0.5, 0.5, 0.0], [0.2, 0.8, 0.0]]], dtype=F64)
    p = torch.tensor([[[0.25, 0.25, 0.5], [0.2, 0.4, 0.4], [1.0, 0.0, 0.0]]], dtype=F64)
    torch.testing.assert_close(token_accept_probs(X, q, p), torch.tensor([[0.5, 0.5]], dtype=F64))
    w, h = block_accept_probs(X, q, p)
    torch.testing.assert_close(w, torch.tensor([[1.0, 0.5, 0.25]], dtype=F64))
    # S_1 = sum max(0.5 * p_2 - q_2, 0) = 0.2 (token 2); h_1 = 0.2 / (0.2 + 0.5); h_2 = w_2
    torch.testing.assert_close(h, torch.tensor([[0.2 / 0.7, 0.25]], dtype=F64))
    torch.testing.assert_close(residual_distribution(p[0, 0], q[0, 0]), torch.tensor([0.0, 0.0, 1.0], dtype=F64))
    # q = p: empty residual falls back to p
    torch.testing.assert_close(residual_distribution(p[0, 1], p[0, 1]), p[0, 1])
    torch.testing.assert_close(residual_distribution(p[0, 1], q[0, 1], 0.5), torch.tensor([0.0, 0.0, 1.0], dtype=F64))


def _iid_example():
    p = torch.tensor([1 / 3, 2 / 3], dtype=F64)
    q = torch.tensor([2 / 3, 1 / 3], dtype=F64)
    X = torch.tensor(list(itertools.product(range(2), repeat=2)))
    prob = q[X].prod(-1)
    return X, q.expand(4, 2, 2), p.expand(4, 3, 2), prob


def _expected_accepted(law: torch.Tensor, prob: torch.Tensor) -> float:
    k = torch.arange(law.shape[1], dtype=law.dtype)
    return float((prob * (law.sum(-1) * k).sum(-1)).sum())


def test_paper_example_10_9_and_11_9():
    X, q, p, prob = _iid_example()
    assert abs(_expected_accepted(token_verify_distribution(X, q, p), prob) - 10 / 9) < 1e-12
    assert abs(_expected_accepted(block_verify_distribution(X, q, p), prob) - 11 / 9) < 1e-12


def _draft_enumeration(model: ContextModel, s: tuple, g: int, L: int):
    """All drafts of length L (padded to g) from q autoregressively, with their probabilities,
    and the q / p tensors along each."""
    V = model.V
    Xs, probs, qs, ps = [], [], [], []
    for X in itertools.product(range(V), repeat=L):
        pr = 1.0
        for i in range(L):
            pr *= model.q(s + X[:i])[X[i]]
        if pr == 0.0:
            continue
        Xp = list(X) + [0] * (g - L)
        Xs.append(Xp)
        probs.append(pr)
        qs.append([model.q(s + tuple(Xp[:i])) for i in range(g)])
        ps.append([model.p(s + tuple(Xp[:i])) for i in range(g + 1)])
    return (
        torch.tensor(Xs),
        torch.tensor(probs, dtype=F64),
        torch.tensor(qs, dtype=F64),
        torch.tensor(ps, dtype=F64),
    )


@pytest.mark.parametrize("rule", ["token", "block"])
@pytest.mark.parametrize("V,N,seed", [(3, 5, 0), (4, 4, 1), (3, 5, 2)])
@pytest.mark.parametrize("varying_lengths", [False, True])
def test_speculative_loop_is_exact(rule, V, N, seed, varying_lengths):
    """Draft g = 3 tokens from q, verify, append, repeat until N tokens: the law of the first N
    tokens equals the target's, by exact enumeration in float64."""
    g = 3
    model = ContextModel(V, seed)
    law_fn = LAWS[rule]
    mass: dict[tuple, float] = {(): 1.0}
    final: dict[tuple, float] = {}
    while mass:
        s = min(mass, key=len)
        m = mass.pop(s)
        L = (1 + len(s)) % (g + 1) if varying_lengths else g  # per-row lengths 0..g
        X, prob, q, p = _draft_enumeration(model, s, g, L)
        law = law_fn(X, q, p, torch.full((len(X),), L))
        for r in range(len(X)):
            for k in range(L + 1):
                for y in range(V):
                    pr = float(prob[r] * law[r, k, y])
                    if pr == 0.0:
                        continue
                    t = (s + tuple(X[r, :k].tolist()) + (y,))[:N]
                    if len(t) == N:
                        final[t] = final.get(t, 0.0) + m * pr
                    else:
                        mass[t] = mass.get(t, 0.0) + m * pr
    worst = 0.0
    for seq in itertools.product(range(V), repeat=N):
        target = 1.0
        for i in range(N):
            target *= model.p(seq[:i])[seq[i]]
        worst = max(worst, abs(final.get(seq, 0.0) - target))
    assert abs(sum(final.values()) - 1) < 1e-12
    assert worst < 1e-9, worst


def test_block_accepts_at_least_as_many_as_token():
    strict = 0
    for seed in range(40):
        V = 3 + seed % 2
        model = ContextModel(V, 100 + seed)
        X, prob, q, p = _draft_enumeration(model, (), 3, 3)
        e_tok = _expected_accepted(token_verify_distribution(X, q, p), prob)
        e_blk = _expected_accepted(block_verify_distribution(X, q, p), prob)
        assert e_blk >= e_tok - 1e-12, (seed, e_blk, e_tok)
        strict += e_blk > e_tok + 1e-9
    assert strict > 10  # block verification is strictly better on most random cases


# ----------------------------------------------------------------------------- Monte Carlo


def _chi2_pvalue(counts: torch.Tensor, expected_prob: torch.Tensor, n: int) -> float:
    exp = expected_prob * n
    zero = expected_prob <= 1e-15
    assert int(counts[zero].sum()) == 0, "sampled an outcome of probability 0"
    live = ~zero
    stat = float((((counts[live] - exp[live]) ** 2) / exp[live]).sum())
    dof = int(live.sum()) - 1
    return float(chi2.sf(stat, dof)) if dof > 0 else 1.0


def _mc_cases(V: int, g: int, cases: int):
    """Non-degenerate cases: at least two block positions with h_i strictly inside (0, 1) and
    two token positions with a_i inside (0, 1), so the samplers' random choices all matter."""
    rng = random.Random(7)
    picked = []
    while len(picked) < cases:
        X, q, p, _ = random_case(rng, V, g, 1, False)
        h = block_accept_probs(X, q, p).h[0]
        a = token_accept_probs(X, q, p)[0]
        if int(((h > 0.1) & (h < 0.9)).sum()) >= 2 and int(((a > 0.1) & (a < 0.9)).sum()) >= 2:
            picked.append((X, q, p))
    return tuple(torch.cat(t) for t in zip(*picked))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rule", ["token", "block"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_monte_carlo_matches_exact_law(device, rule, dtype):
    V, g, cases, n = 4, 3, 6, 20000
    X, q, p = _mc_cases(V, g, cases)
    L = torch.tensor([3, 3, 2, 1, 0, 3])
    law = LAWS[rule](X, q, p, L)  # float64, exact
    rep = lambda t: t.repeat_interleave(n, dim=0).to(device)  # noqa: E731
    gen = torch.Generator(device=device).manual_seed(1234)
    num, nxt = SAMPLERS[rule](rep(X), rep(q).to(dtype), rep(p).to(dtype), generator=gen, lengths=rep(L))
    assert num.device.type == nxt.device.type == torch.device(device).type
    assert num.dtype == nxt.dtype == torch.int64
    num, nxt = num.cpu().view(cases, n), nxt.cpu().view(cases, n)
    for c in range(cases):
        counts = torch.zeros(g + 1, V, dtype=F64)
        counts.index_put_((num[c], nxt[c]), torch.ones(n, dtype=F64), accumulate=True)
        pval = _chi2_pvalue(counts.flatten(), law[c].flatten(), n)
        assert pval > 1e-4, (c, pval)
    # Same generator seed -> same output.
    gen2 = torch.Generator(device=device).manual_seed(1234)
    num2, _ = SAMPLERS[rule](rep(X), rep(q).to(dtype), rep(p).to(dtype), generator=gen2, lengths=rep(L))
    assert torch.equal(num2.cpu().view(cases, n), num)


@pytest.mark.parametrize("rule", ["token", "block"])
def test_monte_carlo_paper_example(rule):
    X, q, p, prob = _iid_example()
    n = 200000
    gen = torch.Generator().manual_seed(0)
    rows = torch.multinomial(prob, n, replacement=True, generator=gen)
    num, _ = SAMPLERS[rule](X[rows], q[rows], p[rows], generator=gen)
    mean = num.double().mean().item()
    target = 10 / 9 if rule == "token" else 11 / 9
    assert abs(mean - target) < 5 * (0.8 / n**0.5), mean


# ----------------------------------------------------------------------------- sampling_distribution


def _ref_sampling(logits: list[float], T: float, k: int | None, top_p: float | None) -> list[float]:
    import math

    x = [v / T for v in logits]
    if k:
        kth = sorted(x, reverse=True)[k - 1]
        x = [v if v >= kth else -math.inf for v in x]
    if top_p is not None and top_p < 1:
        m = max(x)
        e = [math.exp(v - m) for v in x]
        z = sum(e)
        order = sorted(range(len(x)), key=lambda i: -x[i])
        keep, cum = set(), 0.0
        for i in order:
            keep.add(i)
            cum += e[i] / z
            if cum >= top_p:
                break
        x = [v if i in keep else -math.inf for i, v in enumerate(x)]
    m = max(x)
    e = [math.exp(v - m) for v in x]
    return [v / sum(e) for v in e]


@pytest.mark.parametrize(
    "T,k,top_p", [(1.0, None, None), (0.7, None, None), (1.3, 5, None), (1.0, None, 0.8), (0.5, 7, 0.6), (2.0, 3, 0.99)]
)
def test_sampling_distribution_matches_reference(T, k, top_p):
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(5, 3, 11, generator=gen, dtype=F64) * 2
    out = sampling_distribution(logits, T, k, top_p)
    assert out.shape == logits.shape and out.dtype == F64
    for row, ref_logits in zip(out.view(-1, 11), logits.view(-1, 11)):
        torch.testing.assert_close(row, torch.tensor(_ref_sampling(ref_logits.tolist(), T, k, top_p), dtype=F64))


def test_sampling_distribution_greedy_and_per_row_temperature():
    logits = torch.tensor([[0.1, 2.0, -1.0], [3.0, 3.0, 0.0]])
    onehot = sampling_distribution(logits, 0.0)
    assert torch.equal(onehot, torch.tensor([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))
    t = torch.tensor([0.0, 2.0])
    out = sampling_distribution(logits, t)
    assert torch.equal(out[0], onehot[0])
    torch.testing.assert_close(out[1], (logits[1] / 2).softmax(-1))
    half = sampling_distribution(logits.to(torch.bfloat16))
    assert half.dtype == torch.float32


def test_verify_with_sampling_distribution_is_exact():
    """p and q from logits through the same transform: the verified law is still exact."""
    rng = torch.Generator().manual_seed(5)
    V, g = 6, 2
    p = sampling_distribution(torch.randn(1, g + 1, V, generator=rng, dtype=F64), 0.8, 4, 0.9)
    q = sampling_distribution(torch.randn(1, g, V, generator=rng, dtype=F64), 1.2, 3, None)
    # context-independent p, q: enumerate drafts; the first output token's law must be p_1
    X = torch.tensor(list(itertools.product(range(V), repeat=g)))
    prob = q[0, 0][X[:, 0]] * q[0, 1][X[:, 1]]
    for fn in LAWS.values():
        law = fn(X, q.expand(len(X), g, V), p.expand(len(X), g + 1, V))
        first = torch.zeros(V, dtype=F64)
        first += (prob[:, None] * law[:, 0]).sum(0)  # k = 0: the next token is the first
        for k in range(1, g + 1):
            first.index_add_(0, X[:, 0], prob * law[:, k].sum(-1))
        torch.testing.assert_close(first, p[0, 0], atol=1e-12, rtol=0)


def test_zero_q_at_draft_token_gives_no_nan():
    X = torch.tensor([[1, 0]])
    q = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])
    p = torch.tensor([[[0.0, 1.0], [0.0, 1.0], [0.5, 0.5]]])
    for name in ("token", "block"):
        num, nxt = SAMPLERS[name](X, q, p, generator=torch.Generator().manual_seed(0))
        assert num.tolist()[0] in (0, 1, 2) and nxt.tolist()[0] in (0, 1)
        assert not LAWS[name](X, q, p).isnan().any()
