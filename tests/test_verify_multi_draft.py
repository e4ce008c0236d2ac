"""Multi-draft verification: the tree rule (deterministic drafts) and recursive rejection sampling
(i.i.d. drafts) are lossless by exact enumeration of a whole speculative loop, their exact laws
match the samplers by Monte Carlo, and the tree rule covers the target mass of its tree."""

from __future__ import annotations

import itertools
import random

import pytest
import torch
from scipy.stats import chi2

from _verify_helpers import ContextModel
from draftlattice.verify import multi_draft, multi_draft_verify, multi_draft_verify_distribution

F64 = torch.float64
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="not applicable: CUDA is not available"),
    ),
]


def deterministic_tree(s: tuple, V: int, p: int, g: int, seed: int) -> list[list[int]]:
    """A fixed (context-dependent) tree of p drafts: shared prefixes, duplicates, distinct rows."""
    rng = random.Random(f"{seed}:{s}")
    rows = []
    for _ in range(p):
        if rows and rng.random() < 0.5:
            base = list(rng.choice(rows))
            cut = rng.randrange(g + 1)
            base[cut:] = [rng.randrange(V) for _ in range(g - cut)]
        else:
            base = [rng.randrange(V) for _ in range(g)]
        rows.append(base)
    return rows


def short_tree(s: tuple, V: int, p: int, g: int, seed: int) -> list[list[int]]:
    """:func:`deterministic_tree` with some rows ending early (-1 past their length), as a tree
    of a lattice's best prefixes: branches of different depths, a row of no token at times."""
    rng = random.Random(f"short:{seed}:{s}")
    rows = deterministic_tree(s, V, p, g, seed)
    for row in rows[1:] if rng.random() < 0.5 else rows:
        if rng.random() < 0.6:
            end = rng.randrange(g)
            row[end:] = [-1] * (g - end)
    return rows


def tree_drafts(rule: str, s: tuple, V: int, p: int, g: int, seed: int) -> list[list[int]]:
    return (short_tree if rule == "short" else deterministic_tree)(s, V, p, g, seed)


TREE_RULES = ("tree", "short")  # deterministic drafts, full length or ending early


def iid_drafts(model: ContextModel, s: tuple, p: int, g: int):
    """Every p-tuple of drafts drawn i.i.d. from q, with its probability."""
    V = model.V
    singles = []
    for X in itertools.product(range(V), repeat=g):
        pr = 1.0
        for i in range(g):
            pr *= model.q(s + X[:i])[X[i]]
        if pr > 0:
            singles.append((list(X), pr))
    for combo in itertools.product(singles, repeat=p):
        pr = 1.0
        for _, w in combo:
            pr *= w
        yield [X for X, _ in combo], pr


class PositiveQ(ContextModel):
    """ContextModel whose drafter gives every token some probability (branches always possible)."""

    def q(self, s: tuple) -> list[float]:
        return [0.8 * x + 0.2 / self.V for x in super().q(s)]


