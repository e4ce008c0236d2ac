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
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._core import FormatError
from .filekinds import describe

FORMAT = "draftlattice-distilled"
VERSION = 1
META = "meta.json"
ARRAYS = ("tokens", "offsets", "prompt_lens")


@dataclass
class DistilledCorpus:
    """Records (prompt + the model's continuation) loaded from a distilled-corpus folder."""

    tokens: np.ndarray  #: int32 [N], records back to back
    offsets: np.ndarray  #: int64 [R + 1]
    prompt_lens: np.ndarray  #: int32 [R]
    meta: dict

    @classmethod
    def load(cls, folder: str | os.PathLike[str]) -> DistilledCorpus:
        """Reads the corpus in ``folder``.

        Raises FileNotFoundError without meta.json, and FormatError (a ValueError) naming the file
        for a meta.json of another format or a shard that is damaged, lacks an array or whose
        arrays disagree.
        """
        folder = Path(folder)
        meta_path = folder / META
        if not meta_path.is_file():
            raise FileNotFoundError(f"{folder}: no {META}; not a distilled corpus (draftlattice.training.distill)")
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise FormatError(f"{meta_path}: not a JSON file ({error})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
            raise FormatError(f"{meta_path}: format {found!r} is not {FORMAT!r}")
        shards = sorted(folder.glob("shard-*.npz"))
        if not shards:
            raise ValueError(f"{folder}: no shards yet")
        tokens, offsets, prompt_lens = [], [np.zeros(1, np.int64)], []
        base = 0
        for shard in shards:
            shard_tokens, shard_offsets, shard_prompt_lens = _read_shard(shard)
            tokens.append(shard_tokens)
            offsets.append(shard_offsets[1:] + base)
            prompt_lens.append(shard_prompt_lens)
            base += int(shard_offsets[-1])
        return cls(np.concatenate(tokens), np.concatenate(offsets), np.concatenate(prompt_lens), meta)

    def __len__(self) -> int:
        return len(self.prompt_lens)

    def record(self, i: int) -> np.ndarray:
        return self.tokens[self.offsets[i] : self.offsets[i + 1]]

    @property
    def generated_tokens(self) -> int:
        return int(self.offsets[-1]) - int(self.prompt_lens.sum())


def _read_shard(shard: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tokens int32 [N], offsets int64 [R + 1], prompt_lens int32 [R]) of one shard, checked
    against each other; FormatError naming the shard otherwise."""
    kind = describe(shard)
    if not kind.startswith("a zip archive"):  # np.load would read an .npy or try a pickle
        raise FormatError(f"{shard}: is {kind}, expected an .npz shard (arrays {', '.join(ARRAYS)})")
    try:  # np.load(path) would leave its own file open on a damaged zip
        with open(shard, "rb") as file, np.load(file, allow_pickle=False) as data:
            missing = sorted(set(ARRAYS) - set(data.files))
            if missing:
                raise FormatError(f"{shard}: not a distilled-corpus shard: missing array(s) {', '.join(missing)}")
            tokens, offsets, prompt_lens = (data[name] for name in ARRAYS)
    except (EOFError, zipfile.BadZipFile, ValueError, OSError) as error:
        if isinstance(error, (FormatError, FileNotFoundError)):
            raise
        raise FormatError(f"{shard}: damaged or not an .npz shard ({type(error).__name__}: {error})") from None
    for name, array in zip(ARRAYS, (tokens, offsets, prompt_lens)):
        if array.ndim != 1 or array.dtype.kind not in "iu":
            raise FormatError(f"{shard}: {name} must be a 1-d integer array, got {array.dtype} {list(array.shape)}")
    records = len(prompt_lens)
    lengths = np.diff(offsets)
    if (
        len(offsets) != records + 1
        or offsets[0] != 0
        or offsets[-1] != len(tokens)
        or (lengths < 0).any()
        or (prompt_lens < 0).any()
        or (prompt_lens > lengths).any()
    ):
        raise FormatError(
            f"{shard}: arrays disagree: offsets [{len(offsets)}] must run from 0 to len(tokens) = {len(tokens)} "
            f"without decreasing, over {records} records whose prompt_lens fit in them"
        )
    return tokens.astype(np.int32), offsets.astype(np.int64), prompt_lens.astype(np.int32)


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
