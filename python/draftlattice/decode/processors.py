"""generate()'s logits processors at every node of a verification forward.

A processor such as a repetition penalty must see exactly the sequence it would see in
``generate()``: the committed tokens followed by the node's own draft path.
"""

from __future__ import annotations

import copy

import torch
from torch import Tensor


def needs_context(processors) -> bool:
    """Whether some processor reads the sequence (e.g. a repetition penalty), not only the scores."""
    return bool(processors) and not all(isinstance(proc, _context_free_processors()) for proc in processors)


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

    For processors that :func:`needs_context` (else :func:`process_scores_only`).
    ``sequences[s]``: committed ids of sequence s (1-d, device); row r belongs to sequence
    ``row_sequence[r]``; node n of row r has ``depth[r][n]`` path tokens ``paths[r, n, :depth]``.
    Nodes of one row and depth share a length, so they are processed together, through
    :func:`row_processors` (processors may hold per-row state).
    """
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


def process_scores_only(processors, logits: Tensor) -> Tensor:
    """``processors`` that look at the scores only (warpers), in one call over all nodes."""
    R, N, V = logits.shape
    dummy = torch.zeros(R * N, 1, dtype=torch.int64, device=logits.device)
    return processors(dummy, logits.reshape(R * N, V)).view(R, N, V)


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


# Per-row state of transformers' own processors: tensors [B, ...] that generate() builds from the
# batch. Their other tensors hold token ids (EOS ids, suppressed tokens), whatever their length.
_TRANSFORMERS_PER_ROW = {"RepetitionPenaltyLogitsProcessor": ("prompt_ignore_length",)}


def _per_row_state(proc, batch: int) -> dict[str, Tensor]:
    """The attributes of ``proc`` that hold one entry per row of the batch: for transformers'
    processors those of ``_TRANSFORMERS_PER_ROW``; for other (user) processors, every tensor
    attribute whose first dimension is the batch."""
    kind = type(proc)
    if kind.__module__.startswith("transformers."):
        names = _TRANSFORMERS_PER_ROW.get(kind.__name__, ())
    else:
        names = tuple(vars(proc))
    state = {name: getattr(proc, name, None) for name in names}
    return {
        name: value
        for name, value in state.items()
        if isinstance(value, Tensor) and value.dim() >= 1 and value.shape[0] == batch
    }


def row_processors(processors, row: int, batch: int, copies: int):
    """``processors`` seen by ``copies`` copies of sequence ``row`` of a batch of ``batch``.

    generate() builds some processors with per-row state (the repetition penalty's
    ``prompt_ignore_length [B]``, the left-padding lengths); those tensors
    (:func:`_per_row_state`) are sliced to ``row`` and repeated ``copies`` times. A tensor of
    token ids that happens to have B entries (e.g. two EOS ids in a batch of two) is left whole.
    """
    from transformers.generation.logits_process import LogitsProcessorList

    views = LogitsProcessorList()
    for proc in processors:
        per_row = _per_row_state(proc, batch)
        if per_row:
            proc = copy.copy(proc)
            for name, value in per_row.items():
                setattr(proc, name, value[row : row + 1].expand(copies, *value.shape[1:]))
        views.append(proc)
    return views
