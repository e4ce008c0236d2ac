"""Per-row stopping for block decoding: length, EOS and other criteria, token by token.

A verification step commits several tokens per row; each one is checked as generate() would
check it after producing that token, so a row stops exactly where generate() stops it (an EOS
or the length limit inside a block drops the rest of the block).
"""

from __future__ import annotations

import torch
from torch import Tensor


class RowStopper:
    """Commits tokens row by row and knows which rows are finished.

    A row stops at ``max_new_tokens`` new tokens, at any of ``eos_ids``, or when one of
    ``others`` (callables like transformers' stopping criteria: stop strings, user criteria)
    says so; those are called per committed token on that row's sequence ``[1, prompt + new]``,
    with the scores that chose the token. Finished rows are padded with ``pad``.
    """

    def __init__(self, input_ids: Tensor, max_new_tokens: float, eos_ids: set[int], others: list, pad: int) -> None:
        if max_new_tokens == float("inf") and not others:
            raise ValueError("no stopping criterion: set max_new_tokens or max_length")
        self.prompt = input_ids
        self.max_new = max_new_tokens
        self.eos = set(eos_ids)
        self.others = list(others)
        self.done = [False] * input_ids.shape[0]
        self.pad = pad

    @property
    def all_done(self) -> bool:
        return all(self.done)

    def commit(self, b: int, tokens: list[int], new_tokens: list[list[int]], scores: Tensor) -> None:
        """Append ``tokens`` to row ``b`` until one of them stops it (``scores[j]`` chose token j)."""
        for j, token in enumerate(tokens):
            new_tokens[b].append(token)
            if (
                token in self.eos
                or len(new_tokens[b]) >= self.max_new
                or self._others_stop(b, new_tokens[b], scores[j])
            ):
                self.done[b] = True
                return

    def _others_stop(self, b: int, new: list[int], scores: Tensor) -> bool:
        if not self.others:
            return False
        ids = torch.cat([self.prompt[b], self.prompt.new_tensor(new)]).unsqueeze(0)
        return any(bool(criterion(ids, scores.unsqueeze(0)).reshape(-1)[0]) for criterion in self.others)

    def output(self, input_ids: Tensor, new_tokens: list[list[int]]) -> Tensor:
        """``[B, prompt + longest]``: each row's new tokens, padded with the pad token."""
        width = max(len(t) for t in new_tokens)
        rows = [t + [self.pad] * (width - len(t)) for t in new_tokens]
        return torch.cat([input_ids, input_ids.new_tensor(rows).view(len(rows), width)], dim=1)
