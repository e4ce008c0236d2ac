"""Tree (trie) verification of drafts that share prefixes, in one target forward.

Layout (per sequence): node 0 is the **root**, the last committed token (the one whose KV is not
yet in the cache; its logits predict depth 1), at position ``position_offset``.  Nodes ``1..``
are the distinct draft prefixes in breadth-first order (by depth, then by the rank of the first
draft that contains them); a node at depth ``k`` holds a draft token at position
``position_offset + k``.  ``parent`` is ``-1`` for the root (and for padding nodes), ``0`` for
depth-1 nodes.  The target runs once over the ``T`` node tokens with
``attention_mask`` (additive: 0 where the key is an ancestor-or-self of the query, the dtype's
most negative finite value elsewhere; columns for the cached context are all 0) and
``position_ids``; then :func:`tree_greedy_accept` picks the accepted path and
:func:`gather_tree_kv` keeps the KV entries of the root and the accepted nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import torch
from torch import Tensor

from ._common import _as_lengths
from .greedy import target_tokens
from .tree_host import HOST_TREE_TOKENS, host_greedy_path, host_tree_fields

#: tests set it to compare the vectorised build with the host walk
_VECTORISED_ONLY = False

__all__ = [
    "TokenTree",
    "TreeAcceptResult",
    "build_tree",
    "tree_greedy_accept",
    "tree_kv_indices",
    "gather_tree_kv",
    "draft_logits_from_tree",
]


@dataclass
class TokenTree:
    """Token tree of ``p`` drafts of length ``h`` (shapes without ``B`` for an unbatched tree).

    ``T = 1 + number of distinct non-empty draft prefixes`` (at most ``1 + p*h``); in a batched
    tree, rows with fewer nodes are padded to the largest ``T`` with isolated padding nodes
    (token ``pad_token``, parent -1, depth 0, attending only to themselves, ``node_valid`` False).
    """

    tokens: Tensor  #: [B, T] int64 node tokens (node 0: root token)
    parent: Tensor  #: [B, T] int64 parent node, -1 for the root and padding
    depth: Tensor  #: [B, T] int64, 0 for the root and padding
    attention_mask: Tensor  #: [B, T, T] additive mask in the requested dtype
    position_ids: Tensor  #: [B, T] int64, position_offset + depth
    ancestor: Tensor  #: [B, T, T] bool, ancestor[b, i, j]: node j is an ancestor-or-self of node i
    draft_nodes: Tensor  #: [B, p, h] int64, node of draft d's token j (-1 past its length)
    node_draft: Tensor  #: [B, T] int64, lowest-index draft through the node (0 for root/padding)
    node_valid: Tensor  #: [B, T] bool
    num_nodes: Tensor  #: [B] int64, real nodes including the root
    batched: bool = True

    @property
    def size(self) -> int:
        """T, the number of (padded) nodes."""
        return self.tokens.shape[-1]

    def attention_mask_4d(self, past_length: int = 0) -> Tensor:
        """``[B, 1, T, past_length + T]`` additive mask for a forward over a KV cache holding
        ``past_length`` context positions (all visible), as Hugging Face models accept it."""
        m = self.attention_mask if self.batched else self.attention_mask.unsqueeze(0)
        if past_length:
            m = torch.cat([m.new_zeros(*m.shape[:-1], past_length), m], dim=-1)
        return m.unsqueeze(1)


class TreeAcceptResult(NamedTuple):
    """Result of :func:`tree_greedy_accept`; the first three fields equal :func:`greedy_accept`'s."""

    best_draft: Tensor  #: [B] lowest-index draft whose path contains the accepted path
    num_accepted: Tensor  #: [B] accepted draft tokens = depth of the last accepted node
    next_token: Tensor  #: [B] target's greedy token at the last accepted node
    path: Tensor  #: [B, h+1] accepted nodes by depth (path[:, 0] = 0, the root), -1 past num_accepted
    last_node: Tensor  #: [B] last accepted node


def _batched(tree: TokenTree) -> TokenTree:
    if tree.batched:
        return tree
    return TokenTree(
        **{k: (v.unsqueeze(0) if isinstance(v, Tensor) else v) for k, v in tree.__dict__.items() if k != "batched"},
        batched=True,
    )


