"""The token tree of a few drafts held on the CPU, built and accepted by Python walks.

Why: :func:`~draftlattice.verify.tree.build_tree` and greedy acceptance are vectorised for any
batch and device, at about 110 and 25 small tensor ops (each ~10 us on a CPU right after a
forward has flushed the caches), while a decoding step's tree has a dozen draft tokens: walking
them costs a few microseconds each. Same fields, same numbering (breadth-first: by depth, then by
the first draft through the node), bit for bit (``tests/test_tree_host.py`` checks both against
each other).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

#: draft tokens (B x p x h) up to which the walk beats the vectorised build on a CPU
HOST_TREE_TOKENS = 256


def host_tree_fields(drafts: Tensor, lengths: Tensor, root, position_offset, dtype, pad_token: int, num_nodes):
    """The batched :class:`~draftlattice.verify.tree.TokenTree` fields of ``drafts [B, p, h]``
    (CPU) with ``lengths [B, p]``, in the field order of ``TokenTree``."""
    B, P, H = drafts.shape
    rows_in, lengths_in = drafts.tolist(), lengths.tolist()
    node = [[[-1] * H for _ in range(P)] for _ in range(B)]
    counts = [1] * B
    # one entry per real draft token: (row, node, token, parent, depth, first draft); a node
    # shared by several drafts gets the same entry from each
    entries, ancestors = [], []
    for b in range(B):
        seen: dict[tuple, tuple[int, int]] = {}  # prefix -> (its node, the first draft through it)
        for j in range(H):
            for d in range(P):
                if j >= lengths_in[b][d]:
                    continue
                key = tuple(rows_in[b][d][: j + 1])
                if key not in seen:
                    seen[key] = (counts[b], d)
                    counts[b] += 1
                n, first = seen[key]
                node[b][d][j] = n
                entries.append((b, n, rows_in[b][d][j], node[b][d][j - 1] if j else 0, j + 1, first))
                ancestors += [(b, n, a) for a in node[b][d][: j + 1]]
    T = max(counts) if num_nodes is None else int(num_nodes)
    if T < max(counts):
        raise ValueError(f"num_nodes={T} is fewer than the tree's {max(counts)} nodes")
    tokens = np.full((B, T), pad_token, dtype=np.int64)
    parent = np.full((B, T), -1, dtype=np.int64)
    depth = np.zeros((B, T), dtype=np.int64)
    node_draft = np.zeros((B, T), dtype=np.int64)
    ancestor = np.zeros((B, T, T), dtype=bool)
    if entries:
        b, n, token, up, level, first = np.array(entries, dtype=np.int64).T
        tokens[b, n], parent[b, n], depth[b, n], node_draft[b, n] = token, up, level, first
        b, n, a = np.array(ancestors, dtype=np.int64).T
        ancestor[b, n, a] = True
    counts = np.array(counts, dtype=np.int64)
    tokens[:, 0] = torch.as_tensor(root, dtype=torch.int64).numpy()
    node_valid = np.arange(T) < counts[:, None]
    ancestor[:, :, 0] |= node_valid
    ancestor |= np.eye(T, dtype=bool)
    ancestor_t = torch.from_numpy(ancestor)
    mask = torch.zeros(B, T, T, dtype=dtype).masked_fill_(~ancestor_t, torch.finfo(dtype).min)
    offset = torch.as_tensor(position_offset, dtype=torch.int64)
    if offset.dim() == 1:
        offset = offset.unsqueeze(-1)
    depth_t = torch.from_numpy(depth)
    return (
        torch.from_numpy(tokens),
        torch.from_numpy(parent),
        depth_t,
        mask,
        offset + depth_t,
        ancestor_t,
        torch.tensor(node, dtype=torch.int64).view(B, P, H),
        torch.from_numpy(node_draft),
        torch.from_numpy(node_valid),
        torch.from_numpy(counts),
    )


def host_greedy_path(
    tokens: Tensor, parent: Tensor, node_valid: Tensor, node_draft: Tensor, targets: Tensor, depth: int
):
    """Greedy acceptance on a batched CPU tree by walking down from each root: ``(best draft,
    num, next token, path [B, depth + 1] (-1 past num), last node)``, the fields of
    :class:`~draftlattice.verify.tree.TreeAcceptResult` in its order. ``targets [B, T]``: the
    target's greedy token at every node."""
    tokens_in, parent_in, valid_in, target_in = (t.tolist() for t in (tokens, parent, node_valid, targets))
    num, following, last, paths = [], [], [], []
    for row_tokens, row_parent, row_valid, row_target in zip(tokens_in, parent_in, valid_in, target_in):
        path = accepted_walk(row_tokens, row_parent, row_target, row_valid)
        num.append(len(path) - 1)
        following.append(row_target[path[-1]])
        last.append(path[-1])
        paths.append(path + [-1] * (depth + 1 - len(path)))
    as_tensor = lambda values: torch.tensor(values, dtype=torch.int64)  # noqa: E731
    last_node = as_tensor(last)
    best = node_draft.gather(1, last_node.unsqueeze(1)).squeeze(1)
    return best, as_tensor(num), as_tensor(following), as_tensor(paths), last_node


def host_accepted_path(tokens: Tensor, parent: Tensor, node_valid: Tensor, targets: Tensor, depth: int):
    """What :func:`~draftlattice.verify.path.accept_tree` keeps of greedy acceptance on a
    batched CPU tree, from one walk: ``(num [B], committed [B, depth + 1], slots [B, depth + 1],
    last node [B])``, equal to what the vectorised ops give (the committed tokens past ``num``
    repeat the last node's token, then 0; the slots past ``num`` repeat the last node).

    Why: a step's acceptance is otherwise ~20 small tensor ops (gathers, scatters, aranges),
    each ~10 us on a CPU right after a forward has flushed the caches, for a dozen nodes."""
    tokens_in, parent_in, valid_in, target_in = (t.tolist() for t in (tokens, parent, node_valid, targets))
    nums, committed, slots, last = [], [], [], []
    for row_tokens, row_parent, row_valid, row_target in zip(tokens_in, parent_in, valid_in, target_in):
        path = accepted_walk(row_tokens, row_parent, row_target, row_valid)
        num, end = len(path) - 1, path[-1]
        row = [row_tokens[n] for n in path[1:]] + [row_tokens[end]] * (depth - num) + [0]
        row[num] = row_target[end]
        nums.append(num)
        committed.append(row)
        slots.append(path + [end] * (depth - num))
        last.append(end)
    as_tensor = lambda values: torch.tensor(values, dtype=torch.int64)  # noqa: E731
    return as_tensor(nums), as_tensor(committed), as_tensor(slots), as_tensor(last)


def accepted_walk(
    tokens: list[int], parent: list[int], target: list[int], valid: list[bool] | None = None
) -> list[int]:
    """One tree row's accepted nodes from its root down: each next node is the child holding the
    target's token at the node before it (``valid``: the row's real nodes; None: all)."""
    child: dict[tuple[int, int], int] = {}  # (parent node, token) -> node; siblings differ
    for n in range(1, len(tokens)):
        if valid is None or valid[n]:
            child.setdefault((parent[n], tokens[n]), n)
    path = [0]
    while (nxt := child.get((path[-1], target[path[-1]]))) is not None:
        path.append(nxt)
    return path
