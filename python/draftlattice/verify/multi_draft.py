"""Lossless verification of several drafts at once: a deterministic token tree, i.i.d. drafts,
or a tree drawn without replacement.

Inputs (per batch row ``b``): ``p`` drafts of ``g`` tokens, ``drafts [B, p, g]``, and the
target's law after every draft prefix, ``target_probs [B, p, g+1, V]``: ``target_probs[b, i, j]``
is the target's distribution of the token after row ``i``'s first ``j`` tokens.  Rows that share
their first ``j`` tokens describe the same tree node; the verifiers read that node's law from the
**lowest-index** row through it (the other rows' copies are not read, so they must be equal
for the result to mean anything; a batched target forward over the rows gives equal copies).

Three rules, one function, :func:`multi_draft_verify`:

* ``q=None`` -- the drafts are a deterministic function of the context (e.g. the p best drafts
  of a rescored lattice).  Tree rule: at the root draw one token ``y`` from the target's law;
  if ``y`` is a child of the node (the next token of some row through it) the walk descends,
  otherwise ``y`` is the next token; at depth ``g`` the draw is the next token.  The output is a
  plain sample of the target, for any fixed tree; the expected number of accepted tokens is the
  target mass the tree covers. Drafts may end early (``-1`` past a draft's length, e.g. a tree of
  a lattice's best prefixes): a node no live row continues has no child, so its draw is the next
  token, and a law past a row's length is never read.
* ``q [B, p, g, V]`` -- the rows are independent samples of the drafter's law:
  row ``i``'s token ``j`` was drawn from ``q[b, i, j]``, the drafter's law given row ``i``'s first
  ``j`` tokens (with replacement: rows may coincide). Rows may come from different laws, as long
  as each row is drawn independently of the others given the context: e.g. i.i.d. sampled rows
  and a row copied from the context, whose law is one-hot; every try is judged against the law
  of the row that drew it.  Rule: recursive rejection sampling
  (SpecInfer's multi-round speculative sampling; Miao et al. 2024, Jeon et al. 2024 "with
  replacement") at every node: with ``p_1`` the target's law there and the node's live rows in
  index order, try each live row's token ``x``, drawn from that row's ``q_r``: accept with
  ``min(1, p_r(x) / q_r(x))`` (the walk descends into ``x`` with every live row whose token is
  ``x``), else ``p_{r+1} = normalize(max(p_r - q_r, 0))`` (``p_r`` itself if that is empty); if
  every live row is rejected, the next token is drawn from the last ``p_r``.  At depth ``g``
  the next token comes from the target's law.  The live rows' tokens at a node are independent
  draws from their laws given the node (their selection depends only on earlier tokens), so
  each try is one speculative sampling step against the current residual and every node's
  output is exactly the target's law there: the whole rule is lossless.
* ``q`` with ``without_replacement=True`` -- the rows form a tree whose nodes' children were
  drawn without replacement: at every node, the distinct tokens its rows take next (its
  children, in order of first appearance by row index) were drawn one after another from ``q``
  at the node with the earlier children removed and the rest renormalised, and the number of
  children of a node does not depend on the drawn tokens (a fixed branching schedule, e.g. row
  ``i`` copies the prefix of an earlier row up to a fixed depth, then draws a new token there
  excluding its siblings, then continues from ``q``). Rule: recursive rejection sampling without
  replacement (Jeon et al. 2024, "Recursive Speculative Decoding"): the children are tried in
  order, child ``m`` accepted with ``min(1, p_m(x) / q_m(x))``; on rejection ``p_{m+1} =
  normalize(max(p_m - q_m, 0))`` and ``q_{m+1}`` is ``q_m`` with ``x`` removed, renormalised.

All return :class:`MultiDraftResult` ``(best_draft, num_accepted, next_token)``: the output is
``drafts[b, best_draft, :num_accepted]`` then ``next_token``, ``best_draft`` the lowest-index
row through the last accepted node.  :func:`multi_draft_verify_distribution` is the exact law
``Pr(best_draft = i, num_accepted = k, next_token = y)`` of the same rule, ``[B, p, g+1, V]``.
Randomness comes only from ``generator``; the number of draws does not depend on the outcome.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ._common import draw_categorical, may_hold, residual_distribution, uniforms, without_token
from .multi_draft_host import walk_on_host

__all__ = ["MultiDraftResult", "multi_draft_verify", "multi_draft_verify_distribution"]

# Batches up to this many rows are walked row by row on the CPU (:mod:`.multi_draft_host`):
# per row it costs a fraction of the batched walk's fixed per-step dispatch, which larger
# batches share (a decoding step's batch is a handful of rows; tests walk thousands at once).
HOST_WALK_MAX_ROWS = 64


class MultiDraftResult(NamedTuple):
    best_draft: Tensor  #: [B] int64, lowest-index row through the last accepted node
    num_accepted: Tensor  #: [B] int64, accepted draft tokens (0..g)
    next_token: Tensor  #: [B] int64, the token after them


def _check(
    drafts: Tensor,
    target_probs: Tensor,
    q: Tensor | None,
    without_replacement: bool = False,
    nodes: Tensor | None = None,
) -> tuple[int, int, int, int]:
    if without_replacement and q is None:
        raise ValueError("without_replacement needs q (the law the children were drawn from)")
    laws = "[B, N, V] (one per tree node, with nodes)" if nodes is not None else "[B, p, g+1, V]"
    if drafts.dim() != 3 or target_probs.dim() != (3 if nodes is not None else 4):
        raise ValueError(
            f"expected drafts [B, p, g] and target_probs {laws}, got {tuple(drafts.shape)} and {tuple(target_probs.shape)}"
        )
    B, p, g = drafts.shape
    V = target_probs.shape[-1]
    if nodes is not None:
        if nodes.shape != (B, p, g + 1) or target_probs.shape[0] != B or p < 1:
            raise ValueError(
                f"nodes must be [B, p, g+1] = [{B}, {p}, {g + 1}] over target_probs [{B}, N, V], "
                f"got {tuple(nodes.shape)} and {tuple(target_probs.shape)}"
            )
    elif target_probs.shape != (B, p, g + 1, V) or p < 1:
        raise ValueError(
            f"target_probs must be [B, p, g+1, V] = [{B}, {p}, {g + 1}, V] with p >= 1, got {tuple(target_probs.shape)}"
        )
    if q is not None and q.shape != (B, p, g, V):
        raise ValueError(f"q must be [B, p, g, V] = [{B}, {p}, {g}, {V}], got {tuple(q.shape)}")
    if drafts.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"drafts must hold integer token ids, got {drafts.dtype}")
    low = -1 if q is None else 0  # the tree rule's drafts may end early: -1 past their length
    if drafts.numel() and (int(drafts.min()) < low or int(drafts.max()) >= V):
        raise ValueError(
            f"draft token ids must be in [0, {V})"
            + (" (or -1 past a deterministic draft's end)" if q is None else "")
            + f", got range [{int(drafts.min())}, {int(drafts.max())}]"
        )
    if q is None and drafts.numel() and bool((drafts[..., 1:] >= 0).logical_and(drafts[..., :-1] < 0).any()):
        raise ValueError("a draft's -1 padding must come after its tokens (a token follows a -1)")
    return B, p, g, V


def _row_law(x: Tensor, row: Tensor, j: int) -> Tensor:
    """x[b, row[b], j, :] for x [B, p, n, V] and row [B]."""
    B, _, _, V = x.shape
    return x[:, :, j].gather(1, row.view(B, 1, 1).expand(B, 1, V)).squeeze(-2)


class _NodeLaw:
    """A law at every batch row's current node, ``x[b, row[b], j, :]`` of ``x [B, p, n, V]``
    (or ``x[b, nodes[b, row[b], j], :]`` of per-node laws ``x [B, N, V]``).

    Recursive rejection reads it at the tried tokens only, until a rejection replaces it by a
    residual; the whole ``[B, V]`` rows are gathered only then, or for a draw from it. Most tries
    are accepted, so most nodes never touch V entries.
    """

    def __init__(self, x: Tensor, row: Tensor, j: int, nodes: Tensor | None = None) -> None:
        self.x, self.row, self.j = x, row, j
        self.batch = torch.arange(row.shape[0], device=row.device)
        self.node = None if nodes is None else nodes[self.batch, row, j]
        self._rows: Tensor | None = None

    def at(self, tokens: Tensor) -> Tensor:
        """The law's values at ``tokens [B]``, ``[B]``."""
        if self._rows is not None:
            return self._rows.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
        if self.node is not None:
            return self.x[self.batch, self.node, tokens]
        return self.x[self.batch, self.row, self.j, tokens]

    @property
    def rows(self) -> Tensor:
        """The law, ``[B, V]``."""
        if self._rows is None:
            self._rows = _row_law(self.x, self.row, self.j) if self.node is None else self.x[self.batch, self.node]
        return self._rows

    @rows.setter
    def rows(self, value: Tensor) -> None:
        self._rows = value