def build_tree(
    drafts: Tensor,
    lengths: Tensor | int | None = None,
    *,
    root_token: Tensor | int | None = None,
    position_offset: Tensor | int = 0,
    dtype: torch.dtype = torch.float32,
    pad_token: int = 0,
    num_nodes: int | None = None,
) -> TokenTree:
    """Build the token tree (trie) of ``drafts`` for one-forward tree verification.

    Args:
        drafts: ``[p, h]`` or ``[B, p, h]`` int64 drafts, best-ranked first.
        lengths: real draft lengths (``[B, p]``, ``[B]``, ``[p]`` for unbatched input, or int).
        root_token: token of the root node (the last committed token), int or ``[B]``; default
            ``pad_token`` (fill ``tree.tokens[..., 0]`` before the forward).
        position_offset: position id of the root, int or ``[B]``; node positions are
            ``position_offset + depth``.
        dtype: dtype of the additive attention mask (use the model's dtype).
        num_nodes: pad the tree to exactly this many nodes (must be enough) instead of the
            largest row's count; avoids the one device->host sync that sizing the tree needs.

    Fully vectorised over the batch (no Python loop over ``B``, ``p`` or ``h``); a small tree of
    CPU drafts is walked on the host instead (:mod:`.tree_host`: the same fields, faster).
    """
    single = drafts.dim() == 2
    if single:
        drafts = drafts.unsqueeze(0)
        if lengths is not None and not isinstance(lengths, int):
            lengths = torch.as_tensor(lengths).unsqueeze(0)
    dev = drafts.device
    B, P, H = drafts.shape
    L = _as_lengths(lengths, (B, P), H, dev)
    if dev.type == "cpu" and B * P * H <= HOST_TREE_TOKENS and not _VECTORISED_ONLY:
        root = pad_token if root_token is None else root_token
        tree = TokenTree(*host_tree_fields(drafts, L, root, position_offset, dtype, pad_token, num_nodes))
        return _unbatched(tree) if single else tree
    ar_h = torch.arange(H, device=dev)
    ar_p = torch.arange(P, device=dev)
    valid = ar_h < L.unsqueeze(-1)  # [B, p, h]
    # same[b, d, e, j]: drafts d and e agree (and are real) on positions 0..j.
    same = (drafts.unsqueeze(2) == drafts.unsqueeze(1)) & valid.unsqueeze(2) & valid.unsqueeze(1)
    same = same.to(torch.int8).cumprod(-1).bool()
    # rep[b, d, j]: lowest draft sharing d's prefix through j (= the lowest draft through the node).
    rep = (same.to(torch.int64) * (P - ar_p).view(1, 1, P, 1)).argmax(2)  # [B, p, h]
    is_new = valid & (rep == ar_p.view(1, P, 1))
    # Breadth-first numbering: order (j, d); node ids start at 1 (0 is the root).
    new_jd = is_new.transpose(1, 2).reshape(B, H * P)
    ids_jd = new_jd.to(torch.int64).cumsum(-1)
    ids_new = ids_jd.view(B, H, P).transpose(1, 2)  # [B, p, h], meaningful where is_new
    node = ids_new.gather(1, rep)  # id of the representative's node
    node = torch.where(valid, node, torch.full_like(node, -1))
    counts = 1 + new_jd.sum(-1)  # [B]
    if num_nodes is None:
        T = int(counts.max())  # one sync to size the tree
    else:
        T = int(num_nodes)
    # Scatter per-(d, j) facts to nodes; invalid entries go to a dummy column T.
    tgt = torch.where(valid, node, torch.full_like(node, T)).view(B, P * H)

    def scatter(values: Tensor, fill: int) -> Tensor:
        out = torch.full((B, T + 1), fill, dtype=torch.int64, device=dev)
        out.scatter_(1, tgt, values.reshape(B, P * H).to(torch.int64))
        return out[:, :T]

    root = pad_token if root_token is None else root_token
    tokens = scatter(drafts, pad_token)
    tokens[:, 0] = torch.as_tensor(root, device=dev, dtype=torch.int64)
    parent_dj = torch.cat([torch.zeros_like(node[..., :1]), node[..., :-1]], dim=-1)
    parent = scatter(parent_dj, -1)
    depth = scatter((ar_h + 1).expand(B, P, H), 0)
    node_draft = scatter(rep, 0)
    node_valid = torch.arange(T, device=dev) < counts.unsqueeze(-1)
    # ancestor[b, node(d, j), node(d, j')] = True for j' <= j; plus root column and diagonal.
    rows = tgt.view(B, P, H, 1).expand(B, P, H, H)
    cols = torch.where(valid, node, torch.full_like(node, T)).view(B, P, 1, H).expand(B, P, H, H)
    tri = ar_h.view(H, 1) >= ar_h.view(1, H)
    flat = torch.where(tri, rows * (T + 1) + cols, torch.full_like(rows, T * (T + 1) + T))
    anc = torch.zeros(B, (T + 1) * (T + 1), dtype=torch.bool, device=dev)
    anc.scatter_(1, flat.reshape(B, -1), True)
    anc = anc.view(B, T + 1, T + 1)[:, :T, :T]
    anc[:, :, 0] |= node_valid
    anc |= torch.eye(T, dtype=torch.bool, device=dev)
    mask = torch.zeros(B, T, T, dtype=dtype, device=dev).masked_fill_(~anc, torch.finfo(dtype).min)
    off = torch.as_tensor(position_offset, device=dev, dtype=torch.int64)
    if off.dim() == 1:
        off = off.unsqueeze(-1)
    position_ids = off + depth
    tree = TokenTree(tokens, parent, depth, mask, position_ids, anc, node, node_draft, node_valid, counts)
    return _unbatched(tree) if single else tree


def _unbatched(tree: TokenTree) -> TokenTree:
    return TokenTree(
        **{k: (v.squeeze(0) if isinstance(v, Tensor) else v) for k, v in tree.__dict__.items() if k != "batched"},
        batched=False,
    )


