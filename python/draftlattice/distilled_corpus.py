"""The distilled-corpus format: the model's own answers to prompts, as token ids on disk.

A corpus is a folder that :func:`draftlattice.training.distill.distill` writes and the heads
trainer and ``lm build`` read (this module needs numpy only, so ``ngram/`` reads corpora without
torch)::

    meta.json            {"format": "draftlattice-distilled", "version": 1, "model", "mode", ...}
    shard-00000.npz      tokens int32 [N] (records back to back), offsets int64 [R + 1],
                         prompt_lens int32 [R] (a record's first prompt_lens tokens are its prompt)
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FORMAT = "draftlattice-distilled"
VERSION = 1
META = "meta.json"


@dataclass
class DistilledCorpus:
    """Records (prompt + the model's continuation) loaded from a distilled-corpus folder."""

    tokens: np.ndarray  #: int32 [N], records back to back
    offsets: np.ndarray  #: int64 [R + 1]
    prompt_lens: np.ndarray  #: int32 [R]
    meta: dict

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> DistilledCorpus:
        folder = Path(folder)
        meta_path = folder / META
        if not meta_path.is_file():
            raise FileNotFoundError(f"{folder}: no {META}; not a distilled corpus (draftlattice.training.distill)")
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != FORMAT:
            raise ValueError(f"{meta_path}: format {meta.get('format')!r} is not {FORMAT!r}")
        shards = sorted(folder.glob("shard-*.npz"))
        if not shards:
            raise ValueError(f"{folder}: no shards yet")
        tokens, offsets, prompt_lens = [], [np.zeros(1, np.int64)], []
        base = 0
        for shard in shards:
            with np.load(shard) as data:
                tokens.append(data["tokens"].astype(np.int32))
                offsets.append(data["offsets"][1:].astype(np.int64) + base)
                prompt_lens.append(data["prompt_lens"].astype(np.int32))
                base += int(data["offsets"][-1])
        return cls(np.concatenate(tokens), np.concatenate(offsets), np.concatenate(prompt_lens), meta)

    def __len__(self) -> int:
        return len(self.prompt_lens)

    def record(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    @property
    def generated_tokens(self) -> int:
        return int(self.offsets[-1]) - int(self.prompt_lens.sum())


def write_shard(path: Path, records: Sequence[tuple[np.ndarray, int]]) -> None:
    """Writes ``records`` (token ids, prompt length) as one shard, atomically (a temporary name, then a
    rename), so a shard that exists is complete."""
    tokens = np.concatenate([r for r, _ in records]).astype(np.int32)
    offsets = np.zeros(len(records) + 1, np.int64)
    offsets[1:] = np.cumsum([len(r) for r, _ in records])
    prompt_lens = np.asarray([p for _, p in records], np.int32)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, tokens=tokens, offsets=offsets, prompt_lens=prompt_lens)
    os.replace(tmp, path)
