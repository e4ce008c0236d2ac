"""One verification forward of the base model over the drafts.

Two layouts of the same ``p`` drafts of ``g`` tokens per sequence (the root is the last committed
token, whose KV is not yet cached; node ``j`` of a chain is draft token ``j``):

* ``"tree"``: one row per sequence holding the trie of the drafts (shared prefixes once), with a
  tree attention mask and positions ``root position + depth``; the accepted path's KV slots are
  gathered per layer afterwards. Sampling rules read the trie as chains
  (:func:`draftlattice.verify.path.chain_nodes`).
* ``"batch"``: ``p`` rows per sequence (the cache rows repeated), a causal chain each; the
  accepted row's cache is kept.

Both return the target's scores at every node after the generation logits processors
(:mod:`.processors`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from ..verify import build_tree
from ..verify.tree import TokenTree
from .cache import additive_mask, repeat_rows
from .processors import needs_context, process_scores, process_scores_only
from .target import Target

LAYOUTS = ("tree", "batch")


@dataclass
class Forward:
    """A verification forward: per-node hidden states and processed scores.

    Rows ``R`` are sequences (tree) or sequence x draft (batch), nodes ``N`` per row.
    """

    hidden: Tensor  #: [R, N, d] final hidden states
    scores: Tensor  #: [R, N, V] float32 target scores after the logits processors
    tree: TokenTree | None  #: the token tree (tree layout), on the device
    head_logits: Tensor | None = None  #: [R, N, h-1, V] the draft heads' logits at every node


def _tree_on(tree: TokenTree, device: torch.device) -> TokenTree:
    fields = {k: (v.to(device, non_blocking=True) if isinstance(v, Tensor) else v) for k, v in tree.__dict__.items()}
    return TokenTree(**fields)


def tree_forward(
    target: Target, kv_valid: Tensor, root: Tensor, drafts: Tensor, positions: Tensor, sequences: list[Tensor]
) -> Forward:
    """Forward over the trie of ``drafts [B, p, g]`` (``-1`` past the end of a shorter draft)
    rooted at ``root [B]`` (device). Drafts on the host (deterministic ones) give the smallest
    tree; drafts on an accelerator (sampled ones) give a tree padded to ``1 + p*g`` nodes, since
    sizing it there would cost a device->host synchronisation."""
    device = root.device
    lengths = (drafts >= 0).sum(-1)  # padding only ends a draft
    on_host = drafts.device.type == "cpu"
    tree = build_tree(  # built where the drafts are: no transfer, and no sync when padded
        drafts.clamp(min=0),
        lengths,
        position_offset=positions,
        dtype=target.dtype,
        num_nodes=None if on_host else 1 + drafts.shape[1] * drafts.shape[2],
    )
    on_device = _tree_on(tree, device)
    tokens = on_device.tokens.clone()
    tokens[:, 0] = root
    hidden = target.hidden(tokens, on_device.position_ids, additive_mask(kv_valid, on_device.ancestor, target.dtype))
    logits, head_logits = target.node_logits(hidden)
    if target.processors and not needs_context(target.processors):
        logits = process_scores_only(target.processors, logits)
    elif target.processors:  # the processors read each node's path: build the paths
        B, T = tree.tokens.shape
        g = drafts.shape[-1]
        # paths[b, n, j]: token of node n's ancestor at depth j + 1.
        by_depth = tree.ancestor.unsqueeze(-1) & (
            tree.depth.view(B, 1, T, 1) == torch.arange(1, g + 1).view(1, 1, 1, g)
        )
        paths = (by_depth * tree.tokens.view(B, 1, T, 1)).sum(2).to(device, non_blocking=True)
        logits = process_scores(
            target.processors, sequences, list(range(B)), logits, paths, tree.depth.tolist(), tree.node_valid.tolist()
        )
    return Forward(hidden, logits, on_device, head_logits)


def fill_padding(drafts: Tensor) -> Tensor:
    """Chains have one length: a shorter draft's ``-1`` padding repeats its last token. Only
    deterministic drafts are padded, and verification stays exact for any deterministic tokens
    (greedy acceptance keeps a token only if it is the target's own; the tree rule holds for any
    fixed tree); the padding only costs forward positions."""
    if drafts.device.type != "cpu" or not bool((drafts < 0).any()):
        return drafts
    drafts = drafts.clone()
    for j in range(1, drafts.shape[-1]):
        drafts[..., j] = torch.where(drafts[..., j] < 0, drafts[..., j - 1], drafts[..., j])
    return drafts


def chain_forward(
    target: Target, kv_valid: Tensor, root: Tensor, drafts: Tensor, positions: Tensor, sequences: list[Tensor]
) -> Forward:
    """Forward over ``p`` chains per sequence: ``drafts [B, p, g]`` (host or device; see
    :func:`fill_padding`)."""
    device = root.device
    B, p, g = drafts.shape
    drafts = drafts.to(device, non_blocking=True)
    if p > 1:
        repeat_rows(target.cache, p)
        kv_valid = kv_valid.repeat_interleave(p, dim=0)
    tokens = torch.cat([root.repeat_interleave(p).unsqueeze(1), drafts.reshape(B * p, g)], dim=1)
    offsets = torch.as_tensor(positions).to(device, non_blocking=True).repeat_interleave(p)
    position_ids = offsets.unsqueeze(1) + torch.arange(g + 1, device=device)
    causal = torch.ones(g + 1, g + 1, dtype=torch.bool, device=device).tril().expand(B * p, g + 1, g + 1)
    hidden = target.hidden(tokens, position_ids, additive_mask(kv_valid, causal, target.dtype))
    logits, head_logits = target.node_logits(hidden)
    if target.processors and not needs_context(target.processors):
        logits = process_scores_only(target.processors, logits)
    elif target.processors:  # the processors read each node's path: build the paths
        depth = [list(range(g + 1))] * (B * p)
        valid = [[True] * (g + 1)] * (B * p)
        paths = drafts.reshape(B * p, 1, g).expand(B * p, g + 1, g)
        logits = process_scores(
            target.processors, sequences, [b for b in range(B) for _ in range(p)], logits, paths, depth, valid
        )
    return Forward(hidden, logits, None, head_logits)
