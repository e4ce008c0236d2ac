"""The engine's loop for one row on a lean step, greedy or sampled (the tree rule; the heads'
sampled drafts by recursive rejection, block verification or token by token): its drafts as a
chain or a small tree, kept lean.

Why: on a CPU the lean step verifies 2-4 tokens for 5-15% more than one (bench/RESULTS.md), so a
draft pays only if the step around the forward costs about what plain decoding's does. The
general loop (any batch, sampling rules, processors, observers, streamers) spends ~1.2 ms a call
on the host beyond drafting for one draft and ~2 ms for a tree of a few: building the tree with
batched tensors, accepting along it, editing the cache, each a handful of small tensor ops right
after a forward has flushed the caches. One row needs none of it: its few drafts' trie is a few
Python lists, acceptance a walk down it (``verify.tree_host.accepted_walk``), and the cache moves the accepted path's slots into
place only where the path leaves the first branch (a chain's accepted prefix is already there).

The engine takes it where it applies (:func:`applies`): greedy decoding, or sampling by the tree
rule (``sample_rule="tree"``: the same drafts, the rule's walk on each node's law, processors that
read the scores alone), of one row without padding, processors (greedy), extra stopping criteria,
observer or streamer, on a lean step, on the
"tree" layout, drafted by the context's copy alone (``ContextLookup(None)``), by the heads'
lattice (``LatticeDrafter``: the p best paths, rescored by an LM or not) or by both
(``ContextLookup(LatticeDrafter)``); or drafts sampled from the heads' lattice
(``LatticeDrafter`` with ``sample_rule="multi"``: their trie, recursive rejection on the laws at
its nodes; ``"block"`` or ``"token"``: one draft, a chain). Its trie numbers nodes as the general loop's
(:func:`draftlattice.verify.tree_host.host_tree_fields`: by depth, then by the first draft
through a node), and its forwards, head projections and drafter calls are the general loop's,
input for input (and, sampling, its draws), so its outputs and statistics are the general loop's
(``tests/test_row_loop.py``).
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import Tensor

from ..verify import draw_categorical, multi_draft_verify, verify_sampled
from ..verify.greedy import target_tokens
from ..verify.tree_host import accepted_walk
from .drafters.base import to_host
from .drafters.lattice import LatticeDrafter
from .drafters.lookup import ContextLookup
from .processors import needs_context, process_scores_only
from .stats import DecodeStats
from .stopping import RowStopper

DRAWN_RULES = ("multi", "block", "token")  #: the sampling rules of drafts drawn with their laws


def applies(engine, input_ids: Tensor, attention_mask: Tensor | None, position_ids: Tensor | None, stopper) -> bool:
    """Whether :func:`decode` runs this :meth:`Engine.run <draftlattice.decode.Engine.run>` call."""
    drafter = engine.drafter
    copy = isinstance(drafter, ContextLookup)
    lattice = drafter.drafter if copy else drafter
    known_drafter = (copy and lattice is None) or (type(lattice) is LatticeDrafter and engine.heads is not None)
    # Sampling with the tree rule: its drafts are the greedy ones, its walk reads each node's law
    # (processors that look at the scores alone apply to all nodes at once); the other rules:
    # drafts sampled from the heads' lattice with their laws q (no copy joined)
    drawn = engine.sample_rule in DRAWN_RULES and type(drafter) is LatticeDrafter
    sampled = (engine.sample_rule == "tree" or drawn) and not needs_context(engine.processors)
    return (
        known_drafter
        and input_ids.shape[0] == 1
        and engine.step is not None
        and (sampled or (engine.sample_rule is None and not engine.processors))
        and engine.layout == "tree"
        and engine.observer is None
        and engine.streamer is None
        and (attention_mask is None or bool(attention_mask.all()))
        and (position_ids is None or position_ids.view(-1).tolist() == list(range(input_ids.shape[1])))
        and isinstance(stopper, RowStopper)
        and not stopper.others
    )


def decode(engine, target, input_ids: Tensor, stopper: RowStopper) -> tuple[list[list[int]], DecodeStats]:
    """Greedy decoding (or sampling by the tree rule) of ``input_ids [1, P]`` with
    ``engine.drafter``'s drafts a step."""
    stats, drafter, device = DecodeStats(), engine.drafter, input_ids.device
    copy_only = isinstance(drafter, ContextLookup) and drafter.drafter is None
    sampling = engine.sample_rule is not None
    new: list[list[int]] = [[]]
    P = input_ids.shape[1]
    start = time.perf_counter()
    hidden = target.hidden(input_ids, torch.arange(P, device=device).unsqueeze(0), None)
    scores = target.logits(hidden[:, -1])  # [1, V]
    if sampling:  # as the general loop's prefill draws it
        scores = engine.processors(input_ids, scores) if engine.processors else scores
        root = int(draw_categorical(scores.softmax(-1))[0])
    else:
        root = int(target_tokens(scores)[0])
    proposal = None if copy_only else _propose(engine, engine.head_logits(hidden[:, -1], _ids(root, device)))
    stats.target_calls, stats.prefill_calls = 1, 1
    stats.prefill_seconds = time.perf_counter() - start
    stopper.commit(0, [root], new, scores)
    target.forward_seconds = 0.0  # the steps' forwards from here (stats.forward_seconds)
    context = input_ids[0].tolist()
    cache, lowest = target.cache, torch.finfo(target.dtype).min
    while not stopper.all_done:
        start = time.perf_counter()
        if copy_only:  # (the width the drafter's tensor of them would have: the tree rule's draws)
            drafts, sampled = drafter.copies(context + new[0]), None
            width = max([1, *map(len, drafts)])
        else:
            drafts, width, sampled = _finish(drafter, proposal, context + new[0], device)
        stats.drafting_seconds += time.perf_counter() - start
        start = time.perf_counter()
        trie, past = _Trie(root, drafts), cache.get_seq_length()
        T = len(trie.tokens)
        positions = torch.tensor([trie.depth], device=device).add_(past)
        # decode.cache.additive_mask's values (the cache and the trie's ancestors visible),
        # without the all-true validity row and the concatenation it would need
        mask = torch.zeros(1, 1, T, past + T, dtype=target.dtype, device=device)
        if T > 1:
            mask[0, 0, :, past:].masked_fill_(trie.hidden_from(device), lowest)
        hidden = target.hidden(torch.tensor([trie.tokens], device=device), positions, mask)  # [1, T, d]
        scores, fused_heads = target.node_logits(hidden)
        if sampling:
            if engine.processors:
                scores = process_scores_only(engine.processors, scores)
            path, root = _sampling_rule(engine.sample_rule, trie, drafts, width, scores, sampled)
        else:
            chosen = target_tokens(scores[0]).tolist()
            path = accepted_walk(trie.tokens, trie.parent, chosen)
            root = chosen[path[-1]]
        end = path[-1]
        if not copy_only:  # the heads at the last accepted node, as the general loop reads them
            heads = fused_heads[:, end] if fused_heads is not None else None
            if heads is None:
                heads = engine.head_logits(hidden[:, end], _ids(root, device))
            propose_start = time.perf_counter()
            proposal = _propose(engine, heads)
            stats.drafting_seconds += time.perf_counter() - propose_start
            start += time.perf_counter() - propose_start  # drafting is not verification
        if end == len(path) - 1:  # the path is the first nodes: already in place
            cache.length = past + len(path)
            path_scores = scores[0, : len(path)]
        else:
            index = torch.tensor(path, device=device)
            cache.keep_block(past, None, index.unsqueeze(0))
            path_scores = scores[0].index_select(0, index)
        before, accepted = len(new[0]), len(path) - 1
        stopper.commit(0, [trie.tokens[n] for n in path[1:]] + [root], new, path_scores)
        stats.target_calls += 1
        stats.nodes += T
        stats.accepted.append([min(accepted, len(new[0]) - before)])
        stats.verification_seconds += time.perf_counter() - start
    stats.new_tokens = len(new[0])
    stats.forward_seconds = target.forward_seconds
    return new, stats


