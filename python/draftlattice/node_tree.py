"""The n best nodes of a lattice's prefix tree: a token tree to verify under a node budget.

A greedy verification call accepts the longest drafted prefix of the target's continuation, so a
token tree is worth the sum over its nodes of the chance that each node's prefix is accepted. The
p best drafts (:func:`draftlattice.rescore`) spend nodes on the tails of unlikely drafts, since
each runs to the last head; the n best prefixes put every node where the scores say acceptance is
likeliest (the trees of EAGLE-2 and Sequoia, here over the lattice rescored by an n-gram LM). On
held-out prompts of the default model, at equal node counts, they accept 0.06-0.15 more tokens a
call (bench/RESULTS.md, "Trees of the best prefixes").

The score of a prefix ``d_1 .. d_m`` (one candidate for each of the first m heads) is

    total(d) = sum_t lattice.logprobs[t, rank_t] + alpha * ln p_LM(d_1 .. d_m | context)

(without an LM, the lattice term alone). Every term is <= 0, so a prefix never scores above its
parent: ordered by (total desc, length asc, rank sequence lexicographic asc), every parent comes
before its children, and the first n prefixes in that order form a tree. :func:`best_nodes`
returns exactly those (a best-first search in C++, csrc/best_nodes.h; n * k LM scores). With
``alpha > 0`` a prefix the LM gives ``-inf`` is never chosen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _core
from ._core import LmMemo, LmState
from .lattice import Lattice
from .rescore import as_lattices, contexts_in

#: Past a shorter path's end in :meth:`NodeTree.paths`.
PAD = -1


@dataclass(frozen=True)
class NodeTree:
    """The chosen prefixes of one lattice, best first; every parent precedes its children.

    Attributes:
        parents: [n] int32, the node each node extends (-1: the empty prefix).
        ranks: [n] int32, its candidate's rank in its head (column of :attr:`Lattice.tokens`).
        depths: [n] int32, its length (1 = the first head's candidate).
        tokens: [n] int32, its candidate's token id.
        scores: [n] float64, the prefix's total (module docstring).
    """

    parents: np.ndarray
    ranks: np.ndarray
    depths: np.ndarray
    tokens: np.ndarray
    scores: np.ndarray

    def __len__(self) -> int:
        return int(self.parents.shape[0])

    def paths(self, width: int | None = None) -> np.ndarray:
        """``[leaves, width]`` int64: each leaf's prefix, ``-1`` past its end, leaves best first
        (``width`` defaults to the deepest node's depth). A tree of drafts whose prefixes are
        exactly these nodes: what the decoding engine verifies."""
        n = len(self)
        depth = int(self.depths.max()) if n else 0
        width = depth if width is None else width
        if width < depth:
            raise ValueError(f"width={width} is shorter than the tree's deepest node ({depth})")
        has_child = np.zeros(n, dtype=bool)
        has_child[self.parents[self.parents >= 0]] = True
        leaves = np.flatnonzero(~has_child)
        out = np.full((len(leaves), width), PAD, dtype=np.int64)
        for row, leaf in enumerate(leaves):
            node = int(leaf)
            while node >= 0:
                out[row, self.depths[node] - 1] = self.tokens[node]
                node = int(self.parents[node])
        return out


def tree_drafts(tree: NodeTree, candidates: np.ndarray, width: int) -> np.ndarray:
    """The drafts that verify ``tree``: its leaves' paths ``[leaves, width]`` (:meth:`NodeTree.paths`).
    A tree the LM emptied (every prefix ``-inf``) drafts the lattice's 1-best instead, the first
    column of its ``candidates [h, k]``: a step always verifies a draft."""
    if len(tree):
        return tree.paths(width)
    return np.asarray(candidates)[:, :1].T.astype(np.int64)


def best_nodes(
    lattice: Lattice,
    lm: Any,
    nodes: int,
    alpha: float = 1.0,
    context: Sequence[int] | np.ndarray | LmState = (),
    bos: bool = False,
) -> NodeTree:
    """The ``nodes`` best prefixes of ``lattice`` (all of them if it has fewer), exactly.

    Args:
        lattice: an h x k :class:`Lattice`.
        lm: a :class:`draftlattice.NgramLM` over the same token ids, or None (lattice scores only;
            ``alpha``, ``context`` and ``bos`` are then unused).
        nodes: tree nodes wanted, >= 1 (the root, the known next token, not counted).
        alpha: LM weight, in [0, 1e6] (a larger one overflows the scores).
        context: already decoded token ids, or the :class:`~draftlattice.LmState` after them
            (as :func:`draftlattice.rescore`).
        bos: put ``<s>`` before the context tokens.

    Raises:
        TypeError: a non-integer ``nodes``, a non-number alpha, a lattice or lm of the wrong type.
        ValueError: nodes < 1, alpha < 0 or NaN, token ids outside the LM's vocabulary, a state
            of another LM.
    """
    return best_nodes_batch([lattice], lm, nodes, alpha, [context], bos, num_threads=1)[0]


def best_nodes_batch(
    lattices: Any,
    lm: Any,
    nodes: int,
    alpha: float = 1.0,
    contexts: Any = None,
    bos: bool = False,
    num_threads: int | None = None,
    memos: Sequence[LmMemo | None] | None = None,
) -> list[NodeTree]:
    """:func:`best_nodes` for B lattices in parallel (C++ threads, GIL released).

    ``lattices``, ``contexts``, ``num_threads`` and ``memos`` as :func:`draftlattice.rescore_batch`
    takes them (a list of :class:`Lattice` or ``(tokens, logprobs)`` arrays ``[B, h, k]``).
    """
    pair = isinstance(lattices, tuple) and len(lattices) == 2
    if not pair and not (isinstance(lattices, (list, tuple)) and all(isinstance(x, Lattice) for x in lattices)):
        raise TypeError(
            "lattices must be a list of draftlattice.Lattice or a (tokens, logprobs) pair of [B, h, k] arrays, "
            f"got {type(lattices).__name__}"
        )
    built = as_lattices(lattices, None, 1.0, num_threads)
    contexts = None if lm is None else contexts_in(contexts)
    cores = [lattice._core for lattice in built]
    found = _core.best_nodes_batch(cores, lm, nodes, alpha, contexts, bos, num_threads, memos)
    return [NodeTree(*arrays) for arrays in found]
