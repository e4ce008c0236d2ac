""":func:`~.multi_draft.multi_draft_verify` walked row by row on the CPU.

The batched walk spends most of a step in tiny tensor operations on ``[B]`` masks and per-row
gathers, a few microseconds of dispatch each, hundreds of them a step. On the CPU, reading a
tensor costs nothing, so this walk reads the drafts and the node map once as Python lists, takes
each try's law values as numbers, and touches whole ``[V]`` rows only where the rule needs them
(a residual after a rejection, the draw of the next token). It is the same rule on the same
numbers: the uniforms are drawn up front in the batched walk's order (one block from the same
generator), acceptance is decided in the laws' dtype like the batched comparison, residuals and
draws go through the same functions. Given one generator state, both walks return the same result (the
fake-device tests compare them through the engine).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ._common import draw_categorical, residual_distribution, without_token


def walk_on_host(
    drafts: Tensor,
    target_probs: Tensor,
    generator: torch.Generator | None,
    q: Tensor | None,
    without_replacement: bool,
    nodes: Tensor | None,
) -> tuple[Tensor, Tensor, Tensor]:
    """``(best_draft, num_accepted, next_token)`` [B] int64 of the rule of
    :func:`~.multi_draft.multi_draft_verify` (arguments checked there, all on the CPU)."""
    B, p, g = drafts.shape
    tries = p if q is not None else 0
    # The batched walk draws, per depth j < g, one uniform per try (with q) then the next
    # token's, and one more at depth g, each a [B] draw: the same stream in one call.
    u = torch.rand(g * (tries + 1) + 1, B, generator=generator, dtype=target_probs.dtype).T.tolist()
    tokens = drafts.tolist()
    node_of = nodes.tolist() if nodes is not None else None
    ratio = _RATIO[target_probs.dtype]  # the caller walks float32 and float64 laws only
    out = [_walk_row(b, tokens[b], target_probs, node_of, q, without_replacement, u[b], tries, ratio) for b in range(B)]
    best, num, nxt = zip(*out)
    return tuple(torch.tensor(v, dtype=torch.int64) for v in (best, num, nxt))


def _walk_row(b, rows, target_probs, node_of, q, wor, u, tries, ratio) -> tuple[int, int, int]:
    """One batch row's walk: ``rows`` its drafts (lists), ``u`` its uniforms in draw order."""
    g = len(rows[0])
    live = list(range(len(rows)))

    def node_law(j: int) -> Tensor:  # the target's law at the node of the live rows, depth j
        first = live[0]
        return target_probs[b, node_of[b][first][j]] if node_of is not None else target_probs[b, first, j]

    for j in range(g):
        law = node_law(j)
        base = j * (tries + 1)
        u_next = u[base + tries]
        if q is None:  # tree rule: the draw picks the child, and is the next token where none matches
            child = _draw(law, u_next)
        else:
            child, law = _recursive_rejection(b, rows, live, j, law, q, wor, u[base : base + tries], ratio)
            if child is None:  # every live row rejected: the next token comes from the last residual
                return live[0], j, _draw(law, u_next)
        through = [r for r in live if rows[r][j] == child]
        if not through:
            return live[0], j, child
        live = through
    return live[0], g, _draw(node_law(g), u[g * (tries + 1)])  # every draft accepted


def _recursive_rejection(b, rows, live, j, law: Tensor, q: Tensor, wor: bool, u: list[float], ratio):
    """``(accepted token or None, law)`` at one node; ``law`` is the last residual where a try
    was rejected (the node's law otherwise)."""
    node_q = q[b, live[0], j] if wor else None
    tried: set[int] = set()
    for i in live:  # in index order
        x = rows[i][j]
        if wor:
            if x in tried:  # only a child's first row tries it
                continue
            tried.add(x)
        q_row = node_q if wor else q[b, i, j]
        if u[i] < _accept_prob(float(law[x]), float(q_row[x]), ratio):
            return x, law
        law = residual_distribution(law, q_row)
        if wor:
            node_q = without_token(node_q[None], torch.tensor([x]))[0]
    return None, law


# p(x) / q(x) rounded as the batched walk rounds it, in the laws' dtype.
_RATIO = {
    torch.float32: lambda px, qx: float(np.float32(px) / np.float32(qx)),
    torch.float64: lambda px, qx: px / qx,
}


def _accept_prob(px: float, qx: float, ratio) -> float:
    """min(1, p(x)/q(x)), as the batched walk computes it; 1 where q(x) = 0."""
    if px >= qx or qx <= 0:
        return 1.0
    return ratio(px, qx)


def _draw(law: Tensor, u: float) -> int:
    return int(draw_categorical(law[None], u=torch.tensor([[u]], dtype=law.dtype))[0])