def schedule(p: int, g: int) -> list[tuple[int, int]]:
    """Fixed branching schedule of rows 1..p-1: (row to copy the prefix of, branching depth)."""
    return [(0 if i % 2 else i - 1, min(i // 2, g - 1)) for i in range(1, p)]


def wor_drafts(model: ContextModel, s: tuple, p: int, g: int):
    """Every tree of p rows the without-replacement drafter can build, with its probability: row i
    copies its parent's prefix, draws the branching token from q without its siblings, then
    continues from q."""
    V, plan = model.V, schedule(p, g)

    def extend(rows, prob, i):
        if i == p:
            yield rows, prob
            return
        parent, depth = (0, 0) if i == 0 else plan[i - 1]
        prefix = [] if i == 0 else rows[parent][:depth]
        siblings = {r[depth] for r in rows if r[:depth] == prefix}
        qd = model.q(s + tuple(prefix))
        left = 1 - sum(qd[x] for x in siblings)
        for x in range(V):
            if x in siblings or qd[x] == 0:
                continue
            for tail in itertools.product(range(V), repeat=g - depth - 1):
                row, pr = prefix + [x] + list(tail), prob * qd[x] / left
                for t in range(depth + 1, g):
                    pr *= model.q(s + tuple(row[:t]))[row[t]]
                if pr > 0:
                    yield from extend(rows + [row], pr, i + 1)

    yield from extend([], 1.0, 0)


def tensors(model: ContextModel, s: tuple, drafts: list[list[int]]):
    """Drafts, the target's laws after each row's prefixes and the drafter's; past a row's end
    (-1) the law at its end, which the rule never reads."""
    g = len(drafts[0])

    def prefix(X, j):
        return s + tuple(t for t in X[:j] if t >= 0)

    tp = [[model.p(prefix(X, j)) for j in range(g + 1)] for X in drafts]
    q = [[model.q(prefix(X, j)) for j in range(g)] for X in drafts]
    return torch.tensor(drafts), torch.tensor(tp, dtype=F64), torch.tensor(q, dtype=F64)


def step_cases(model, s, rule, p, g, seed):
    """(drafts [p, g], probability) of every draft set the drafter can propose after s."""
    if rule in TREE_RULES:
        return [(tree_drafts(rule, s, model.V, p, g, seed), 1.0)]
    if rule == "wor":
        return list(wor_drafts(model, s, p, g))
    if rule == "copy":  # p - 1 i.i.d. rows and, last, a fixed row (as a draft copied from the context)
        fixed = deterministic_tree(s, model.V, 1, g, seed)[0]
        return [(rows + [fixed], pr) for rows, pr in iid_drafts(model, s, p - 1, g)]
    return list(iid_drafts(model, s, p, g))


def law_of(rule, X, tp, q):
    if rule == "copy":  # the fixed row's law is one-hot on its tokens
        q = q.clone()
        q[:, -1] = torch.nn.functional.one_hot(X[:, -1], q.shape[-1]).to(q.dtype)
    return multi_draft_verify_distribution(X, tp, None if rule in TREE_RULES else q, without_replacement=rule == "wor")


@pytest.mark.parametrize("rule", ["tree", "short", "rrs", "wor", "copy"])
@pytest.mark.parametrize("V,p,g,N,seed", [(3, 2, 2, 4, 0), (3, 3, 2, 3, 1), (4, 2, 1, 3, 2), (2, 3, 3, 4, 3)])
def test_speculative_loop_is_exact(rule, V, p, g, N, seed):
    """Draft p rows, verify, append, repeat until N tokens: the law of the first N tokens is the
    target's, by exact enumeration of drafts and verifier outcomes in float64."""
    model = (PositiveQ if rule == "wor" else ContextModel)(V, seed)
    mass: dict[tuple, float] = {(): 1.0}
    final: dict[tuple, float] = {}
    while mass:
        s = min(mass, key=len)
        m = mass.pop(s)
        cases = step_cases(model, s, rule, p, g, seed)
        X, tp, q = zip(*(tensors(model, s, d) for d, _ in cases))
        X, tp, q = torch.stack(X), torch.stack(tp), torch.stack(q)
        law = law_of(rule, X, tp, q)
        assert law.shape == (len(cases), p, g + 1, V)
        for c, (_, prob) in enumerate(cases):
            assert abs(float(law[c].sum()) - 1) < 1e-12
            for i, k, y in zip(*torch.nonzero(law[c], as_tuple=True)):
                pr = float(law[c, i, k, y]) * prob * m
                t = (s + tuple(X[c, i, :k].tolist()) + (int(y),))[:N]
                bucket = final if len(t) == N else mass
                bucket[t] = bucket.get(t, 0.0) + pr
    worst = 0.0
    for seq in itertools.product(range(V), repeat=N):
        target = 1.0
        for i in range(N):
            target *= model.p(seq[:i])[seq[i]]
        worst = max(worst, abs(final.get(seq, 0.0) - target))
    assert abs(sum(final.values()) - 1) < 1e-12
    assert worst < 1e-9, worst


def test_law_is_reported_on_the_lowest_row_of_the_path():
    X = torch.tensor([[[0, 1], [0, 1], [1, 0]]])
    tp = torch.full((1, 3, 3, 2), 0.5, dtype=F64)
    law = multi_draft_verify_distribution(X, tp)
    assert float(law[0, 1].abs().sum()) == 0.0  # row 1 duplicates row 0
    torch.testing.assert_close(law[0].sum((0, 2)), torch.tensor([0.0, 0.5, 0.5], dtype=F64))


def test_tree_rule_accepts_the_covered_mass():
    """E[num_accepted] = sum over tree nodes at depth >= 1 of the target probability of the path."""
    rng = random.Random(4)
    for case in range(20):
        V, p, g = 4, rng.randint(1, 4), rng.randint(1, 3)
        model = ContextModel(V, case)
        X, tp, _ = tensors(model, (), deterministic_tree((), V, p, g, case))
        law = multi_draft_verify_distribution(X[None], tp[None])[0]
        expected = float((law.sum((0, 2)) * torch.arange(g + 1, dtype=F64)).sum())
        nodes = {tuple(row[:j]) for row in X.tolist() for j in range(1, g + 1)}
        covered = 0.0
        for node in nodes:
            pr = 1.0
            for i in range(len(node)):
                pr *= model.p(node[:i])[node[i]]
            covered += pr
        assert abs(expected - covered) < 1e-12


def test_more_iid_drafts_accept_more():
    """Expected accepted length grows with the number of i.i.d. drafts (exact, averaged over q)."""
    model = ContextModel(3, 11, same_prob=0.0)
    means = []
    for p in (1, 2, 3):
        cases = list(iid_drafts(model, (), p, 2))
        X, tp, q = (torch.stack(t) for t in zip(*(tensors(model, (), d) for d, _ in cases)))
        law = multi_draft_verify_distribution(X, tp, q)
        prob = torch.tensor([w for _, w in cases], dtype=F64)
        means.append(float((prob[:, None] * law.sum((1, 3)) * torch.arange(3, dtype=F64)).sum()))
    assert means[0] < means[1] < means[2], means


def _chi2_pvalue(counts: torch.Tensor, expected_prob: torch.Tensor, n: int) -> float:
    zero = expected_prob <= 1e-15
    assert int(counts[zero].sum()) == 0, "sampled an outcome of probability 0"
    exp = expected_prob[~zero] * n
    stat = float((((counts[~zero] - exp) ** 2) / exp).sum())
    dof = int((~zero).sum()) - 1
    return float(chi2.sf(stat, dof)) if dof > 0 else 1.0


def _walk(monkeypatch, walk: str, device: str) -> None:
    """Make multi_draft_verify walk the rows on the host or batched, whatever the batch size."""
    if walk == "host" and device != "cpu":
        pytest.skip("the host walk runs on the CPU only")
    monkeypatch.setattr(multi_draft, "HOST_WALK_MAX_ROWS", 10**9 if walk == "host" else 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rule", ["tree", "short", "rrs", "wor", "copy"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("walk", ["batched", "host"])
def test_monte_carlo_matches_exact_law(device, rule, dtype, walk, monkeypatch):
    _walk(monkeypatch, walk, device)
    # The host walk costs about 0.1 ms a row: fewer rows (its draws equal the batched walk's,
    # test_the_host_walk_draws_as_the_batched_walk, which carries the power).
    V, p, g, n = 3, 3, 2, 20000 if walk == "batched" else 2000
    cases = []
    for c in range(5):
        model = PositiveQ(V, 30 + c, same_prob=0.1)
        rng = random.Random(c)
        if rule in TREE_RULES:
            drafts = tree_drafts(rule, (), V, p, g, c)
        elif rule == "wor":
            trees = list(wor_drafts(model, (), p, g))
            drafts = rng.choices([t for t, _ in trees], [w for _, w in trees])[0]
        else:  # one i.i.d. draw of the p rows (of p - 1 rows and a fixed one for "copy")
            drafts = []
            for _ in range(p - (rule == "copy")):
                row: list[int] = []
                for _ in range(g):
                    row.append(rng.choices(range(V), model.q(tuple(row)))[0])
                drafts.append(row)
            if rule == "copy":
                drafts.append(deterministic_tree((), V, 1, g, c)[0])
        cases.append(tensors(model, (), drafts))
    X, tp, q = (torch.stack(t) for t in zip(*cases))
    q = None if rule in TREE_RULES else q
    if rule == "copy":  # the fixed row's law is one-hot on its tokens
        q[:, -1] = torch.nn.functional.one_hot(X[:, -1], V).to(q.dtype)
    wor = rule == "wor"
    law = multi_draft_verify_distribution(X, tp, q, wor)

    def rep(t):
        return t.repeat_interleave(n, dim=0).to(device)

    gen = torch.Generator(device=device).manual_seed(99)
    res = multi_draft_verify(rep(X), rep(tp).to(dtype), gen, None if q is None else rep(q).to(dtype), wor)
    assert all(t.device.type == torch.device(device).type and t.dtype == torch.int64 for t in res)
    best, num, nxt = (t.cpu().view(len(cases), n) for t in res)
    for c in range(len(cases)):
        counts = torch.zeros(p, g + 1, V, dtype=F64)
        counts.index_put_((best[c], num[c], nxt[c]), torch.ones(n, dtype=F64), accumulate=True)
        assert _chi2_pvalue(counts.flatten(), law[c].flatten(), n) > 1e-4, c
    gen2 = torch.Generator(device=device).manual_seed(99)
    again = multi_draft_verify(rep(X), rep(tp).to(dtype), gen2, None if q is None else rep(q).to(dtype), wor)
    assert torch.equal(again.num_accepted.cpu().view(len(cases), n), num)


def per_node_laws(drafts: torch.Tensor, tp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(laws [B, N, V], nodes [B, p, g+1])``: each distinct draft prefix once (the law of the
    lowest row through it), as a token tree verified in one forward gives them."""
    B, p, g = drafts.shape
    nodes = torch.zeros(B, p, g + 1, dtype=torch.int64)
    laws = []
    for b in range(B):
        ids: dict[tuple, int] = {}
        row_laws = []
        for i in range(p):
            for j in range(g + 1):
                prefix = tuple(drafts[b, i, :j].tolist())
                if prefix not in ids:
                    ids[prefix] = len(ids)
                    row_laws.append(tp[b, i, j])
                nodes[b, i, j] = ids[prefix]
        laws.append(torch.stack(row_laws))
    width = max(len(t) for t in laws)
    padded = torch.stack([torch.cat([t, t[:1].expand(width - len(t), -1)]) for t in laws])  # unread padding
    return padded, nodes


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rule", ["tree", "short", "rrs", "wor"])
def test_laws_per_tree_node_give_the_same_draws(device, rule):
    """target_probs given once per tree node (with ``nodes``) is the same rule as the per-row
    copies: same generator, same outputs, draw for draw."""
    V, p, g, n = 4, 3, 3, 400
    model = PositiveQ(V, 7, same_prob=0.3)
    rng = random.Random(5)
    trees = list(wor_drafts(model, (), p, g)) if rule == "wor" else []  # enumerated once
    cases = []
    for c in range(n):
        if rule == "wor":
            drafts = rng.choices([t for t, _ in trees], [w for _, w in trees])[0]
        else:
            drafts = tree_drafts(rule, (), V, p, g, c)
        cases.append(tensors(model, (), drafts))
    X, tp, q = (torch.stack(t).to(device) for t in zip(*cases))
    q = None if rule in TREE_RULES else q
    laws, nodes = (t.to(device) for t in per_node_laws(X.cpu(), tp.cpu()))
    wor = rule == "wor"
    rows = multi_draft_verify(X, tp, torch.Generator(device=device).manual_seed(3), q, wor)
    tree = multi_draft_verify(X, laws, torch.Generator(device=device).manual_seed(3), q, wor, nodes=nodes)
    for a, b in zip(rows, tree):
        assert torch.equal(a, b)
    assert int(rows.num_accepted.max()) > 0  # the drafts were accepted at times


@pytest.mark.parametrize("rule", ["tree", "short", "rrs", "wor", "copy"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("per_node", [False, True])
def test_the_host_walk_draws_as_the_batched_walk(rule, dtype, per_node):
    """Row by row on the CPU (multi_draft_host) and batched: the same generator state gives the
    same outputs, draw for draw, rejections and residual draws included."""
    V, p, g, n = 4, 3, 3, 300
    rng = random.Random(11)
    models = [PositiveQ(V, 100 + m, same_prob=0.2) for m in range(3)]
    trees = [list(wor_drafts(model, (), p, g)) if rule == "wor" else None for model in models]
    cases = []
    for c in range(n):
        model, model_trees = models[c % 3], trees[c % 3]
        if rule == "wor":
            drafts = rng.choices([t for t, _ in model_trees], [w for _, w in model_trees])[0]
        else:
            drafts = tree_drafts(rule, (), V, p, g, c)
        cases.append(tensors(model, (), drafts))
    X, tp, q = (torch.stack(t) for t in zip(*cases))
    tp, q = tp.to(dtype), (None if rule in TREE_RULES else q.to(dtype))
    if rule == "copy":
        q[:, -1] = torch.nn.functional.one_hot(X[:, -1], V).to(dtype)
    laws, nodes = per_node_laws(X, tp) if per_node else (tp, None)
    wor = rule == "wor"
    batched = multi_draft._walk_batched(X, laws, torch.Generator().manual_seed(5), q, wor, nodes)
    host = multi_draft.walk_on_host(X, laws, torch.Generator().manual_seed(5), q, wor, nodes)
    for a, b in zip(batched, host):
        assert torch.equal(a, b)
    assert int(batched.num_accepted.max()) > 0 and int(batched.num_accepted.min()) < g  # both outcomes seen


def test_empty_drafts_sample_the_target():
    tp = torch.tensor([[[[0.0, 1.0]], [[0.0, 1.0]]]], dtype=F64)  # B=1, p=2, g=0
    res = multi_draft_verify(torch.zeros(1, 2, 0, dtype=torch.int64), tp, torch.Generator().manual_seed(0))
    assert res.num_accepted.tolist() == [0] and res.next_token.tolist() == [1]


def test_bad_inputs_raise():
    X = torch.zeros(1, 2, 2, dtype=torch.int64)
    tp = torch.full((1, 2, 3, 4), 0.25)
    with pytest.raises(ValueError, match="target_probs"):
        multi_draft_verify(X, tp[:, :, :2])
    with pytest.raises(ValueError, match="q must be"):
        multi_draft_verify(X, tp, q=torch.full((1, 2, 3, 4), 0.25))
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        multi_draft_verify(X + 4, tp)
    with pytest.raises(ValueError, match="integer"):
        multi_draft_verify(X.float(), tp)
    with pytest.raises(ValueError, match="without_replacement"):
        multi_draft_verify(X, tp, without_replacement=True)
    with pytest.raises(ValueError, match="nodes must be"):
        multi_draft_verify(X, tp[:, 0], nodes=torch.zeros(1, 2, 2, dtype=torch.int64))
    with pytest.raises(ValueError, match="one per tree node"):
        multi_draft_verify(X, tp, nodes=torch.zeros(1, 2, 3, dtype=torch.int64))
    with pytest.raises(ValueError, match="a token follows a -1"):
        multi_draft_verify(torch.tensor([[[0, 1], [-1, 2]]]), tp)
    with pytest.raises(ValueError, match=r"\[0, 4\), got range \[-1"):  # sampled drafts have every token
        multi_draft_verify(torch.tensor([[[0, 1], [1, -1]]]), tp, q=torch.full((1, 2, 2, 4), 0.25))
    with pytest.raises(ValueError, match=r"or -1 past .*got range \[-2"):
        multi_draft_verify(torch.tensor([[[0, 1], [1, -2]]]), tp)


def test_without_replacement_accepts_more_than_with():
    """Same number of distinct first tokens (a root with 2 children): removing the rejected child
    from q can only help (exact expected accepted length, drafts drawn by each drafter)."""
    model = PositiveQ(3, 5, same_prob=0.0)
    wor_trees = [(d, w) for d, w in wor_drafts(model, (), 2, 1)]
    iid_trees = list(iid_drafts(model, (), 2, 1))
    means = []
    for rule, cases in (("rrs", iid_trees), ("wor", wor_trees)):
        X, tp, q = (torch.stack(t) for t in zip(*(tensors(model, (), d) for d, _ in cases)))
        law = law_of(rule, X, tp, q)
        prob = torch.tensor([w for _, w in cases], dtype=F64)
        means.append(float((prob[:, None] * law.sum((1, 3)) * torch.arange(2, dtype=F64)).sum()))
    assert means[1] > means[0], means


def test_draw_categorical_follows_the_law_and_never_draws_probability_zero(monkeypatch):
    """The verifiers' inverse-CDF sampler: chi-square against the law (unnormalised rows), no
    zero-probability token even when the uniform lands on the total mass."""
    from scipy.stats import chisquare

    from draftlattice.verify._common import draw_categorical

    law = torch.tensor([0.0, 1.0, 0.0, 0.6, 0.4, 0.0], dtype=torch.float64)  # sums to 2
    x = draw_categorical(law.expand(40000, 6), torch.Generator().manual_seed(1))
    counts = torch.bincount(x, minlength=6)
    assert counts[law == 0].sum() == 0
    assert chisquare(counts[law > 0].numpy(), (law[law > 0] / 2 * 40000).numpy()).pvalue > 1e-3
    monkeypatch.setattr(torch, "rand", lambda *a, **k: torch.ones(a[0], a[1], dtype=k["dtype"]))
    assert draw_categorical(law[None]).tolist() == [4]  # the last token of positive mass
