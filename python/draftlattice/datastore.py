"""A datastore of a model's own answers, for retrieval drafts (REST, He et al. 2024).

Prompt lookup copies what followed the context's last n tokens earlier in the same context; a
datastore finds what followed them in a corpus, here the model's greedy answers to many prompts
(the self-distilled corpora of :mod:`draftlattice.training.distill`). A chat model's answers share
their phrasing ("Here are some ...", list scaffolding, closing formulas), so a context with no
copy of its own often ends in a phrase the corpus continues the way the model will.

The index is the C++ core's (``_core.TokenDatastore``, see ``csrc/datastore.h``): a suffix array
cut at ``max_ngram + max_length`` tokens, built when a datastore is made or loaded (0.85 s for
the default model's 3.5M tokens, ``bench/datastore_speed.py``) and held in memory (8 bytes a token). The draft follows the most
frequent continuation of the longest matched suffix, token by token (ties: the lower token id).

A datastore file is a NumPy ``.npz``: ``format`` ("draftlattice-datastore"), ``version``,
``tokens`` (uint16 when every id fits, else int32; records back to back) and ``offsets``
(int64 ``[R + 1]``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from . import _core
from ._core import FormatError

logger = logging.getLogger(__name__)

FORMAT = "draftlattice-datastore"
VERSION = 1


class Datastore:
    """Token records and their suffix index.

    Args:
        tokens: int ``[N]``, the records back to back (ids >= 0).
        offsets: int ``[R + 1]``, record ``r`` is ``tokens[offsets[r]:offsets[r + 1]]``.
        max_ngram: longest context suffix matched (tried first).
        min_ngram: shortest one (shorter suffixes match too much to draft well).
        min_count: occurrences a draft token after the first needs (a continuation seen once
            drafts one token).
        max_length: longest draft a query may ask for.

    Raises ValueError naming the bad value (negative ids, offsets out of order, settings out of
    range).
    """

    def __init__(
        self,
        tokens: np.ndarray,
        offsets: np.ndarray,
        max_ngram: int = 4,
        min_ngram: int = 2,
        min_count: int = 2,
        max_length: int = 16,
    ) -> None:
        for label, value in (("max_ngram", max_ngram), ("min_ngram", min_ngram), ("min_count", min_count)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{label} must be a positive int, got {value!r}")
        if min_ngram > max_ngram:
            raise ValueError(f"min_ngram ({min_ngram}) must not exceed max_ngram ({max_ngram})")
        if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
            raise ValueError(f"max_length must be a positive int, got {max_length!r}")
        self.max_ngram, self.min_ngram, self.min_count, self.max_length = max_ngram, min_ngram, min_count, max_length
        self.tokens, self.offsets = np.asarray(tokens), np.asarray(offsets)
        start = time.perf_counter()
        self._index = _core.TokenDatastore(self.tokens, self.offsets, max_ngram + max_length)
        logger.info(
            "datastore: %d tokens in %d records, indexed in %.1f s",
            self.num_tokens,
            self.num_records,
            time.perf_counter() - start,
        )

    @classmethod
    def from_records(cls, records: Iterable[Sequence[int]], **settings) -> Datastore:
        """A datastore of token-id ``records`` (lists or arrays)."""
        arrays = [np.asarray(r, dtype=np.int64).reshape(-1) for r in records]
        offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(a) for a in arrays])
        tokens = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.int64)
        return cls(tokens, offsets, **settings)

    @classmethod
    def from_corpora(cls, folders: Sequence[str | os.PathLike], **settings) -> Datastore:
        """The answers (prompts left out: the model's own text is what it will continue) of
        distilled corpora (:class:`~draftlattice.distilled_corpus.DistilledCorpus` folders)."""
        from .distilled_corpus import DistilledCorpus

        corpora = [DistilledCorpus.load(folder) for folder in folders]
        records = [c.record(r)[c.prompt_lens[r] :] for c in corpora for r in range(len(c))]
        return cls.from_records(records, **settings)

    @property
    def num_tokens(self) -> int:
        return self._index.num_tokens

    @property
    def num_records(self) -> int:
        return self._index.num_records

    def continuation(self, context: Sequence[int], length: int) -> list[int]:
        """The draft of at most ``length`` tokens that the corpus continues ``context`` with
        (``[]`` when none of its last ``min_ngram``..``max_ngram`` tokens occur)."""
        if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= self.max_length:
            raise ValueError(f"length must be an int in 1..{self.max_length} (max_length), got {length!r}")
        tail = list(context[-self.max_ngram :])
        return self._index.continuation(tail, self.max_ngram, self.min_ngram, length, self.min_count)

    def save(self, path: str | os.PathLike, overwrite: bool = False) -> None:
        """Write the records (not the index: it is rebuilt on load) to ``path`` (.npz), through a
        temporary file and a rename. An existing file is an error unless ``overwrite``."""
        path = Path(path)
        if path.is_dir():
            raise IsADirectoryError(f"{path}: is a folder, expected a datastore file (.npz) to write")
        if path.exists() and not overwrite:
            raise FileExistsError(f"{path} exists: pass overwrite=True to replace it")
        narrow = self.tokens.size == 0 or int(self.tokens.max()) < np.iinfo(np.uint16).max
        tokens = self.tokens.astype(np.uint16 if narrow else np.int32)
        partial = path.with_name(f".{path.name}.{os.getpid()}.partial")  # this process's own
        try:
            with open(partial, "wb") as f:
                np.savez_compressed(
                    f, format=np.array(FORMAT), version=np.array(VERSION), tokens=tokens, offsets=self.offsets
                )
            os.replace(partial, path)
        except OSError as error:
            raise OSError(error.errno, f"writing datastore {path}: {error.strerror}") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(partial)

    @classmethod
    def load(cls, path: str | os.PathLike, **settings) -> Datastore:
        """A datastore saved by :meth:`save`. Raises FileNotFoundError, or FormatError naming
        the file and what is wrong with it."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"datastore {path} does not exist")
        try:  # our own handle: np.load leaves its file open when the archive is corrupt
            with open(path, "rb") as handle, np.load(handle, allow_pickle=False) as data:
                fields = {name: data[name] for name in data.files}
        except Exception as error:  # noqa: BLE001 (zip, zlib, header parsing: each has its own errors)
            raise FormatError(f"{path}: not a readable datastore ({type(error).__name__}: {error})") from None
        fmt, version = fields.get("format"), fields.get("version")
        if not (isinstance(fmt, np.ndarray) and fmt.shape == () and str(fmt) == FORMAT):
            raise FormatError(f"{path}: not a draftlattice datastore (no format {FORMAT!r})")
        if not (isinstance(version, np.ndarray) and version.shape == () and version.dtype.kind in "iu"):
            raise FormatError(f"{path}: a datastore's version must be an integer, got {version!r:.60}")
        if int(version) != VERSION:
            raise FormatError(f"{path}: datastore version {int(version)}, this draftlattice reads {VERSION}")
        tokens, offsets = fields.get("tokens"), fields.get("offsets")
        for name, array in (("tokens", tokens), ("offsets", offsets)):
            if not (isinstance(array, np.ndarray) and array.ndim == 1 and array.dtype.kind in "iu"):
                raise FormatError(f"{path}: a datastore's {name} must be a 1-D integer array")
        try:
            return cls(tokens, offsets, **settings)
        except ValueError as error:
            raise FormatError(f"{path}: {error}") from None

    def __repr__(self) -> str:
        return (
            f"Datastore({self.num_tokens} tokens, {self.num_records} records, n={self.min_ngram}..{self.max_ngram}, "
            f"min_count={self.min_count})"
        )
