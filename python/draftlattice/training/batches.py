"""Training batches for draft heads: fixed-length chunks of a token stream, or whole records.

Both yield ``(tokens [B, T] int64, valid [B, T] bool)``: ``valid[b, t]`` says whether token
``t`` of row ``b`` is a training target (padding and prompts are not). Their order is a pure
function of the seed and the position, so a resumed run sees the batches it would have seen.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from ..distilled_corpus import DistilledCorpus


class ChunkBatches:
    """``batch_size`` random chunks of ``seq_len`` tokens of ``ids`` per batch, all targets."""

    def __init__(self, ids: Tensor, batch_size: int, seq_len: int, seed: int) -> None:
        self.ids, self.batch_size, self.seq_len = ids, batch_size, seq_len
        self.generator = torch.Generator().manual_seed(seed)

    def next(self) -> tuple[Tensor, Tensor]:
        starts = torch.randint(0, self.ids.numel() - self.seq_len, (self.batch_size,), generator=self.generator)
        chunks = torch.stack([self.ids[s : s + self.seq_len] for s in starts.tolist()])
        return chunks, torch.ones_like(chunks, dtype=torch.bool)

    def skip(self, n: int) -> None:
        for _ in range(n):
            self.next()

    def state(self) -> dict:
        return {"generator": self.generator.get_state()}

    def set_state(self, state: dict) -> None:
        self.generator.set_state(state["generator"])


class RecordBatches:
    """Records of a distilled corpus, about ``batch_tokens`` tokens a batch, epoch after epoch.

    Each epoch shuffles the records (seeded by the epoch), sorts windows of them by length so a
    batch pads little, and shuffles the batches. Targets: a record's continuation (its tokens
    from ``prompt_len`` on); rows are right-padded, so padding never reaches real positions.
    """

    def __init__(self, corpus: DistilledCorpus, batch_tokens: int, max_len: int, seed: int) -> None:
        if len(corpus) == 0:
            raise ValueError("the distilled corpus has no records")
        self.corpus, self.batch_tokens, self.max_len, self.seed = corpus, batch_tokens, max_len, seed
        self.lengths = np.minimum(np.diff(corpus.offsets), max_len)
        self.epoch, self.position = 0, 0
        self.order = self._epoch_batches(0)

    def _epoch_batches(self, epoch: int) -> list[np.ndarray]:
        rng = np.random.default_rng([self.seed, epoch])
        records = rng.permutation(len(self.lengths))
        batches = []
        window = 64 * max(1, self.batch_tokens // max(1, int(self.lengths.mean())))
        for start in range(0, len(records), window):
            part = records[start : start + window]
            part = part[np.argsort(self.lengths[part], kind="stable")]
            batch: list[int] = []
            for r in part:
                if batch and (len(batch) + 1) * max(self.lengths[batch + [r]]) > self.batch_tokens:
                    batches.append(np.asarray(batch))
                    batch = []
                batch.append(int(r))
            if batch:
                batches.append(np.asarray(batch))
        return [batches[i] for i in rng.permutation(len(batches))]

    def next(self) -> tuple[Tensor, Tensor]:
        return self.rows_batch(self.next_rows())

    def next_rows(self) -> np.ndarray:
        """The record indices of the next batch (:meth:`rows_batch` makes its tensors)."""
        if self.position >= len(self.order):
            self.epoch, self.position = self.epoch + 1, 0
            self.order = self._epoch_batches(self.epoch)
        rows = self.order[self.position]
        self.position += 1
        return rows

    def rows_batch(self, rows: np.ndarray) -> tuple[Tensor, Tensor]:
        """``(tokens [B, T], valid [B, T])`` of records ``rows``, right-padded to the longest."""
        width = int(self.lengths[rows].max())
        tokens = np.zeros((len(rows), width), np.int64)
        valid = np.zeros((len(rows), width), bool)
        for b, r in enumerate(rows):
            record = self.corpus.record(int(r))[: self.max_len]
            tokens[b, : len(record)] = record
            valid[b, int(self.corpus.prompt_lens[r]) : len(record)] = True
        return torch.from_numpy(tokens), torch.from_numpy(valid)

    def skip(self, n: int) -> None:
        for _ in range(n):
            self.next()

    def state(self) -> dict:
        return {"epoch": self.epoch, "position": self.position}

    def set_state(self, state: dict) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self.order = self._epoch_batches(self.epoch)