class _Trie:
    """The trie of one row's drafts under ``root``, numbered as the general loop numbers it:
    by depth, then by the first draft through a node (``host_tree_fields``)."""

    def __init__(self, root: int, drafts: list[list[int]]) -> None:
        self.tokens, self.parent, self.depth = [root], [-1], [0]
        self.node_of: dict[tuple[int, ...], int] = {(): 0}  #: each draft prefix's node
        node_of = self.node_of
        for j in range(max(map(len, drafts), default=0)):
            for draft in drafts:
                if j < len(draft) and (key := tuple(draft[: j + 1])) not in node_of:
                    node_of[key] = len(self.tokens)
                    self.tokens.append(draft[j])
                    self.parent.append(node_of[key[:-1]])
                    self.depth.append(j + 1)

    def hidden_from(self, device) -> Tensor:
        """``[T, T]`` bool: True where node ``i`` may not see node ``j`` (not its ancestor)."""
        T = len(self.tokens)
        if self.parent == list(range(-1, T - 1)):  # a chain
            return _above_diagonal(T, device)
        ancestor = np.eye(T, dtype=bool)
        for n in range(1, T):  # parents come before their children
            ancestor[n] |= ancestor[self.parent[n]]
        return torch.from_numpy(~ancestor).to(device)


def _propose(engine, head_logits: Tensor):
    """The drafter's device half and its one transfer to the host: ``(proposal, host tensors)``."""
    proposal = engine.drafter.propose(head_logits, engine.sampling, engine.draws)
    return proposal, to_host(proposal.to_host)


