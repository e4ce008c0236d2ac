"""Shared helpers of the verifiers: shapes, lengths, distributions."""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["sampling_distribution", "residual_distribution", "draw_categorical", "may_hold"]


def uniforms(
    rows: int, generator: torch.Generator | None, device: torch.device, dtype: torch.dtype, count: int = 1
) -> Tensor:
    """``[rows, count]`` uniforms on ``device``, drawn as :func:`draw_categorical` draws them (a
    CUDA generator draws on its own device)."""
    where = device if generator is None else generator.device
    return torch.rand(rows, count, generator=generator, device=where, dtype=dtype).to(device)


def draw_categorical(
    probs: Tensor, generator: torch.Generator | None = None, u: Tensor | None = None, count: int | None = None
) -> Tensor:
    """One draw per row of ``probs [..., V]`` (non-negative, positive sum; need not be
    normalised), int64 ``[...]``, by inversion: one uniform per row from ``generator`` (or the
    given ``u``, ``[rows, 1]`` from :func:`uniforms`), the first token whose cumulative mass
    exceeds it. Never returns a token of probability 0. Same law as ``torch.multinomial(probs, 1)``
    at a fraction of its CPU cost for large V. ``count``: that many independent draws per row,
    ``[..., count]`` (one cumulative sum per row for all of them).
    """
    flat = probs.reshape(-1, probs.shape[-1])
    cdf = flat.cumsum(-1)
    if u is None:
        u = uniforms(flat.shape[0], generator, cdf.device, cdf.dtype, count or 1)
    total = cdf[:, -1:].contiguous()
    index = torch.searchsorted(cdf, u * total, right=True)  # first cdf > u * total
    # u * total can round up to the total: then take the first token where the cdf reaches the
    # total (it has positive mass: adding a zero leaves the cdf unchanged, exactly).
    last = torch.searchsorted(cdf, total)
    drawn = torch.minimum(index, last)
    return drawn.reshape(probs.shape[:-1]) if count is None else drawn.reshape(*probs.shape[:-1], count)


def may_hold(mask: Tensor) -> bool:
    """Whether ``mask`` may have a True entry: read on the CPU, where reading is free; always
    True on an accelerator, where reading would wait for the device. For skipping work that only
    masked rows need: skipping is an optimisation, doing it anyway is never wrong."""
    return mask.device.type != "cpu" or bool(mask.any())


def _as_lengths(lengths: Tensor | int | None, shape: tuple[int, ...], full: int, device) -> Tensor:
    """Broadcast ``lengths`` (None = ``full``) to an int64 tensor of ``shape`` on ``device``."""
    if lengths is None:
        return torch.full(shape, full, dtype=torch.int64, device=device)
    lengths = torch.as_tensor(lengths, device=device).to(torch.int64)
    while lengths.dim() < len(shape):
        lengths = lengths.unsqueeze(-1)
    return lengths.expand(shape)


def residual_distribution(p: Tensor, q: Tensor, weight: Tensor | float | None = None) -> Tensor:
    """``normalize(max(weight * p - q, 0))`` over the last dimension.

    Token verification uses ``weight = 1`` (Leviathan et al. 2023, Chen et al. 2023: the
    rejection distribution ``norm(max(p - q, 0))``); block verification uses ``weight = w_tau``
    (Sun et al. 2024).  ``weight`` is a scalar or a tensor broadcastable to ``p.shape[:-1]``.
    Rows whose residual mass is zero (``weight * p <= q`` everywhere, e.g. ``q = p``, or round-off)
    fall back to ``p`` itself, so every row returned is a distribution.
    """
    if weight is None:
        r = p - q
    else:
        w = torch.as_tensor(weight, dtype=p.dtype, device=p.device)
        if w.dim() > 0:
            w = w.unsqueeze(-1)
        r = p * w
        r.sub_(q)
    r.clamp_(min=0)
    s = r.sum(-1, keepdim=True)
    return torch.where(s > 0, r / torch.where(s > 0, s, torch.ones_like(s)), p)


def without_token(q: Tensor, x: Tensor) -> Tensor:
    """q with token x [...] set to 0 and the rest renormalised (all zero if nothing is left)."""
    out = q.scatter(-1, x.unsqueeze(-1), 0.0)
    s = out.sum(-1, keepdim=True)
    return out / torch.where(s > 0, s, torch.ones_like(s))


def sampling_distribution(
    logits: Tensor,
    temperature: float | Tensor = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    *,
    dtype: torch.dtype | None = None,
) -> Tensor:
    """The distribution a sampler draws from: ``softmax(top_p(top_k(logits / temperature)))``.

    Applied in this order (the order of Hugging Face's ``TemperatureLogitsWarper``,
    ``TopKLogitsWarper``, ``TopPLogitsWarper``), over the last dimension of ``logits [..., V]``:

    * ``temperature``: a float or a tensor broadcastable to ``logits.shape[:-1]``;
      ``temperature <= 0`` means greedy: a one-hot distribution on the (first) argmax.
    * ``top_k``: keep the tokens whose logit is at least the k-th largest (ties at the boundary
      are all kept); ``None`` or ``0`` disables it.
    * ``top_p`` (nucleus): keep the smallest set of most probable tokens whose probability
      reaches ``top_p`` (at least one token); ``None`` or ``1.0`` disables it.

    Speculative sampling is exact for the distribution the verifier is given, so pass the
    target's ``p`` through this function with the user's settings, and the drafter's ``q``
    through it with the settings the drafter actually sampled with.  Returns probabilities in
    ``dtype`` (default: ``logits.dtype`` promoted to at least float32).
    """
    if dtype is None:
        dtype = torch.promote_types(logits.dtype, torch.float32)
    x = logits.to(dtype)
    greedy_rows = None
    if isinstance(temperature, Tensor):
        t = temperature.to(device=x.device, dtype=dtype)
        greedy_rows = t <= 0
        x = x / torch.where(greedy_rows, torch.ones_like(t), t).unsqueeze(-1)
    elif temperature <= 0:
        idx = x.argmax(-1, keepdim=True)
        return torch.zeros_like(x).scatter_(-1, idx, 1.0)
    elif temperature != 1.0:
        x = x / temperature
    if top_k is not None and 0 < top_k < x.shape[-1]:
        kth = torch.topk(x, top_k, dim=-1).values[..., -1:]
        x = x.masked_fill(x < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_x, order = torch.sort(x, dim=-1, descending=False)
        cum = sorted_x.softmax(-1).cumsum_(-1)
        remove = cum <= (1.0 - top_p)
        remove[..., -1] = False  # always keep the most probable token
        x = x.masked_fill(remove.scatter(-1, order, remove), float("-inf"))
        del sorted_x, order, cum, remove
    probs = x.softmax(-1)
    if greedy_rows is not None:
        onehot = torch.zeros_like(probs).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
        probs = torch.where(greedy_rows.unsqueeze(-1), onehot, probs)
    return probs
