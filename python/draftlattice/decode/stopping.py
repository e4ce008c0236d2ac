"""Per-row stopping for block decoding: length, EOS and other criteria, token by token.

A verification step commits several tokens per row; each one is checked as generate() would
check it after producing that token, so a row stops exactly where generate() stops it (an EOS
or the length limit inside a block drops the rest of the block).

Without EOS ids, generate() does not pad a row that a user criterion stopped: the row goes on
producing tokens until every row has stopped, and all rows end at the longest one's length.
:class:`RowStopper` does the same.
"""

from __future__ import annotations

import numbers

import torch
from torch import Tensor


class RowStopper:
    """Commits tokens row by row and knows which rows are finished.

    A row stops at ``max_new_tokens`` new tokens, at any of ``eos_ids``, or when one of
    ``others`` (callables like transformers' stopping criteria: stop strings, user criteria)
    says so; those are called per committed token on that row's sequence ``[1, prompt + new]``,
    with the scores that chose the token. With ``eos_ids``, stopped rows are padded with ``pad``;
    without, as in generate(), a row stopped early goes on until the last row stops (``done``:
    the rows that take no more tokens).
    """

    def __init__(self, input_ids: Tensor, max_new_tokens: float, eos_ids: set[int], others: list, pad: int) -> None:
        if max_new_tokens == float("inf") and not others:
            raise ValueError("no stopping criterion: set max_new_tokens or max_length")
        # A row allowed no token would never stop (commit() turns the prefill's token away before
        # it could stop the row): the engine would loop for ever.
        if max_new_tokens != float("inf") and (
            isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, numbers.Integral) or max_new_tokens < 1
        ):
            raise ValueError(f"max_new_tokens must be an int >= 1 (or inf with other criteria), got {max_new_tokens!r}")
        self.prompt = input_ids
        self.max_new = max_new_tokens
        self.eos = set(eos_ids)
        self.others = list(others)
        self.done = [False] * input_ids.shape[0]
        self.stopped_at: list[int | None] = [None] * input_ids.shape[0]  # new tokens when the row stopped
        self.width: float = max_new_tokens  # every row's new tokens at the end, once all stopped
        self._running = input_ids.shape[0]  # rows not stopped yet
        self.pad = pad

    @property
    def all_done(self) -> bool:
        return all(self.done)

    def commit(self, b: int, tokens: list[int], new_tokens: list[list[int]], scores: Tensor) -> None:
        """Append ``tokens`` to row ``b`` until one of them stops it (``scores[j]`` chose token j)."""
        row = new_tokens[b]
        for j, token in enumerate(tokens):
            if len(row) >= self.width:
                break  # a row that goes on after its stop (no EOS ids) has reached the batch's end
            row.append(token)
            if self.stopped_at[b] is None and (
                token in self.eos or len(row) >= self.max_new or self._others_stop(b, row, scores[j])
            ):
                self._stop(b, len(row), new_tokens)
                if self.eos:
                    break
        self.done[b] = self.stopped_at[b] is not None and (bool(self.eos) or len(row) >= self.width)

    def _stop(self, b: int, n: int, new_tokens: list[list[int]]) -> None:
        self.stopped_at[b] = n
        self._running -= 1
        if self._running or self.eos:
            return
        # The last row stopped: every row ends at the longest one's length. Rows short of it go
        # on to it; a row that went past it (rows advance unevenly) is cut there by output().
        self.width = max(self.stopped_at)
        for r, row in enumerate(new_tokens):
            self.done[r] = len(row) >= self.width

    def _others_stop(self, b: int, new: list[int], scores: Tensor) -> bool:
        if not self.others:
            return False
        ids = torch.cat([self.prompt[b], self.prompt.new_tensor(new)]).unsqueeze(0)
        return any(bool(criterion(ids, scores.unsqueeze(0)).reshape(-1)[0]) for criterion in self.others)

    def output(self, input_ids: Tensor, new_tokens: list[list[int]]) -> Tensor:
        """``[B, prompt + longest]``: each row's new tokens, padded with the pad token (without EOS
        ids, every row has the longest stopped row's tokens; those decoded past them are cut)."""
        width = int(min(max(len(t) for t in new_tokens), self.width))
        rows = [t[:width] + [self.pad] * (width - len(t)) for t in new_tokens]
        return torch.cat([input_ids, input_ids.new_tensor(rows).view(len(rows), width)], dim=1)