def tree_greedy_accept(tree: TokenTree, target_logits: Tensor) -> TreeAcceptResult:
    """Greedy acceptance on a token tree.

    Args:
        tree: from :func:`build_tree`.
        target_logits: the target's logits at every node, ``[B, T, V]`` (``[T, V]`` unbatched),
            node 0 (the root) included, or its greedy tokens ``[B, T]``.

    Returns ``TreeAcceptResult``; ``best_draft``, ``num_accepted`` and ``next_token`` equal
    :func:`greedy_accept` on the drafts with the same target tokens.  A node is accepted when its
    token and those of all its ancestors equal the target's greedy token at their parents; the
    accepted nodes form a single root path (siblings carry distinct tokens). A small tree on the
    CPU is walked from its root on the host instead (:mod:`.tree_host`: the same fields, faster).
    """
    single = not tree.batched
    tr = _batched(tree)
    t = target_tokens(target_logits if not single else target_logits.unsqueeze(0))  # [B, T]
    B, T = tr.tokens.shape
    H = tr.draft_nodes.shape[-1]
    if t.device.type == "cpu" and B * T <= HOST_TREE_TOKENS and not _VECTORISED_ONLY:
        res = TreeAcceptResult(*host_greedy_path(tr.tokens, tr.parent, tr.node_valid, tr.node_draft, t, H))
        return TreeAcceptResult(*(x.squeeze(0) for x in res)) if single else res
    # Few ops (each costs ~10 us on the CPU right after a forward has flushed the caches).
    # Padding nodes may "match": no valid node has them as ancestors, and node_valid drops them.
    match = tr.tokens == t.gather(1, tr.parent.clamp(min=0))
    match[:, 0] = True
    accepted = (tr.ancestor <= match.unsqueeze(1)).all(-1) & tr.node_valid  # [B, T] all ancestors match
    key = torch.where(accepted, tr.depth, -1)
    last = key.argmax(-1, keepdim=True)  # deepest accepted node (unique per depth)
    num = key.gather(1, last).squeeze(1)
    nxt = t.gather(1, last).squeeze(1)
    best = tr.node_draft.gather(1, last).squeeze(1)
    path = torch.full((B, H + 2), -1, dtype=torch.int64, device=t.device)
    path.scatter_(1, torch.where(accepted, tr.depth, H + 1), torch.arange(T, device=t.device).expand(B, T))
    res = TreeAcceptResult(best, num, nxt, path[:, : H + 1], last.squeeze(1))
    if single:
        res = TreeAcceptResult(*(x.squeeze(0) for x in res))
    return res


def tree_kv_indices(result: TreeAcceptResult, past_length: int = 0) -> Tensor:
    """KV-cache positions to keep after the context: ``past_length + path`` (root first), with
    the slots past ``num_accepted`` repeating the last accepted node.  ``[B, h+1]`` (or ``[h+1]``)."""
    path = result.path
    last = result.last_node.unsqueeze(-1)
    return past_length + torch.where(path >= 0, path, last)


def gather_tree_kv(cache: Tensor, result: TreeAcceptResult, past_length: int, dim: int = -2) -> Tensor:
    """Compact one cache tensor after tree verification.

    ``cache`` holds ``past_length`` context positions followed by the ``T`` tree nodes along
    ``dim`` (batch on dim 0, e.g. ``[B, heads, past_length + T, head_dim]``).  Returns the cache
    with the context and then the root and accepted nodes in path order, length
    ``past_length + h + 1``; row ``b`` is valid up to ``past_length + num_accepted[b] + 1``
    (later slots repeat the last accepted node; overwrite or mask them).
    """
    dim = dim % cache.dim()
    idx = tree_kv_indices(result, past_length)
    if idx.dim() == 1:
        idx = idx.unsqueeze(0).expand(cache.shape[0], -1)
    shape = [1] * cache.dim()
    shape[0], shape[dim] = idx.shape[0], idx.shape[1]
    idx = idx.view(shape).expand(*[s if i != dim else idx.shape[1] for i, s in enumerate(cache.shape)])
    return torch.cat([cache.narrow(dim, 0, past_length), cache.gather(dim, idx)], dim=dim)


def draft_logits_from_tree(tree: TokenTree, node_logits: Tensor) -> Tensor:
    """Rearrange per-node values ``[B, T, ...]`` into per-draft ``[B, p, h+1, ...]`` (position 0:
    the root; position j+1: the node of draft token j; padding positions repeat the root), the
    layout :func:`greedy_accept` takes."""
    single = not tree.batched
    tr = _batched(tree)
    x = node_logits.unsqueeze(0) if single else node_logits
    B, P, H = tr.draft_nodes.shape
    idx = torch.cat([torch.zeros_like(tr.draft_nodes[..., :1]), tr.draft_nodes.clamp(min=0)], dim=-1)
    out = x[torch.arange(B, device=x.device).view(B, 1, 1), idx]
    return out.squeeze(0) if single else out
