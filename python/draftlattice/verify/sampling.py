"""Speculative sampling verifiers: token verification and block verification.

Notation (Leviathan et al. 2023; Chen et al. 2023; Sun et al. 2024, "Block Verification
Accelerates Speculative Decoding"): draft tokens ``X_1..X_g`` (``draft_tokens [B, g]``), the
drafter's distributions ``q_i`` at each draft position (``q [B, g, V]``, ``q[:, i-1] = q_i``,
the distribution ``X_i`` was sampled from), the target's distributions ``p_1..p_{g+1}``
(``p [B, g+1, V]``, ``p[:, i-1] = p_i`` given the context and ``X_1..X_{i-1}``).  Both are
probabilities (see :func:`sampling_distribution` for temperature / top-k / top-p).

Per-row draft lengths: ``lengths [B]`` (default ``g``); positions past a row's length are
padding and ignored, and the last real position plays the role of ``g`` (``p[:, L]`` is then
``p_{L+1}``, the distribution after the full draft).

Each verifier returns ``(num_accepted [B], next_token [B])``: the output is
``X_1..X_{num_accepted}`` followed by ``next_token``.  Randomness comes only from ``generator``
(a ``torch.Generator`` on the tensors' device; ``None`` uses the global one).  The deterministic
parts are public: :func:`token_accept_probs`, :func:`block_accept_probs`,
:func:`residual_distribution` and the exact output laws :func:`token_verify_distribution` and
:func:`block_verify_distribution`.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ._common import _as_lengths, draw_categorical, residual_distribution

__all__ = [
    "token_accept_probs",
    "token_verify",
    "token_verify_distribution",
    "BlockProbs",
    "block_accept_probs",
    "block_verify",
    "block_verify_distribution",
]


def _check(draft_tokens: Tensor, q: Tensor, p: Tensor) -> tuple[int, int, int]:
    B, g = draft_tokens.shape
    V = p.shape[-1]
    if q.shape != (B, g, V) or p.shape != (B, g + 1, V):
        raise ValueError(
            f"expected draft_tokens [B, g], q [B, g, V], p [B, g+1, V]; got "
            f"{tuple(draft_tokens.shape)}, {tuple(q.shape)}, {tuple(p.shape)}"
        )
    return B, g, V


def _at(x: Tensor, idx: Tensor) -> Tensor:
    """x[b, idx[b], :] for x [B, n, V] and idx [B]."""
    B, _, V = x.shape
    return x.gather(1, idx.view(B, 1, 1).expand(B, 1, V)).squeeze(1)


def _sample(dist: Tensor, generator: torch.Generator | None) -> Tensor:
    return draw_categorical(dist, generator)


def _draft_probs(draft_tokens: Tensor, q: Tensor, p: Tensor) -> tuple[Tensor, Tensor]:
    g = draft_tokens.shape[1]
    idx = draft_tokens.unsqueeze(-1)
    return p[:, :g].gather(-1, idx).squeeze(-1), q.gather(-1, idx).squeeze(-1)


# ----------------------------------------------------------------------------- token verification


def token_accept_probs(draft_tokens: Tensor, q: Tensor, p: Tensor) -> Tensor:
    """``a_i = min(1, p_i(X_i) / q_i(X_i))`` for i = 1..g, ``[B, g]`` (1 where ``q_i(X_i) = 0``).

    ``p`` may be ``[B, g+1, V]`` or ``[B, g, V]`` (only ``p_1..p_g`` are used).
    """
    px, qx = _draft_probs(draft_tokens, q, p)
    return torch.where(px >= qx, torch.ones_like(px), px / torch.where(qx > 0, qx, torch.ones_like(qx)))


def token_verify_distribution(draft_tokens: Tensor, q: Tensor, p: Tensor, lengths: Tensor | None = None) -> Tensor:
    """Exact law of token verification's output: ``P[b, k, y] = Pr(num_accepted = k, next = y)``,
    ``[B, g+1, V]``, given the drafts.  ``Pr(k) = a_1..a_k (1 - a_{k+1})`` for ``k < L`` with next
    token from ``residual_distribution(p_{k+1}, q_{k+1})``; ``Pr(L) = a_1..a_L`` with next token
    from ``p_{L+1}``."""
    B, g, V = _check(draft_tokens, q, p)
    L = _as_lengths(lengths, (B,), g, p.device)
    a = token_accept_probs(draft_tokens, q, p)
    pos = torch.arange(g, device=p.device)
    a = torch.where(pos < L.unsqueeze(-1), a, torch.zeros_like(a))
    reach = torch.cat([torch.ones_like(a[:, :1]), a.cumprod(-1)], dim=-1)  # Pr(num >= k), k=0..g
    stop = torch.cat([1 - a, torch.ones_like(a[:, :1])], dim=-1)  # stop at k
    pk = reach * stop
    pk = torch.where(torch.arange(g + 1, device=p.device) <= L.unsqueeze(-1), pk, torch.zeros_like(pk))
    dist = torch.cat([residual_distribution(p[:, :g], q), p[:, g:]], dim=1)  # [B, g+1, V]
    last = torch.arange(g + 1, device=p.device) == L.unsqueeze(-1)  # k = L: from p_{L+1}
    dist = torch.where(last.unsqueeze(-1), p, dist)
    return pk.unsqueeze(-1) * dist


def token_verify(
    draft_tokens: Tensor,
    q: Tensor,
    p: Tensor,
    generator: torch.Generator | None = None,
    lengths: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Token verification (speculative sampling; Leviathan et al. 2023, Chen et al. 2023).

    Accept ``X_i`` with probability ``min(1, p_i(X_i)/q_i(X_i))`` until the first rejection; the
    extra token is drawn from ``normalize(max(p_i - q_i, 0))`` at the rejected position ``i``, or
    from ``p_{g+1}`` when all are accepted.  Returns ``(num_accepted [B], next_token [B])``.
    """
    B, g, V = _check(draft_tokens, q, p)
    L = _as_lengths(lengths, (B,), g, p.device)
    a = token_accept_probs(draft_tokens, q, p)
    u = torch.rand(B, g, generator=generator, device=p.device, dtype=a.dtype)
    ok = (u < a) & (torch.arange(g, device=p.device) < L.unsqueeze(-1))
    num = ok.to(torch.int64).cumprod(-1).sum(-1)
    rejected = num < L
    p_at = _at(p, num)
    q_at = _at(q, num.clamp(max=g - 1)) * rejected.unsqueeze(-1).to(q.dtype)  # q = 0 -> p_{L+1}
    return num, _sample(residual_distribution(p_at, q_at), generator)


