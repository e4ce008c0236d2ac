"""Verifiers of speculative decoding, as pure functions on PyTorch tensors (CPU or CUDA).

* Greedy, several drafts (Stern et al. 2018; Kim et al. 2024): :func:`greedy_accept`.
* Tree verification of drafts sharing prefixes: :func:`build_tree`, :func:`tree_greedy_accept`,
  :func:`gather_tree_kv` (same result as :func:`greedy_accept`, one forward over the trie).
* Speculative sampling: :func:`token_verify` (Leviathan et al. 2023; Chen et al. 2023) and
  :func:`block_verify` (Sun et al. 2024), with their deterministic parts
  (:func:`token_accept_probs`, :func:`block_accept_probs`, :func:`residual_distribution`) and
  exact output laws (:func:`token_verify_distribution`, :func:`block_verify_distribution`).
* :func:`sampling_distribution`: temperature / top-k / top-p, to turn logits into ``p`` and ``q``.
"""

from ._common import residual_distribution, sampling_distribution
from .greedy import GreedyResult, greedy_accept, target_tokens
from .sampling import (
    BlockProbs,
    block_accept_probs,
    block_verify,
    block_verify_distribution,
    token_accept_probs,
    token_verify,
    token_verify_distribution,
)
from .tree import (
    TokenTree,
    TreeAcceptResult,
    build_tree,
    draft_logits_from_tree,
    gather_tree_kv,
    tree_greedy_accept,
    tree_kv_indices,
)

__all__ = [
    "BlockProbs",
    "GreedyResult",
    "TokenTree",
    "TreeAcceptResult",
    "block_accept_probs",
    "block_verify",
    "block_verify_distribution",
    "build_tree",
    "draft_logits_from_tree",
    "gather_tree_kv",
    "greedy_accept",
    "residual_distribution",
    "sampling_distribution",
    "target_tokens",
    "token_accept_probs",
    "token_verify",
    "token_verify_distribution",
    "tree_greedy_accept",
    "tree_kv_indices",
]