def _accept_prob(px: Tensor, qx: Tensor) -> Tensor:
    """min(1, p(x)/q(x)) from the laws' values at the tried tokens, 1 where q(x) = 0 (a token
    the drafter cannot draw), [B]."""
    return torch.where(px >= qx, torch.ones_like(px), px / torch.where(qx > 0, qx, torch.ones_like(qx)))


def multi_draft_verify(
    drafts: Tensor,
    target_probs: Tensor,
    generator: torch.Generator | None = None,
    q: Tensor | None = None,
    without_replacement: bool = False,
    nodes: Tensor | None = None,
) -> MultiDraftResult:
    """Verifies ``p`` drafts per batch row losslessly (see the module docstring for both rules).

    Args:
        drafts: [B, p, g] int token ids (with ``q=None``, -1 past a draft's length).
        target_probs: [B, p, g+1, V] target's law after each row's first j tokens; with
            ``nodes``, [B, N, V]: one law per node of the drafts' token tree.
        generator: ``torch.Generator`` on the tensors' device (None: the global one).
        q: None (deterministic drafts: tree rule) or [B, p, g, V] (i.i.d. rows: recursive
            rejection sampling).
        without_replacement: with q, the rows' children were drawn without replacement (module
            docstring); the rule removes each rejected child from q.
        nodes: [B, p, g+1] int64, the tree node of row i's first j tokens (a tree verified in
            one forward: its laws are read where they are, not copied per row).
    Returns:
        MultiDraftResult (best_draft [B], num_accepted [B], next_token [B]), int64.
    """
    B, p, g, _ = _check(drafts, target_probs, q, without_replacement, nodes)
    on_host = target_probs.device.type == "cpu" and target_probs.dtype in (torch.float32, torch.float64)
    if on_host and B <= HOST_WALK_MAX_ROWS and (q is None or q.dtype == target_probs.dtype):
        return MultiDraftResult(*walk_on_host(drafts, target_probs, generator, q, without_replacement, nodes))
    return _walk_batched(drafts, target_probs, generator, q, without_replacement, nodes)