# ----------------------------------------------------------------------------- block verification


class BlockProbs(NamedTuple):
    """Deterministic quantities of block verification (Sun et al. 2024, Algorithm 2)."""

    w: Tensor  #: [B, g+1], w[:, i] = w_i; w_0 = 1, w_i = min(w_{i-1} p_i(X_i)/q_i(X_i), 1)
    h: Tensor  #: [B, g], h[:, i-1] = h_i; h_i = S_i/(S_i + (1 - w_i)) for i < L, h_L = w_L, 0 past L


def block_accept_probs(draft_tokens: Tensor, q: Tensor, p: Tensor, lengths: Tensor | None = None) -> BlockProbs:
    """``w_i`` and ``h_i`` of block verification.

    ``S_i = sum_x max(w_i p_{i+1}(x) - q_{i+1}(x), 0)``; ``h_i = S_i / (S_i + (1 - w_i))`` with
    the denominator summed in that order, ``0/0 -> 1``, clamped to [0, 1]; ``h_L = w_L``.
    Memory: one ``[B, g-1, V]`` temporary.
    """
    B, g, V = _check(draft_tokens, q, p)
    L = _as_lengths(lengths, (B,), g, p.device)
    px, qx = _draft_probs(draft_tokens, q, p)
    ws = [torch.ones_like(px[:, 0])]
    for i in range(g):  # loop over g only
        r = ws[-1] * px[:, i]
        ws.append(
            torch.where(r >= qx[:, i], torch.ones_like(r), r / torch.where(qx[:, i] > 0, qx[:, i], torch.ones_like(r)))
        )
    w = torch.stack(ws, dim=1)  # [B, g+1]
    S = torch.zeros(B, g, dtype=p.dtype, device=p.device)
    if g > 1:
        t = p[:, 1:g] * w[:, 1:g].unsqueeze(-1)
        t.sub_(q[:, 1:g]).clamp_(min=0)
        S[:, : g - 1] = t.sum(-1)
        del t
    wi = w[:, 1:]
    den = S + (1 - wi)
    h = torch.where(den > 0, S / torch.where(den > 0, den, torch.ones_like(den)), torch.ones_like(den)).clamp_(0, 1)
    i = torch.arange(1, g + 1, device=p.device)
    Lc = L.unsqueeze(-1)
    h = torch.where(i < Lc, h, torch.where(i == Lc, wi, torch.zeros_like(h)))
    return BlockProbs(w, h)


