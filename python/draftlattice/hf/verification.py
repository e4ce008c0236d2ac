"""One verification forward of the base model over the drafts, and what it accepts.

Two layouts of the same ``p`` drafts of ``g`` tokens each (the root is the last committed token,
whose KV is not yet cached; node ``j`` of a chain is draft token ``j``):

* ``"tree"``: one row per sequence holding the trie of the drafts (shared prefixes once), with a
  tree attention mask and positions ``root position + depth``; the accepted path's KV slots are
  gathered per layer afterwards.
* ``"batch"``: ``p`` rows per sequence (the cache rows repeated), a causal chain each; the
  accepted row's cache is kept.

Both return the target's scores at every node after the generation logits processors, so a
processor such as a repetition penalty sees exactly the sequence it would see in ``generate()``:
the committed tokens followed by the node's own path.
"""

from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass

import torch
from torch import Tensor

from ..verify import build_tree, greedy_accept, tree_greedy_accept, tree_kv_indices
from ..verify.tree import TokenTree
from .cache import additive_mask, repeat_rows


@dataclass
class Forward:
    """A verification forward: per-node hidden states and processed scores.

    Rows ``R`` are sequences (tree) or sequence x draft (batch), nodes ``N`` per row.
    """

    z: Tensor  #: [R, N, d] final hidden states
    scores: Tensor  #: [R, N, V] float32 target scores after the logits processors
    tree: TokenTree | None  #: the token tree (tree layout), on the device


@dataclass
class Accepted:
    """What a verification accepts, per sequence (device tensors)."""

    num: Tensor  #: [B] accepted draft tokens
    tokens: Tensor  #: [B, g+1] accepted draft tokens, then the target's token at index num
    z_last: Tensor  #: [B, d] hidden state at the last accepted node (the heads read it)
    scores: Tensor  #: [B, g+1, V] scores that chose tokens[:, j] (at the path's node j)
    cache_rows: Tensor | None  #: [B] cache row to keep per sequence (batch layout)
    slots: Tensor  #: [B, g+1] block-relative cache slots of the root and the accepted nodes


@dataclass
class Target:
    """The base model and what every verification forward needs."""

    model: object
    cache: object  #: the model's DynamicCache, edited in place
    dtype: torch.dtype  #: dtype of the additive masks (the model's)
    processors: object  #: generate()'s logits processors (may be empty)
    max_position: int  #: largest position id a forward may use

    def __post_init__(self) -> None:
        self.keyword = cache_keyword(self.model)

    def hidden(self, input_ids: Tensor, position_ids: Tensor, attention_mask: Tensor | None) -> Tensor:
        """``base_model(...).last_hidden_state`` ``[R, N, d]``, the cache extended in place.

        Positions are clamped to ``max_position``: only draft nodes past ``max_length`` (never
        committed) reach it, and learned position tables (GPT-2) would fail on them.
        """
        out = self.model.base_model(
            input_ids=input_ids,
            position_ids=position_ids.clamp(max=self.max_position),
            attention_mask=attention_mask,
            use_cache=True,
            **{self.keyword: self.cache},
        )
        return out.last_hidden_state


def cache_keyword(model) -> str:
    """Name of the base model's cache argument (``cache`` in recent transformers 5.x, where
    ``past_key_values`` is deprecated; ``past_key_values`` before)."""
    parameters = inspect.signature(model.base_model.forward).parameters
    return "cache" if "cache" in parameters else "past_key_values"


def max_position(model, max_length: int) -> int:
    """The largest position id generation up to ``max_length`` tokens may use."""
    limit = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
    return max(limit or 0, max_length) - 1


def process_scores(
    processors,
    sequences: list[Tensor],
    row_sequence: list[int],
    logits: Tensor,
    paths: Tensor,
    depth: list[list[int]],
    valid: list[list[bool]],
) -> Tensor:
    """Apply ``processors`` to the logits of every node.

    ``sequences[s]``: committed ids of sequence s (1-d, device); row r belongs to sequence
    ``row_sequence[r]``; node n of row r has ``depth[r][n]`` path tokens ``paths[r, n, :depth]``.
    Nodes of one row and depth share a length, so they are processed together, through
    :func:`row_processors` (processors may hold per-row state).
    """
    if all(isinstance(proc, _context_free_processors()) for proc in processors):
        R, N, V = logits.shape  # one call over all nodes: these look at the scores only
        dummy = torch.zeros(R * N, 1, dtype=torch.int64, device=logits.device)
        return processors(dummy, logits.reshape(R * N, V)).view(R, N, V)
    scores = logits.clone()
    batch = len(sequences)
    for r, s in enumerate(row_sequence):
        groups: dict[int, list[int]] = {}
        for n, (d, ok) in enumerate(zip(depth[r], valid[r])):
            if ok:
                groups.setdefault(d, []).append(n)
        for d, nodes in groups.items():
            index = torch.tensor(nodes).to(logits.device, non_blocking=True)
            seq = sequences[s].unsqueeze(0).expand(len(nodes), -1)
            ids = torch.cat([seq, paths[r].index_select(0, index)[:, :d]], dim=1)
            scores[r, index] = row_processors(processors, s, batch, len(nodes))(ids, logits[r].index_select(0, index))
    return scores


