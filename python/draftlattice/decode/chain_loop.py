"""The engine's loop for one row and one draft a step on a lean step: a chain, kept lean.

Why: on a CPU the lean step verifies 2-4 tokens for 5-15% more than one (bench/RESULTS.md), so a
draft pays only if the step around the forward costs about what plain decoding's does. The
general loop (any batch, p drafts as a tree, sampling rules, processors, observers, streamers)
spends ~1.2 ms a call on the host beyond drafting: building a tree, accepting along it, editing
the cache, each a handful of small tensor ops right after a forward has flushed the caches. One
row with one draft needs none of it: the draft is a chain, its accepted prefix is already in
place in the cache, and acceptance is a comparison of two short lists. This loop makes a
forward's three inputs, takes one argmax and moves the cache's length.

The engine takes it where it applies (:func:`applies`): greedy decoding of one row without
padding, processors, extra stopping criteria, observer or streamer, on a lean step, drafted by
the context's copy alone (``ContextLookup(None)``) or by the heads' lattice with one draft
(``LatticeDrafter`` with p = 1: the heads' 1-best, or the LM-rescored best path). Its forwards,
head projections and drafter calls are the general loop's, input for input, so its outputs and
statistics are the general loop's (``tests/test_chain_loop.py``).
"""

from __future__ import annotations

import time

import torch
from torch import Tensor

from ..verify.greedy import target_tokens
from .drafters.base import to_host
from .drafters.lattice import LatticeDrafter
from .drafters.lookup import ContextLookup
from .stats import DecodeStats
from .stopping import RowStopper


def applies(engine, input_ids: Tensor, attention_mask: Tensor | None, position_ids: Tensor | None, stopper) -> bool:
    """Whether :func:`decode` runs this :meth:`Engine.run <draftlattice.decode.Engine.run>` call."""
    drafter = engine.drafter
    one_draft = (isinstance(drafter, ContextLookup) and drafter.drafter is None) or (
        type(drafter) is LatticeDrafter and drafter.p == 1 and engine.heads is not None
    )
    return (
        one_draft
        and input_ids.shape[0] == 1
        and engine.step is not None
        and engine.sample_rule is None
        and engine.layout == "tree"
        and not engine.processors
        and engine.observer is None
        and engine.streamer is None
        and (attention_mask is None or bool(attention_mask.all()))
        and (position_ids is None or position_ids.view(-1).tolist() == list(range(input_ids.shape[1])))
        and isinstance(stopper, RowStopper)
        and not stopper.others
    )


def decode(engine, target, input_ids: Tensor, stopper: RowStopper) -> tuple[list[list[int]], DecodeStats]:
    """Greedy decoding of ``input_ids [1, P]`` with one draft a step from ``engine.drafter``."""
    stats, drafter, device = DecodeStats(), engine.drafter, input_ids.device
    copying = isinstance(drafter, ContextLookup)
    new: list[list[int]] = [[]]
    P = input_ids.shape[1]
    start = time.perf_counter()
    hidden = target.hidden(input_ids, torch.arange(P, device=device).unsqueeze(0), None)
    scores = target.logits(hidden[:, -1])  # [1, V]
    root = int(target_tokens(scores)[0])
    proposal = None if copying else _propose(engine, engine.head_logits(hidden[:, -1], _ids(root, device)))
    stats.target_calls, stats.prefill_calls = 1, 1
    stats.prefill_seconds = time.perf_counter() - start
    stopper.commit(0, [root], new, scores)
    target.forward_seconds = 0.0  # the steps' forwards from here (stats.forward_seconds)
    context = input_ids[0].tolist()
    cache, lowest = target.cache, torch.finfo(target.dtype).min
    while not stopper.all_done:
        start = time.perf_counter()
        draft = drafter.copied(context + new[0]) if copying else _finish(drafter, proposal, context + new[0], device)
        stats.drafting_seconds += time.perf_counter() - start
        start = time.perf_counter()
        past, n = cache.get_seq_length(), len(draft)
        tokens = torch.tensor([[root, *draft]], device=device)
        positions = torch.arange(past, past + n + 1, device=device).unsqueeze(0)
        # decode.cache.additive_mask's values (the cache and the chain's causal block visible),
        # without the all-true validity row and the concatenation it would need
        mask = torch.zeros(1, 1, n + 1, past + n + 1, dtype=target.dtype, device=device)
        if n:
            mask[0, 0, :, past:].masked_fill_(_above_diagonal(n + 1, device), lowest)
        hidden = target.hidden(tokens, positions, mask)  # [1, n + 1, d]
        scores, fused_heads = target.node_logits(hidden)
        scores = scores[0]  # [n + 1, V]
        chosen = target_tokens(scores).tolist()
        accepted = 0
        while accepted < n and draft[accepted] == chosen[accepted]:
            accepted += 1
        root = chosen[accepted]
        if not copying:  # the heads at the last accepted node, as the general loop reads them
            heads = fused_heads[:, accepted] if fused_heads is not None else None
            if heads is None:
                heads = engine.head_logits(hidden[:, accepted], _ids(root, device))
            propose_start = time.perf_counter()
            proposal = _propose(engine, heads)
            stats.drafting_seconds += time.perf_counter() - propose_start
            start += time.perf_counter() - propose_start  # drafting is not verification
        cache.length = past + accepted + 1  # a chain's accepted prefix is already in place
        before = len(new[0])
        stopper.commit(0, draft[:accepted] + [root], new, scores)
        stats.target_calls += 1
        stats.nodes += n + 1
        stats.accepted.append([min(accepted, len(new[0]) - before)])
        stats.verification_seconds += time.perf_counter() - start
    stats.new_tokens = len(new[0])
    stats.forward_seconds = target.forward_seconds
    return new, stats


def _propose(engine, head_logits: Tensor):
    """The drafter's device half and its one transfer to the host: ``(proposal, host tensors)``."""
    proposal = engine.drafter.propose(head_logits, engine.sampling, engine.draws)
    return proposal, to_host(proposal.to_host)


def _finish(drafter, proposal, context: list[int], device) -> list[int]:
    """The step's one draft from the drafter's host half (its ``-1`` padding dropped)."""
    drafts, _ = drafter.finish(proposal[0], proposal[1], [context], device)
    return [t for t in drafts[0, 0].tolist() if t >= 0]


def _ids(token: int, device) -> Tensor:
    return torch.tensor([token], device=device)


_ABOVE: dict[tuple[int, str], Tensor] = {}


def _above_diagonal(size: int, device: torch.device) -> Tensor:
    """``[size, size]`` bool, True above the diagonal (made once per size and device)."""
    key = (size, str(device))
    if key not in _ABOVE:
        _ABOVE[key] = torch.ones(size, size, dtype=torch.bool, device=device).triu(1)
    return _ABOVE[key]