def _block_next_dist(p: Tensor, q: Tensor, w: Tensor, tau: Tensor, L: Tensor) -> Tensor:
    g = q.shape[1]
    short = tau < L
    w_tau = w.gather(1, tau.unsqueeze(1)).squeeze(1)
    weight = torch.where(short, w_tau, torch.ones_like(w_tau))
    q_next = _at(q, tau.clamp(max=g - 1)) * short.unsqueeze(-1).to(q.dtype)
    return residual_distribution(_at(p, tau), q_next, weight)


def block_verify_distribution(draft_tokens: Tensor, q: Tensor, p: Tensor, lengths: Tensor | None = None) -> Tensor:
    """Exact law of block verification's output, ``[B, g+1, V]``: ``Pr(tau = k, next = y)``.

    ``Pr(tau = k) = h_k prod_{j=k+1..L} (1 - h_j)`` (``h_0 = 1``); the next token comes from
    ``p_{L+1}`` if ``k = L`` else ``normalize(max(w_k p_{k+1} - q_{k+1}, 0))``."""
    B, g, V = _check(draft_tokens, q, p)
    L = _as_lengths(lengths, (B,), g, p.device)
    w, h = block_accept_probs(draft_tokens, q, p, L)
    one = torch.ones_like(h[:, :1])
    h0 = torch.cat([one, h], dim=1)  # [B, g+1], h_0 = 1
    # rest[k] = prod_{j=k+1..g} (1 - h_j) for k = 0..g (h_j = 0 past L, so the product stops at L)
    rest = torch.cat([(1 - h).flip(1).cumprod(1).flip(1), one], dim=1)
    ptau = h0 * rest
    ks = torch.arange(g + 1, device=p.device)
    dists = torch.stack(
        [_block_next_dist(p, q, w, torch.full((B,), k, dtype=torch.int64, device=p.device), L) for k in range(g + 1)],
        dim=1,
    )
    ptau = torch.where(ks <= L.unsqueeze(-1), ptau, torch.zeros_like(ptau))
    return ptau.unsqueeze(-1) * dists


def block_verify(
    draft_tokens: Tensor,
    q: Tensor,
    p: Tensor,
    generator: torch.Generator | None = None,
    lengths: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Block verification (Sun et al. 2024), the optimal rule for one draft block.

    With ``w_i``, ``h_i`` from :func:`block_accept_probs`, draw ``eta_i`` uniform in (0, 1] and
    let ``tau`` be the LAST ``i`` with ``eta_i <= h_i`` (0 if none; no early stop at the first
    failure).  Output ``X_1..X_tau`` and one token from ``p_{g+1}`` if ``tau = g`` (the row's
    length), else from ``normalize(max(w_tau p_{tau+1} - q_{tau+1}, 0))`` (``p_{tau+1}`` if
    round-off empties it).  Returns ``(num_accepted = tau [B], next_token [B])``.
    """
    B, g, V = _check(draft_tokens, q, p)
    L = _as_lengths(lengths, (B,), g, p.device)
    w, h = block_accept_probs(draft_tokens, q, p, L)
    eta = 1 - torch.rand(B, g, generator=generator, device=p.device, dtype=h.dtype)  # (0, 1]
    ok = eta <= h
    tau = (ok.to(torch.int64) * torch.arange(1, g + 1, device=p.device)).amax(-1)
    return tau, _sample(_block_next_dist(p, q, w, tau, L), generator)
