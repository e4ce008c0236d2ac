"""Cross-entropy through a frozen output layer without materialising [N, V] logits.

A draft head's loss is ``CE(softmax(W h), y)`` with the model's output layer ``W [V, d]`` (frozen,
V = 49,152 for the default model). Computing all logits of a batch in fp32 and keeping them for
the backward costs N x V x 4 bytes and most of a training step. :class:`ChunkedLinearCE` walks N
in chunks: each chunk's logits are computed in W's dtype (bf16 on AMX or a GPU), the softmax in
fp32, and the gradient with respect to ``h`` is formed right away (``(softmax - onehot) W``) and
kept ([N, d]); nothing of size V outlives a chunk. W gets no gradient.

On a CPU the two [N, d] x [d, V] matmuls still dominate a step. The candidate-set (sampled)
softmax (:func:`candidate_columns`, :func:`candidate_linear_ce`) replaces V by C, a few thousand
columns: the batch's target tokens and the corpus' most frequent tokens (each in the set with
probability Q = 1) plus ``negatives`` tokens drawn uniformly without replacement from the rest
(each with Q = negatives / rest). A candidate's logit is corrected by ``-log Q`` (Jean et al.
2015; Bengio & Senecal 2008), so the candidates' ``sum exp(o - log Q)`` is an unbiased
(Horvitz-Thompson) estimate of the full partition function. With every token a sure candidate
the loss and gradient are the full softmax's. The top-k hits it reports count ranks among the
candidates only (uncorrected logits), an upper bound of the full-softmax figure that
:mod:`.head_accuracy` measures.

Teacher mixing (``teacher`` and ``teacher_weight`` = lambda): head j's target is then
``(1 - lambda) onehot(y) + lambda softmax(W z')``, where ``z'`` is the trunk's own state that
predicts the same token (position ``t + j - 1``): the frozen model's whole next-token law, not only
its greedy token. A head that cannot be sure of ``y`` learns to rank the model's other likely
tokens next to it, which is what a top-k lattice draws on (soft-label distillation; Hinton et al.
2015, Medusa-2's self-distillation). The loss is the cross-entropy against that mixture
(``lse - sum q * logits``; with candidates, the teacher's law over the same corrected columns)
and its gradient ``(softmax - q) W``.

``row_weight [N]`` weighs each position's loss (the mean stays over all N; :mod:`.prefix_gate`),
and ``ranks`` (a list) receives each position's rank of its target (tokens strictly above it).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class CandidateSoftmax:
    """Options of the candidate-set softmax (see the module docstring).

    ``frequent``: how many of the corpus' most frequent target tokens are always candidates
    (2,048 cover 86% of the default model's distilled targets); ``negatives``: tokens sampled
    uniformly from the rest each step.
    """

    frequent: int = 2048
    negatives: int = 1024

    def __post_init__(self) -> None:
        for name in ("frequent", "negatives"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a non-negative int, got {value!r}")


class ChunkedLinearCE(torch.autograd.Function):
    """Mean CE of ``h [N, d] @ weight.T + bias`` against ``targets [N]`` (mixed with the law of
    ``teacher [N, d] @ weight.T + bias`` by ``teacher_weight`` when ``teacher`` is given);
    ``stats`` gets top-k hits.

    ``bias [C]`` (fp32, or None) enters the softmax only; ranks count the unbiased logits.
    """

    @staticmethod
    def forward(
        ctx,
        h: Tensor,
        weight: Tensor,
        targets: Tensor,
        bias: Tensor | None,
        chunk: int,
        ks: tuple[int, ...],
        stats: list,
        teacher: Tensor | None = None,
        teacher_weight: float = 0.0,
        row_weight: Tensor | None = None,
        ranks: list | None = None,
    ):
        n = h.shape[0]
        grad = torch.empty(h.shape, dtype=torch.float32, device=h.device)
        total = torch.zeros((), dtype=torch.float32, device=h.device)
        hits = torch.zeros(len(ks), dtype=torch.float32, device=h.device)
        w = weight.detach()
        for start in range(0, n, chunk):
            hc = h[start : start + chunk].detach().to(w.dtype)
            yc = targets[start : start + chunk]
            logits = (hc @ w.T).float()
            if ks or ranks is not None:
                gold = logits.gather(1, yc[:, None])
                rank = (logits > gold).sum(dim=1)  # tokens strictly above the gold one
                if ks:
                    hits += torch.stack([(rank < k).sum() for k in ks]).float()
                if ranks is not None:
                    ranks.append(rank)
            if bias is not None:
                logits += bias
            lse = torch.logsumexp(logits, dim=-1)
            probs = torch.exp(logits - lse[:, None])
            rw = None if row_weight is None else row_weight[start : start + chunk].float()
            if teacher is None:
                row_loss = lse - logits.gather(1, yc[:, None]).squeeze(1)
                probs.scatter_add_(1, yc[:, None], -torch.ones_like(lse)[:, None])
            else:
                target = (teacher[start : start + chunk].detach().to(w.dtype) @ w.T).float()
                if bias is not None:
                    target += bias
                target = torch.softmax(target, dim=-1).mul_(teacher_weight)
                target.scatter_add_(1, yc[:, None], torch.full_like(lse, 1.0 - teacher_weight)[:, None])
                row_loss = lse - (target * logits).sum(-1)
                probs -= target
            if rw is not None:
                row_loss = row_loss * rw
                probs *= rw[:, None]
            total += row_loss.sum()
            grad[start : start + chunk] = (probs.to(w.dtype) @ w).float()
        ctx.save_for_backward(grad / max(n, 1))
        ctx.input_dtype = h.dtype
        stats.append(hits.cpu() / max(n, 1))
        return total / max(n, 1)

    @staticmethod
    def backward(ctx, grad_output: Tensor):
        (grad,) = ctx.saved_tensors
        return (grad * grad_output).to(ctx.input_dtype), None, None, None, None, None, None, None, None, None, None


def check_teacher_weight(teacher_weight) -> float:
    """``teacher_weight`` as a float if it is a number in [0, 1]; ValueError otherwise."""
    if isinstance(teacher_weight, bool) or not isinstance(teacher_weight, (int, float)) or not 0 <= teacher_weight <= 1:
        raise ValueError(f"teacher_weight must be a number in [0, 1], got {teacher_weight!r}")
    return float(teacher_weight)


def _teacher_mix(h: Tensor, teacher: Tensor | None, teacher_weight) -> tuple[Tensor | None, float]:
    """``(teacher, weight)`` as :class:`ChunkedLinearCE` takes them (``(None, 0.0)``: hard targets)."""
    weight = check_teacher_weight(teacher_weight)
    if not weight:
        return None, 0.0
    if teacher is None or teacher.shape != h.shape:
        got = None if teacher is None else tuple(teacher.shape)
        raise ValueError(f"teacher_weight > 0 needs teacher states shaped like h {tuple(h.shape)}, got {got}")
    return teacher, weight


def _check_row_weight(row_weight: Tensor | None, targets: Tensor) -> None:
    if row_weight is not None and row_weight.shape != targets.shape:
        raise ValueError(
            f"row_weight must be shaped like targets {tuple(targets.shape)}, got {tuple(row_weight.shape)}"
        )


def chunked_linear_ce(
    h: Tensor,
    weight: Tensor,
    targets: Tensor,
    chunk: int = 1024,
    ks: tuple[int, ...] = (1,),
    teacher: Tensor | None = None,
    teacher_weight: float = 0.0,
    row_weight: Tensor | None = None,
    ranks: list | None = None,
) -> tuple[Tensor, list[float]]:
    """``(mean CE, [top-k accuracy for k in ks])`` of logits ``h @ weight.T`` (see module doc),
    against ``targets`` mixed with the law of ``teacher [N, d]`` by ``teacher_weight``, each row
    weighted by ``row_weight [N]``; ``ranks`` receives the targets' ranks (chunk by chunk)."""
    if h.ndim != 2 or targets.shape != h.shape[:1]:
        raise ValueError(f"h must be [N, d] and targets [N]; got {tuple(h.shape)} and {tuple(targets.shape)}")
    _check_row_weight(row_weight, targets)
    mix = _teacher_mix(h, teacher, teacher_weight)
    stats: list = []
    loss = ChunkedLinearCE.apply(h, weight, targets, None, chunk, tuple(ks), stats, *mix, row_weight, ranks)
    return loss, [float(v) for v in stats[0]]


def candidate_columns(
    targets: Tensor, vocab_size: int, frequent: Tensor, negatives: int, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """The candidate set of one step: ``(columns [C] int64, sorted; log_q [C] float32)``.

    ``targets`` (any shape) and ``frequent`` token ids are sure candidates (log Q = 0);
    ``negatives`` more are drawn uniformly without replacement from the other tokens
    (log Q = log(negatives / others)) with ``generator`` (CPU). Returned on ``targets``' device.
    """
    if frequent.numel() and (int(frequent.min()) < 0 or int(frequent.max()) >= vocab_size):
        raise ValueError(f"frequent token ids must be in [0, {vocab_size}), got {frequent.min()}..{frequent.max()}")
    sure = torch.zeros(vocab_size, dtype=torch.bool)
    sure[targets.reshape(-1).cpu()] = True
    sure[frequent.cpu()] = True
    others = (~sure).nonzero().squeeze(1)
    drawn = min(negatives, others.numel())
    sampled = others[torch.randperm(others.numel(), generator=generator)[:drawn]]
    log_q = torch.zeros(vocab_size, dtype=torch.float32)
    if drawn:
        log_q[sampled] = float(torch.log(torch.tensor(drawn / others.numel(), dtype=torch.float64)))
    sure[sampled] = True
    columns = sure.nonzero().squeeze(1)
    return columns.to(targets.device), log_q[columns].to(targets.device)


def candidate_linear_ce(
    h: Tensor,
    weight: Tensor,
    targets: Tensor,
    columns: Tensor,
    log_q: Tensor,
    chunk: int = 4096,
    ks: tuple[int, ...] = (1,),
    weight_columns: Tensor | None = None,
    teacher: Tensor | None = None,
    teacher_weight: float = 0.0,
    row_weight: Tensor | None = None,
    ranks: list | None = None,
) -> tuple[Tensor, list[float]]:
    """``(mean sampled-softmax CE, [top-k among the candidates])`` of ``h [N, d]`` over the
    candidate ``columns [C]`` of ``weight [V, d]`` with logits corrected by ``-log_q [C]``,
    against ``targets`` mixed with the law of ``teacher [N, d]`` over the same corrected columns
    by ``teacher_weight``, each row weighted by ``row_weight [N]``; ``ranks`` receives the
    targets' ranks among the candidates.

    Every target must be a candidate (:func:`candidate_columns` makes sure of it).
    ``weight_columns`` is ``weight[columns]`` when the caller has it (heads share it).
    """
    if h.ndim != 2 or targets.shape != h.shape[:1]:
        raise ValueError(f"h must be [N, d] and targets [N]; got {tuple(h.shape)} and {tuple(targets.shape)}")
    if columns.ndim != 1 or log_q.shape != columns.shape:
        raise ValueError(f"columns and log_q must be [C]; got {tuple(columns.shape)} and {tuple(log_q.shape)}")
    position = torch.searchsorted(columns, targets).clamp_(max=max(columns.numel() - 1, 0))
    if columns.numel() == 0 or not bool((columns[position] == targets).all()):
        raise ValueError("every target must be a candidate column (columns sorted and holding all targets)")
    _check_row_weight(row_weight, targets)
    mix = _teacher_mix(h, teacher, teacher_weight)
    w = weight_columns if weight_columns is not None else weight.detach()[columns]
    stats: list = []
    loss = ChunkedLinearCE.apply(h, w, position, -log_q.float(), chunk, tuple(ks), stats, *mix, row_weight, ranks)
    return loss, [float(v) for v in stats[0]]
