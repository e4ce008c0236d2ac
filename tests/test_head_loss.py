"""The heads' losses: chunked full-softmax CE and the candidate-set (sampled) softmax."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from draftlattice.training.head_loss import (
    CandidateSoftmax,
    candidate_columns,
    candidate_linear_ce,
    chunked_linear_ce,
)

V, D, N = 97, 12, 40


@pytest.fixture
def problem():
    g = torch.Generator().manual_seed(0)
    weight = torch.randn(V, D, generator=g, dtype=torch.float64)
    h = torch.randn(N, D, generator=g, dtype=torch.float64)
    targets = torch.randint(0, V, (N,), generator=g)
    return h, weight, targets


def reference(h, weight, targets, columns=None, log_q=None):
    """Autograd through explicit logits: F.cross_entropy over the (corrected) candidate columns."""
    h = h.detach().clone().requires_grad_(True)
    if columns is None:
        loss = F.cross_entropy(h @ weight.T, targets)
    else:
        position = torch.searchsorted(columns, targets)
        loss = F.cross_entropy(h @ weight[columns].T - log_q.double(), position)
    loss.backward()
    return loss.detach(), h.grad


def test_chunked_ce_equals_full_ce(problem):
    h, weight, targets = problem
    h = h.clone().requires_grad_(True)
    loss, (top1, top5) = chunked_linear_ce(h, weight, targets, chunk=7, ks=(1, 5))
    loss.backward()
    want_loss, want_grad = reference(h, weight, targets)
    torch.testing.assert_close(loss.double(), want_loss)
    torch.testing.assert_close(h.grad, want_grad, rtol=1e-5, atol=1e-6)
    rank = ((h @ weight.T) > (h @ weight.T).gather(1, targets[:, None])).sum(1)
    assert top1 == pytest.approx(float((rank < 1).double().mean()))
    assert top5 == pytest.approx(float((rank < 5).double().mean()))


def test_candidate_ce_over_the_whole_vocabulary_is_full_ce(problem):
    h, weight, targets = problem
    columns, log_q = candidate_columns(targets, V, torch.arange(V), 10, torch.Generator().manual_seed(1))
    assert torch.equal(columns, torch.arange(V)) and torch.equal(log_q, torch.zeros(V))
    h = h.clone().requires_grad_(True)
    loss, (top1,) = candidate_linear_ce(h, weight, targets, columns, log_q, chunk=9)
    loss.backward()
    want_loss, want_grad = reference(h, weight, targets)
    torch.testing.assert_close(loss.double(), want_loss)
    torch.testing.assert_close(h.grad, want_grad, rtol=1e-5, atol=1e-6)
    assert top1 == pytest.approx(chunked_linear_ce(h.detach(), weight, targets)[1][0])


def test_candidate_set_holds_targets_frequent_and_corrected_negatives(problem):
    h, weight, targets = problem
    frequent = torch.tensor([0, 1, 2, 3])
    columns, log_q = candidate_columns(targets, V, frequent, 15, torch.Generator().manual_seed(2))
    sure = set(targets.tolist()) | set(frequent.tolist())
    assert torch.all(columns[1:] > columns[:-1])  # sorted, unique
    assert sure <= set(columns.tolist())
    assert len(columns) == len(sure) + 15
    q = 15 / (V - len(sure))
    for c, lq in zip(columns.tolist(), log_q.tolist()):
        assert lq == (0.0 if c in sure else pytest.approx(math.log(q)))
    # Fewer tokens left than negatives asked: all of them, each sure (log Q = 0).
    columns, log_q = candidate_columns(targets, V, frequent, 10 * V, torch.Generator().manual_seed(2))
    assert torch.equal(columns, torch.arange(V)) and torch.equal(log_q, torch.zeros(V))
    # The same generator state draws the same negatives (a resumed run sees the same sets).
    a = candidate_columns(targets, V, frequent, 15, torch.Generator().manual_seed(3))[0]
    b = candidate_columns(targets, V, frequent, 15, torch.Generator().manual_seed(3))[0]
    assert torch.equal(a, b)


def test_candidate_ce_gradient_is_the_corrected_sampled_softmax(problem):
    h, weight, targets = problem
    columns, log_q = candidate_columns(targets, V, torch.tensor([5, 6]), 20, torch.Generator().manual_seed(4))
    h = h.clone().requires_grad_(True)
    loss, _ = candidate_linear_ce(h, weight, targets, columns, log_q, chunk=16)
    loss.backward()
    want_loss, want_grad = reference(h, weight, targets, columns, log_q)
    torch.testing.assert_close(loss.double(), want_loss)
    torch.testing.assert_close(h.grad, want_grad, rtol=1e-5, atol=1e-6)


def test_candidate_softmax_partition_estimate_is_unbiased(problem):
    """E[sum over candidates of exp(o - log Q)] is the full partition function (Horvitz-Thompson)."""
    h, weight, targets = problem
    logits = (h[:1] @ weight.T).squeeze(0)
    sums = []
    for seed in range(3000):
        columns, log_q = candidate_columns(
            targets[:1], V, torch.tensor([7, 8]), 12, torch.Generator().manual_seed(seed)
        )
        sums.append(float(torch.exp(logits[columns] - log_q.double()).sum()))
    mean = sum(sums) / len(sums)
    assert mean == pytest.approx(float(torch.exp(logits).sum()), rel=0.05)


def test_candidate_ce_refuses_a_target_outside_the_set(problem):
    h, weight, targets = problem
    columns = torch.tensor(sorted(set(range(V)) - {int(targets[0])}))
    with pytest.raises(ValueError, match="every target must be a candidate"):
        candidate_linear_ce(h, weight, targets, columns, torch.zeros(len(columns)))
    with pytest.raises(ValueError, match="non-negative"):
        CandidateSoftmax(negatives=-1)


def soft_reference(h, weight, targets, teacher, lam, columns=None, log_q=None):
    """Autograd through explicit logits: cross-entropy against (1 - lam) onehot + lam teacher law,
    both over the (corrected) candidate columns."""
    h = h.detach().clone().requires_grad_(True)
    w = weight if columns is None else weight[columns]
    bias = 0 if columns is None else -log_q.double()
    y = targets if columns is None else torch.searchsorted(columns, targets)
    q = lam * torch.softmax(teacher @ w.T + bias, -1) + (1 - lam) * F.one_hot(y, w.shape[0]).double()
    loss = -(q * torch.log_softmax(h @ w.T + bias, -1)).sum(-1).mean()
    loss.backward()
    return loss.detach(), h.grad


@pytest.mark.parametrize("lam", [0.3, 1.0])
def test_teacher_mixed_ce_is_the_cross_entropy_against_the_mixture(problem, lam):
    h, weight, targets = problem
    teacher = torch.randn(N, D, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    x = h.clone().requires_grad_(True)
    loss, _ = chunked_linear_ce(x, weight, targets, chunk=7, teacher=teacher, teacher_weight=lam)
    loss.backward()
    want_loss, want_grad = soft_reference(h, weight, targets, teacher, lam)
    torch.testing.assert_close(loss.double(), want_loss, rtol=1e-6, atol=0)  # summed in float32
    torch.testing.assert_close(x.grad, want_grad, rtol=1e-5, atol=1e-6)
    columns, log_q = candidate_columns(targets, V, torch.tensor([5, 6]), 20, torch.Generator().manual_seed(4))
    x = h.clone().requires_grad_(True)
    loss, _ = candidate_linear_ce(x, weight, targets, columns, log_q, chunk=16, teacher=teacher, teacher_weight=lam)
    loss.backward()
    want_loss, want_grad = soft_reference(h, weight, targets, teacher, lam, columns, log_q)
    torch.testing.assert_close(loss.double(), want_loss, rtol=1e-6, atol=0)  # summed in float32
    torch.testing.assert_close(x.grad, want_grad, rtol=1e-5, atol=1e-6)


def test_teacher_weight_needs_teacher_states_of_hs_shape(problem):
    h, weight, targets = problem
    with pytest.raises(ValueError, match="teacher_weight must be a number in \\[0, 1\\], got 1.5"):
        chunked_linear_ce(h, weight, targets, teacher=h, teacher_weight=1.5)
    with pytest.raises(ValueError, match="needs teacher states shaped like h"):
        chunked_linear_ce(h, weight, targets, teacher_weight=0.5)
    with pytest.raises(ValueError, match="needs teacher states shaped like h"):
        chunked_linear_ce(h, weight, targets, teacher=h[:3], teacher_weight=0.5)
    # 0 reads no teacher: the hard-target loss
    torch.testing.assert_close(
        chunked_linear_ce(h, weight, targets, teacher=h, teacher_weight=0.0)[0],
        chunked_linear_ce(h, weight, targets)[0],
    )


def test_row_weights_scale_each_positions_loss_and_gradient_and_ranks_come_out(problem):
    h, weight, targets = problem
    row_weight = torch.rand(N, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    x = h.clone().requires_grad_(True)
    ranks: list = []
    loss, _ = chunked_linear_ce(x, weight, targets, chunk=7, row_weight=row_weight, ranks=ranks)
    loss.backward()
    y = h.clone().requires_grad_(True)
    want = (F.cross_entropy(y @ weight.T, targets, reduction="none") * row_weight).mean()
    want.backward()
    torch.testing.assert_close(loss.double(), want.detach(), rtol=1e-6, atol=0)
    torch.testing.assert_close(x.grad, y.grad, rtol=1e-5, atol=1e-6)
    logits = h @ weight.T
    assert torch.equal(torch.cat(ranks), (logits > logits.gather(1, targets[:, None])).sum(1))
    columns, log_q = candidate_columns(targets, V, torch.arange(V), 0, torch.Generator().manual_seed(1))
    z = h.clone().requires_grad_(True)
    loss, _ = candidate_linear_ce(z, weight, targets, columns, log_q, chunk=9, row_weight=row_weight)
    loss.backward()
    torch.testing.assert_close(z.grad, y.grad, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="row_weight must be shaped like targets"):
        chunked_linear_ce(h, weight, targets, row_weight=row_weight[:3])
