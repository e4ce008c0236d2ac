"""Backoff n-gram language models with exact Katz backoff scoring.

``NgramLM`` loads an ARPA file (plain, ``.gz`` or ``.xz``; recognised by content) or the
compact binary format written by :meth:`NgramLM.save` (memory-mapped). Scores are natural-log
probabilities (ARPA files store log10). Token ids map to LM words through ``vocab`` (index = token
id) or, without it, through LM words that are decimal integers. A token the LM does not know
scores as ``<unk>`` when the model has one, else ``oov_logprob``, and resets the history.
"""

from __future__ import annotations

import gzip
import logging
import lzma
import math
import os
from collections.abc import Iterable, Sequence
from typing import Union

import numpy as np

from .. import _core
from .._core import FormatError, LmState

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]
TokenSeq = Union[Sequence[int], np.ndarray]

_XZ_MAGIC = b"\xfd7zXZ\x00"
_GZ_MAGIC = b"\x1f\x8b"
_BINARY_MAGIC = b"DLNGRAM\x00"


def detect_format(path: PathLike) -> str:
    """'binary', 'arpa.xz', 'arpa.gz' or 'arpa' from the first bytes of the file."""
    with open(path, "rb") as handle:
        head = handle.read(8)
    if head.startswith(_BINARY_MAGIC):
        return "binary"
    if head.startswith(_XZ_MAGIC):
        return "arpa.xz"
    if head.startswith(_GZ_MAGIC):
        return "arpa.gz"
    return "arpa"


def _read_compressed(path: str, file_format: str) -> bytes:
    opener = lzma.open if file_format == "arpa.xz" else gzip.open
    try:
        with opener(path, "rb") as handle:
            return handle.read()
    except (lzma.LZMAError, EOFError, gzip.BadGzipFile, OSError) as error:
        raise FormatError(f"{path}: cannot decompress {file_format}: {error}") from error


def _tokens(values: TokenSeq | Iterable[int], what: str) -> np.ndarray:
    """1-D int32 array; ValueError for non-integers or values outside int32."""
    array = np.asarray(list(values) if not isinstance(values, (np.ndarray, Sequence)) else values)
    if array.ndim != 1:
        raise ValueError(f"{what} must be a 1-D sequence of token ids, got shape {array.shape}")
    if array.size == 0:
        return np.zeros(0, dtype=np.int32)
    if not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{what} must hold integer token ids, got dtype {array.dtype}")
    low, high = int(array.min()), int(array.max())
    if low < np.iinfo(np.int32).min or high > np.iinfo(np.int32).max:
        raise ValueError(f"{what} holds token id {low if low < 0 else high} outside int32")
    return array.astype(np.int32, copy=False)


class NgramLM(_core.NgramLM):
    """A backoff n-gram LM over model token ids.

    Args:
        path: ARPA file (plain, .gz, .xz) or binary model (.dlm, from :meth:`save`).
        vocab: strings, ``vocab[i]`` = the LM word of model token ``i``. Must cover every LM word
            except ``<s>``, ``</s>``, ``<unk>``. Without it, LM words that are decimal integers
            are token ids (LMs built by draftlattice).
        oov_logprob: natural-log score of a token the LM does not know when it has no ``<unk>``.

    Raises:
        FormatError: malformed, truncated or corrupted file (message names file and line).
        ValueError: vocab not covering the LM, NaN or positive ``oov_logprob``.
    """

    def __init__(
        self,
        path: PathLike,
        vocab: Sequence[str] | None = None,
        oov_logprob: float = -1000.0,
    ) -> None:
        path = os.fspath(path)
        oov = float(oov_logprob)
        if math.isnan(oov) or oov > 0:
            raise ValueError(f"oov_logprob must be a natural-log probability <= 0, got {oov}")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such LM file")
        file_format = detect_format(path)
        vocab_list = None if vocab is None else [str(word) for word in vocab]
        if file_format in ("arpa.xz", "arpa.gz"):
            logger.info("decompressing %s", path)
            source: str | bytes = _read_compressed(path, file_format)
        else:
            source = path
        super().__init__(source, path, vocab_list, oov)
        self.path = path
        self.file_format = file_format
        logger.info("loaded %s: order %d, counts %s", path, self.order, self.counts)

    def with_vocab(
        self, vocab: Sequence[str] | None, oov_logprob: float | None = None
    ) -> NgramLM:
        """The same model (shared in memory, not reloaded) under another token mapping."""
        oov = self.oov_ln if oov_logprob is None else float(oov_logprob)
        if math.isnan(oov) or oov > 0:
            raise ValueError(f"oov_logprob must be a natural-log probability <= 0, got {oov}")
        other = NgramLM.__new__(NgramLM)
        vocab_list = None if vocab is None else [str(word) for word in vocab]
        _core.NgramLM.__init__(other, self, vocab_list, oov)
        other.path = self.path
        other.file_format = self.file_format
        return other

    @property
    def oov_logprob(self) -> float:
        return float(self.oov_ln)

    def token_scores(
        self,
        tokens: TokenSeq,
        context: TokenSeq = (),
        bos: bool = False,
        eos: bool = False,
    ) -> np.ndarray:
        """Natural-log probability of each token given ``<s>``? + context + earlier tokens.

        Returns float64 [len(tokens)] (+1 for ``</s>`` when ``eos``).
        """
        return super().token_scores(
            _tokens(tokens, "tokens"), _tokens(context, "context"), bool(bos), bool(eos)
        )

    def score(
        self,
        tokens: TokenSeq,
        context: TokenSeq = (),
        bos: bool = False,
        eos: bool = False,
    ) -> float:
        """Sum of :meth:`token_scores`: natural-log probability of ``tokens`` (and ``</s>``)."""
        return float(np.sum(self.token_scores(tokens, context, bos, eos)))

    def start(self, context: TokenSeq = (), bos: bool = False) -> LmState:
        """The scoring state after ``<s>`` (when ``bos``) followed by ``context``."""
        return super().start(_tokens(context, "context"), bool(bos))

    def step(self, state: LmState, token: int) -> tuple[float, LmState]:
        """(natural-log probability of ``token`` after ``state``, the next state)."""
        return super().step(state, _tokens([token], "token")[0].item())

    def step_eos(self, state: LmState) -> tuple[float, LmState]:
        """(natural-log probability of ``</s>`` after ``state``, the next state)."""
        return super().step_eos(state)

    def state_words(self, state: LmState) -> tuple[str, ...]:
        """The LM words a state retains, most recent first."""
        return tuple(self.word(i) for i in state.word_ids)

    def save(self, path: PathLike, overwrite: bool = False) -> None:
        """Write the model in the binary format (refuses to replace a file unless ``overwrite``)."""
        path = os.fspath(path)
        if os.path.exists(path) and not overwrite:
            raise FileExistsError(f"{path}: file exists (pass overwrite=True to replace it)")
        super().save(path, bool(overwrite))

    def __repr__(self) -> str:
        return f"NgramLM({self.path!r}, order={self.order}, counts={list(self.counts)})"


__all__ = ["FormatError", "LmState", "NgramLM", "detect_format"]
