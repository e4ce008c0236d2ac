"""What one verification forward keeps, per sequence: the accepted path and the target's token.

A decoding step verifies ``p`` drafts of ``g`` tokens per sequence in one forward, laid out as
a token tree (one row per sequence, :func:`~draftlattice.verify.build_tree`) or as ``p``
chains (one row per draft). Whatever the rule (greedy, or a sampling rule's result), the engine
needs the same things afterwards: how many draft tokens were accepted, the committed tokens, the
hidden state the heads read next, the scores that chose each token (stopping criteria see them)
and which cache slots to keep. :func:`accept_tree` (greedy, tree), :func:`accept_chains`
(greedy or a sampling rule's result, chains) and :func:`accept_tree_chains` (a sampling rule's
result on drafts verified as their tree) compute them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from . import tree as tree_module
from .greedy import greedy_accept, target_tokens
from .tree import TokenTree, tree_greedy_accept, tree_kv_indices
from .tree_host import HOST_TREE_TOKENS, host_accepted_path


@dataclass
class AcceptedPath:
    """What a verification accepts, per sequence (device tensors)."""

    num: Tensor  #: [B] accepted draft tokens
    tokens: Tensor  #: [B, g+1] accepted draft tokens, then the target's token at index num
    hidden: Tensor  #: [B, g+1, d] hidden states at the root and the path's nodes (by depth)
    scores: Tensor  #: [B, g+1, V] scores that chose tokens[:, j] (at the path's node j)
    cache_rows: Tensor | None  #: [B] cache row to keep per sequence (chain layout, p > 1)
    slots: Tensor  #: [B, g+1] block-relative cache slots of the root and the accepted nodes
    last_node: tuple[Tensor, Tensor]  #: (row [B], node [B]) of the last accepted node in the forward


def accept_tree(tree: TokenTree, scores: Tensor, hidden: Tensor) -> AcceptedPath:
    """Greedy acceptance over a batched token tree (``tree`` on the scores' device).

    ``scores [B, T, V]``: the target's (processed) scores at every node; ``hidden [B, T, d]``.
    """
    B, T = tree.tokens.shape
    depth = tree.draft_nodes.shape[-1]
    if scores.device.type == "cpu" and B * T <= HOST_TREE_TOKENS and not tree_module._VECTORISED_ONLY:
        targets = target_tokens(scores)
        num, tokens, slots, last_node = host_accepted_path(tree.tokens, tree.parent, tree.node_valid, targets, depth)
        flat = _flat_nodes(slots, T)
        last = (torch.arange(B), last_node)
        return AcceptedPath(num, tokens, _at(hidden, flat), _at(scores, flat), None, slots, last)
    result = tree_greedy_accept(tree, scores)
    slots = tree_kv_indices(result, 0)  # [B, g+1] root and accepted nodes, by depth (repeats past num)
    tokens = _committed(tree.tokens.gather(1, slots)[:, 1:], result.num_accepted, result.next_token)
    last = (torch.arange(B, device=slots.device), result.last_node)
    flat = _flat_nodes(slots, tree.size)
    return AcceptedPath(result.num_accepted, tokens, _at(hidden, flat), _at(scores, flat), None, slots, last)


def accept_chains(
    drafts: Tensor,
    scores: Tensor,
    hidden: Tensor,
    num: Tensor | None = None,
    next_token: Tensor | None = None,
    best: Tensor | None = None,
) -> AcceptedPath:
    """Acceptance over ``p`` chains per sequence, ``drafts [B, p, g]``.

    ``scores [B*p, g+1, V]`` and ``hidden [B*p, g+1, d]``: row ``b*p + i`` is chain ``i`` of
    sequence ``b``. Greedy acceptance, or a sampling rule's ``num``/``next_token`` on chain
    ``best`` (None = chain 0).
    """
    B, p, g = drafts.shape
    device = hidden.device
    scores = scores.view(B, p, g + 1, -1)
    drafts = drafts.to(device, non_blocking=True)
    if num is None:
        best, num, next_token = greedy_accept(drafts, scores)
    elif best is None:
        best = torch.zeros(B, dtype=torch.int64, device=device)
    rows = torch.arange(B, device=device)
    tokens = _committed(drafts[rows, best], num, next_token)
    cache_rows = rows * p + best
    slots = torch.arange(g + 1, device=device).expand(B, g + 1)
    chains = cache_rows if p > 1 else None
    return AcceptedPath(num, tokens, hidden[cache_rows], scores[rows, best], chains, slots, (cache_rows, num))


def chain_nodes(tree: TokenTree) -> Tensor:
    """``[B, p, g+1]``: the tree node of each draft's prefix of length 0..g (the root, then the
    draft's tokens), -1 past a draft's end. A chain's view of a tree forward:
    ``scores[rows, chain_nodes(tree)]`` are the scores ``p`` chains would give, each shared
    prefix computed once."""
    B, p, _ = tree.draft_nodes.shape
    root = torch.zeros(B, p, 1, dtype=tree.draft_nodes.dtype, device=tree.draft_nodes.device)
    return torch.cat([root, tree.draft_nodes], dim=2)


def accept_tree_chains(
    tree: TokenTree,
    drafts: Tensor,
    scores: Tensor,
    hidden: Tensor,
    num: Tensor,
    next_token: Tensor,
    best: Tensor | None,
) -> AcceptedPath:
    """A sampling rule's ``num``/``next_token`` on draft ``best`` (None = draft 0) of ``drafts
    [B, p, g]`` (-1 past a deterministic draft's end), verified as their token ``tree``: ``scores [B, T, V]`` and
    ``hidden [B, T, d]`` at the tree's nodes."""
    B, p, g = drafts.shape
    device = hidden.device
    rows = torch.arange(B, device=device)
    if best is None:
        best = torch.zeros(B, dtype=torch.int64, device=device)
    # [B, g+1] the chosen draft's nodes by depth; past a draft's end (-1) the root's, never kept
    # (the cache keeps a row's first num + 1 slots), only a valid index
    slots = chain_nodes(tree)[rows, best].clamp(min=0)
    tokens = _committed(drafts.to(device)[rows, best], num, next_token)
    last = (rows, slots.gather(1, num.unsqueeze(1)).squeeze(1))
    flat = _flat_nodes(slots, tree.size)
    return AcceptedPath(num, tokens, _at(hidden, flat), _at(scores, flat), None, slots, last)


def _flat_nodes(nodes: Tensor, T: int) -> Tensor:
    """Each row's ``nodes [B, n]`` of ``T`` as rows of the flattened ``[B * T]``: ``[B, n]``."""
    return torch.arange(nodes.shape[0], device=nodes.device).unsqueeze(1) * T + nodes


def _at(x: Tensor, flat: Tensor) -> Tensor:
    """``x [B, T, ...]`` at the nodes ``flat [B, n]`` (:func:`_flat_nodes`): ``[B, n, ...]``. One
    ``index_select`` of whole rows: PyTorch's CPU advanced indexing copies a step's scores ~4x
    slower."""
    B, T = x.shape[:2]
    return x.reshape(B * T, *x.shape[2:]).index_select(0, flat.view(-1)).view(*flat.shape, *x.shape[2:])


def _committed(path_tokens: Tensor, num: Tensor, next_token: Tensor) -> Tensor:
    """``[B, g+1]``: the accepted path's draft tokens ``path_tokens [B, g]``, with the target's
    token written at index ``num`` (what :attr:`AcceptedPath.tokens` holds)."""
    tokens = torch.cat([path_tokens, torch.zeros_like(path_tokens[:, :1])], dim=1)
    return tokens.scatter_(1, num.unsqueeze(1), next_token.unsqueeze(1))