def _walk_batched(drafts, target_probs, generator, q, without_replacement, nodes) -> MultiDraftResult:
    """The rule for every batch row at once, in tensor operations: on an accelerator nothing is
    read back to the host (the CPU walks row by row, :mod:`.multi_draft_host`)."""
    B, p, g = drafts.shape
    device = target_probs.device
    drafts = drafts.to(torch.int64)
    live = torch.ones(B, p, dtype=torch.bool, device=device)  # rows through the current node
    walking = torch.ones(B, dtype=torch.bool, device=device)
    num = torch.zeros(B, dtype=torch.int64, device=device)
    nxt = torch.zeros(B, dtype=torch.int64, device=device)
    for j in range(g + 1):
        first = live.to(torch.int8).argmax(-1)  # lowest-index live row
        law = _NodeLaw(target_probs, first, j, nodes)
        child = None
        if j < g and q is not None:
            child = _recursive_rejection(drafts[:, :, j], live, law, q, first, j, generator, without_replacement)
        # The next token's uniform is drawn at every node, needed or not: the number of draws
        # does not depend on the outcome. The draw itself is made only where a row stops.
        u = uniforms(B, generator, device, target_probs.dtype)
        if j == g:
            if may_hold(walking):
                nxt = torch.where(walking, draw_categorical(law.rows, u=u), nxt)
            break
        tree_rule = child is None
        if tree_rule:  # the draw itself picks the child, and is the next token where none matches
            child = draw_categorical(law.rows, u=u)
        match = live & (drafts[:, :, j] == child.unsqueeze(-1))
        descend = walking & match.any(-1)
        stop = walking & ~descend
        if may_hold(stop):
            nxt = torch.where(stop, child if tree_rule else draw_categorical(law.rows, u=u), nxt)
        live = torch.where(descend.unsqueeze(-1), match, live)
        num += descend.to(torch.int64)
        walking = descend
    best = live.to(torch.int8).argmax(-1)
    return MultiDraftResult(best, num, nxt)


