"""Draft heads over a part of the vocabulary: the output projection of the tokens they may draft.

Heads that read the next token cannot share the verification forward's output projection (the
token they read is chosen from it), so they pay one more projection a step, and at SmolLM2's
size that is mostly reading the [V, d] weight (56 MB in bf16) for three rows. Restricted to the
N most frequent tokens of the model's own output, the projection reads N / V of it; the other
tokens get -inf (never drafted). Drafts stay proposals: greedy output and the sampling law do
not change (a sampled draft's law q is computed from these same logits, zero outside the set).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def check_vocabulary(ids: Tensor, vocab_size: int) -> Tensor:
    """``ids`` as a sorted int64 vector of distinct token ids in ``[0, vocab_size)``; ValueError otherwise."""
    if not isinstance(ids, Tensor):
        ids = torch.as_tensor(ids)
    if ids.ndim != 1 or ids.numel() == 0 or ids.dtype.is_floating_point or ids.dtype == torch.bool:
        raise ValueError(
            f"a draft vocabulary is a non-empty 1-D tensor of token ids, got {ids.dtype} {tuple(ids.shape)}"
        )
    ids = ids.to(torch.int64).sort().values
    if int(ids[0]) < 0 or int(ids[-1]) >= vocab_size:
        raise ValueError(f"draft vocabulary ids must be in [0, {vocab_size}), got {int(ids[0])}..{int(ids[-1])}")
    if ids.numel() > 1 and bool((ids[1:] == ids[:-1]).any()):
        raise ValueError("draft vocabulary ids must be distinct")
    return ids


class RestrictedProjection:
    """``output_layer`` over the columns ``vocab`` only, scattered back to ``[..., V]`` with -inf.

    The gathered rows of the weight are kept between calls of one decoding run (inference mode),
    keyed on the weight's storage, dtype and device, so a model moved or cast gets new ones.
    """

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._rows: tuple[Tensor, Tensor | None] | None = None

    def __call__(self, states: Tensor, output_layer: nn.Module, vocab: Tensor) -> Tensor:
        weight, bias = output_layer.weight, getattr(output_layer, "bias", None)
        key = (weight.data_ptr(), weight.dtype, weight.device, vocab.data_ptr(), vocab.numel())
        if torch.is_inference_mode_enabled() and self._key == key:
            rows, row_bias = self._rows
        else:
            index = vocab.to(weight.device)
            rows = weight.detach().index_select(0, index)
            row_bias = None if bias is None else bias.detach().index_select(0, index)
            if torch.is_inference_mode_enabled():  # tensors made here may not enter autograd later
                self._key, self._rows = key, (rows, row_bias)
        part = F.linear(states.to(rows.dtype), rows, row_bias)
        out = part.new_full((*part.shape[:-1], weight.shape[0]), float("-inf"))
        return out.index_copy_(-1, vocab.to(part.device), part)