def _context_free_processors() -> tuple[type, ...]:
    """Processors whose output depends on the scores alone (not on input_ids or the row)."""
    from transformers.generation import logits_process as lp

    names = (
        "TemperatureLogitsWarper",
        "TopKLogitsWarper",
        "TopPLogitsWarper",
        "MinPLogitsWarper",
        "TypicalLogitsWarper",
        "EpsilonLogitsWarper",
        "EtaLogitsWarper",
    )
    return tuple(getattr(lp, name) for name in names if hasattr(lp, name))


def row_processors(processors, row: int, batch: int, copies: int):
    """``processors`` seen by ``copies`` copies of sequence ``row`` of a batch of ``batch``.

    generate() builds some processors with per-row state (the repetition penalty's
    ``prompt_ignore_length [B]``, the left-padding lengths); tensor attributes whose first
    dimension is the batch are sliced to ``row`` and repeated ``copies`` times.
    """
    from transformers.generation.logits_process import LogitsProcessorList

    views = LogitsProcessorList()
    for proc in processors:
        per_row = {
            name: value
            for name, value in vars(proc).items()
            if isinstance(value, Tensor) and value.dim() >= 1 and value.shape[0] == batch
        }
        if per_row:
            proc = copy.copy(proc)
            for name, value in per_row.items():
                setattr(proc, name, value[row : row + 1].expand(copies, *value.shape[1:]))
        views.append(proc)
    return views


def _tree_on(tree: TokenTree, device: torch.device) -> TokenTree:
    fields = {k: (v.to(device, non_blocking=True) if isinstance(v, Tensor) else v) for k, v in tree.__dict__.items()}
    return TokenTree(**fields)


def tree_forward(
    target: Target, kv_valid: Tensor, root: Tensor, drafts: Tensor, positions: Tensor, sequences: list[Tensor]
) -> Forward:
    """Forward over the trie of ``drafts [B, p, g]`` (host) rooted at ``root [B]`` (device)."""
    device = root.device
    tree = build_tree(drafts, position_offset=positions, dtype=target.dtype)  # on the host: no sync
    on_device = _tree_on(tree, device)
    tokens = on_device.tokens.clone()
    tokens[:, 0] = root
    z = target.hidden(tokens, on_device.position_ids, additive_mask(kv_valid, on_device.ancestor, target.dtype))
    logits = target.model.get_output_embeddings()(z).float()
    if target.processors:
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
    return Forward(z, logits, on_device)


def tree_accept(forward: Forward) -> Accepted:
    tree = forward.tree
    result = tree_greedy_accept(tree, forward.scores)
    B = tree.tokens.shape[0]
    slots = tree_kv_indices(result, 0)  # [B, g+1] root and accepted nodes, by depth
    rows = torch.arange(B, device=slots.device)
    tokens = tree.tokens.gather(1, slots)[:, 1:]  # accepted nodes' tokens (repeats past num)
    tokens = torch.cat([tokens, torch.zeros_like(tokens[:, :1])], dim=1)
    tokens.scatter_(1, result.num_accepted.unsqueeze(1), result.next_token.unsqueeze(1))
    scores = forward.scores[rows.unsqueeze(1), slots]
    return Accepted(result.num_accepted, tokens, forward.z[rows, result.last_node], scores, None, slots)


def chain_forward(
    target: Target, kv_valid: Tensor, root: Tensor, drafts: Tensor, positions: Tensor, sequences: list[Tensor]
) -> Forward:
    """Forward over ``p`` chains per sequence: ``drafts [B, p, g]`` (host or device)."""
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
    z = target.hidden(tokens, position_ids, additive_mask(kv_valid, causal, target.dtype))
    logits = target.model.get_output_embeddings()(z).float()
    if target.processors:
        depth = [list(range(g + 1))] * (B * p)
        valid = [[True] * (g + 1)] * (B * p)
        paths = drafts.reshape(B * p, 1, g).expand(B * p, g + 1, g)
        logits = process_scores(
            target.processors, sequences, [b for b in range(B) for _ in range(p)], logits, paths, depth, valid
        )
    return Forward(z, logits, None)


def chain_accept(
    forward: Forward,
    drafts: Tensor,
    num: Tensor | None = None,
    next_token: Tensor | None = None,
    best: Tensor | None = None,
) -> Accepted:
    """Greedy acceptance over the chains, or the given ``num``/``next_token`` of chain ``best``
    (a sampling rule's result; ``best`` None = chain 0)."""
    B, p, g = drafts.shape
    device = forward.z.device
    scores = forward.scores.view(B, p, g + 1, -1)
    drafts = drafts.to(device, non_blocking=True)
    if num is None:
        best, num, next_token = greedy_accept(drafts, scores)
    elif best is None:
        best = torch.zeros(B, dtype=torch.int64, device=device)
    rows = torch.arange(B, device=device)
    tokens = torch.cat([drafts[rows, best], torch.zeros_like(drafts[:, 0, :1])], dim=1)
    tokens.scatter_(1, num.unsqueeze(1), next_token.unsqueeze(1))
    cache_rows = rows * p + best
    z_last = forward.z[cache_rows, num]
    slots = torch.arange(g + 1, device=device).expand(B, g + 1)
    return Accepted(num, tokens, z_last, scores[rows, best], cache_rows if p > 1 else None, slots)
