"""Verifiers of speculative decoding, as pure functions on PyTorch tensors (CPU or CUDA).

* Greedy, several drafts (Stern et al. 2018; Kim et al. 2024): :func:`greedy_accept`.
* Tree verification of drafts sharing prefixes: :func:`build_tree`, :func:`tree_greedy_accept`,
  :func:`gather_tree_kv` (same result as :func:`greedy_accept`, one forward over the trie).
* Speculative sampling: :func:`token_verify` (Leviathan et al. 2023; Chen et al. 2023) and
  :func:`block_verify` (Sun et al. 2024), with their deterministic parts
  (:func:`token_accept_probs`, :func:`block_accept_probs`, :func:`residual_distribution`) and
  exact output laws (:func:`token_verify_distribution`, :func:`block_verify_distribution`).
* Several drafts, lossless sampling: :func:`multi_draft_verify` (a deterministic token tree, or
  i.i.d. sampled drafts by recursive rejection sampling) with its exact law
  :func:`multi_draft_verify_distribution`.
* A decoding step's accepted path (:func:`accept_tree`, :func:`accept_chains`) and its sampling
  rules (:func:`verify_sampled`).
* :func:`sampling_distribution`: temperature / top-k / top-p, to turn logits into ``p`` and ``q``.

One tree-verification step with a Hugging Face model whose cache holds ``past`` context tokens
(``ids[:-1]``; the last committed token ``ids[-1]`` is the tree's root)::

    tree = build_tree(drafts, root_token=ids[-1], position_offset=past, dtype=model.dtype)
    out = model(input_ids=tree.tokens[None], attention_mask=tree.attention_mask_4d(past),
                position_ids=tree.position_ids[None], past_key_values=cache)
    res = tree_greedy_accept(tree, out.logits[0])
    k = int(res.num_accepted)
    for layer in cache.layers:  # keep the root and the accepted nodes
        layer.keys = gather_tree_kv(layer.keys, res, past)[:, :, : past + k + 1]
        layer.values = gather_tree_kv(layer.values, res, past)[:, :, : past + k + 1]
    ids += drafts[res.best_draft, :k].tolist() + [int(res.next_token)]

Sampling: ``p = sampling_distribution(target_logits, T, top_k, top_p)`` with the user's settings,
``q`` the distributions the drafter sampled ``draft_tokens`` from, then
``num, nxt = block_verify(draft_tokens, q, p, generator)``.
"""

from ._common import draw_categorical, residual_distribution, sampling_distribution
from .greedy import GreedyResult, greedy_accept, target_tokens
from .multi_draft import MultiDraftResult, multi_draft_verify, multi_draft_verify_distribution
from .path import AcceptedPath, accept_chains, accept_tree, accept_tree_chains, chain_nodes
from .sampled import SAMPLE_RULES, verify_sampled
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
    "SAMPLE_RULES",
    "AcceptedPath",
    "BlockProbs",
    "GreedyResult",
    "MultiDraftResult",
    "TokenTree",
    "TreeAcceptResult",
    "accept_chains",
    "accept_tree",
    "accept_tree_chains",
    "block_accept_probs",
    "block_verify",
    "block_verify_distribution",
    "build_tree",
    "chain_nodes",
    "draft_logits_from_tree",
    "gather_tree_kv",
    "greedy_accept",
    "multi_draft_verify",
    "multi_draft_verify_distribution",
    "residual_distribution",
    "sampling_distribution",
    "draw_categorical",
    "target_tokens",
    "token_accept_probs",
    "token_verify",
    "token_verify_distribution",
    "tree_greedy_accept",
    "tree_kv_indices",
    "verify_sampled",
]