def _finish(drafter, proposal, context: list[int], device):
    """The step's drafts from the drafter's host half (their ``-1`` padding dropped), the width
    of the drafter's tensor of them (the tree rule draws a uniform per depth of it) and the
    sampled drafts with their laws (None for deterministic drafts)."""
    drafts, sampled = drafter.finish(proposal[0], proposal[1], [context], device)
    return [[t for t in draft if t >= 0] for draft in drafts[0].tolist()], drafts.shape[-1], sampled


def _sampling_rule(rule: str, trie: _Trie, drafts: list[list[int]], width: int, scores: Tensor, sampled):
    """The sampling rule on ``trie``'s laws, as the general loop calls it (the same laws, the same
    draws): the accepted path's nodes and the next token. The tree rule walks the drafts as
    drafted (``-1`` past a shorter one's end); the other rules read the drafts' laws ``q``."""
    node_of, drafts = trie.node_of, drafts or [[]]
    nodes = [[node_of[tuple(draft[:j])] if j <= len(draft) else -1 for j in range(width + 1)] for draft in drafts]
    probs, nodes = scores.softmax(-1), torch.tensor([nodes])
    if rule == "tree":
        rows = [draft + [-1] * (width - len(draft)) for draft in drafts]
        best, num, token = multi_draft_verify(torch.tensor([rows]), probs, None, None, nodes=nodes)
    else:
        num, token, best = verify_sampled(rule, sampled.tokens, probs, sampled.q, nodes)
    chosen = drafts[0 if best is None else int(best[0])]
    return [node_of[tuple(chosen[:j])] for j in range(int(num[0]) + 1)], int(token[0])


def _ids(token: int, device) -> Tensor:
    return torch.tensor([token], device=device)


_ABOVE: dict[tuple[int, str], Tensor] = {}


def _above_diagonal(size: int, device: torch.device) -> Tensor:
    """``[size, size]`` bool, True above the diagonal (made once per size and device)."""
    key = (size, str(device))
    if key not in _ABOVE:
        _ABOVE[key] = torch.ones(size, size, dtype=torch.bool, device=device).triu(1)
    return _ABOVE[key]