def _recursive_rejection(
    tokens: Tensor, live: Tensor, law: _NodeLaw, q: Tensor, first: Tensor, j: int, generator, without_replacement: bool
) -> Tensor:
    """One node (depth ``j``, lowest live row ``first``) of recursive rejection sampling for every
    batch row: the accepted token [B], -1 where every live row was rejected. Each try is judged
    against the law of the row that drew it (``q[b, i, j]``; without replacement, the node's
    law with the rejected children removed). ``law`` becomes the law of the next token for the
    rows that reject everything (the last residual)."""
    B, p = tokens.shape
    accepted = torch.full((B,), -1, dtype=torch.int64, device=tokens.device)
    node_q = _NodeLaw(q, first, j) if without_replacement else None
    for i in range(p):
        trying = live[:, i] & (accepted < 0)
        x = tokens[:, i]
        if without_replacement:  # only a child's first row tries it
            earlier = live[:, :i] & (tokens[:, :i] == x.unsqueeze(-1))
            trying &= ~earlier.any(-1)
            q_law = node_q
        else:
            q_law = _NodeLaw(q, torch.full_like(first, i), j)
        a = _accept_prob(law.at(x), q_law.at(x))
        u = torch.rand(B, generator=generator, device=tokens.device, dtype=a.dtype)
        ok = trying & (u < a)
        accepted = torch.where(ok, x, accepted)
        rejected = trying & ~ok
        if not may_hold(rejected):  # every row accepted or stopped trying: the laws stay
            continue
        rejected = rejected.unsqueeze(-1)
        p_rows, q_rows = law.rows, q_law.rows
        law.rows = torch.where(rejected, residual_distribution(p_rows, q_rows), p_rows)
        if without_replacement:
            q_law.rows = torch.where(rejected, without_token(q_rows, x), q_rows)
    return accepted


def multi_draft_verify_distribution(
    drafts: Tensor, target_probs: Tensor, q: Tensor | None = None, without_replacement: bool = False
) -> Tensor:
    """Exact law of :func:`multi_draft_verify`'s output given the drafts, ``[B, p, g+1, V]``:
    ``P[b, i, k, y] = Pr(best_draft = i, num_accepted = k, next_token = y)``.

    Computed node by node over each row's draft tree (at most ``1 + p*g`` nodes, a loop in
    Python over nodes and rows: meant for tests and small inputs)."""
    B, p, g, V = _check(drafts, target_probs, q, without_replacement)
    out = torch.zeros(B, p, g + 1, V, dtype=target_probs.dtype, device=target_probs.device)
    rows = drafts.to(torch.int64).tolist()
    for b in range(B):
        q_b = None if q is None else q[b]
        _node_law(out[b], rows[b], target_probs[b], q_b, list(range(p)), 0, 1.0, without_replacement)
    return out


def _node_law(out: Tensor, rows: list, tp: Tensor, q: Tensor | None, live: list[int], j: int, mass, wor: bool) -> None:
    """Adds the law of the walk from the node (live rows, depth j), reached with ``mass``."""
    g = len(rows[0])
    first = live[0]
    law = tp[first, j]
    if j == g:
        out[first, g] += mass * law
        return
    through = {}
    for r in live:
        through.setdefault(rows[r][j], []).append(r)
    if q is None:  # the target's draw picks the child; a non-child draw is the next token
        rest = law.clone()
        for x, sub in through.items():
            if x < 0:  # drafts that end here: no child
                continue
            _node_law(out, rows, tp, q, sub, j + 1, mass * law[x], wor)
            rest[x] = 0
        out[first, j] += mass * rest
        return
    q_node = q[first, j]
    reach = mass
    # Children once (without replacement, against the node's law), or every row against its own.
    tried = [through[x][0] for x in through] if wor else live
    for r in tried:  # recursive rejection: try them in order
        x = rows[r][j]
        idx = torch.tensor([x], device=law.device)
        q_try = q_node if wor else q[r, j]
        a = _accept_prob(law[idx], q_try[idx])[0]
        if a > 0:
            _node_law(out, rows, tp, q, through[x], j + 1, reach * a, wor)
        reach = reach * (1 - a)
        law = residual_distribution(law, q_try)
        if wor:
            q_node = without_token(q_node[None], idx)[0]
    out[first, j] += reach * law
