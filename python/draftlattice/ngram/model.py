"""Backoff n-gram language models with exact Katz backoff scoring.

``NgramLM`` loads an ARPA file (plain, ``.gz``, ``.xz`` or ``.bz2``; recognised by content,
decompressed as it is parsed, with a bound on its size: ``draftlattice._compressed``) or the compact binary format
written by :meth:`NgramLM.save` (memory-mapped, or read into memory with ``copy=True``). Scores are natural-log
probabilities (ARPA files store log10). Token ids map to LM words through ``vocab`` (index = token
id) or, without it, through LM words that are decimal integers. A token the LM does not know
scores as ``<unk>`` when the model has one, else ``oov_logprob``, and resets the history.

Arguments are validated once, by the C++ core (token ids, states, ``oov_logprob``); this module
converts types and documents the API. File errors: OSError (FileNotFoundError, FileExistsError,
...) when a file cannot be opened or written, :class:`FormatError` when its content is wrong.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Sequence
from typing import Union

import numpy as np

from .. import _core
from .._arrays import tokens_in
from .._compressed import DEFAULT_MAX_DECOMPRESSED_BYTES, check_limit, open_input
from .._core import FormatError, LmState

logger = logging.getLogger(__name__)

PathLike = Union[str, "os.PathLike[str]"]
TokenSeq = Sequence[int] | np.ndarray

_XZ_MAGIC = b"\xfd7zXZ\x00"
_GZ_MAGIC = b"\x1f\x8b"
# "BZh", the block size digit, then a block's magic (pi) or the end of an empty stream (sqrt pi).
_BZ2_BLOCKS = (b"1AY&SY", b"\x17rE8P\x90")
_BINARY_MAGIC = b"DLNGRAM\x00"


def detect_format(path: PathLike) -> str:
    """'binary', 'arpa.xz', 'arpa.gz', 'arpa.bz2' or 'arpa' from the first bytes of the file."""
    with open(path, "rb") as handle:
        head = handle.read(10)
    if head.startswith(_BINARY_MAGIC):
        return "binary"
    if head.startswith(_XZ_MAGIC):
        return "arpa.xz"
    if head.startswith(_GZ_MAGIC):
        return "arpa.gz"
    if head[:3] == b"BZh" and head[3:4] in b"123456789" and head[4:10] in _BZ2_BLOCKS:
        return "arpa.bz2"
    return "arpa"


FileIdentity = tuple[int, int, int, int]


def _file_identity(path: str) -> FileIdentity | None:
    """(device, inode, size, mtime in ns) of the file at ``path``, None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class NgramLM(_core.NgramLM):
    """A backoff n-gram LM over model token ids.

    Args:
        path: ARPA file (plain, .gz, .xz, .bz2) or binary model (.dlm, from :meth:`save`).
        vocab: strings, ``vocab[i]`` = the LM word of model token ``i``. Must cover every LM word
            except ``<s>``, ``</s>``, ``<unk>``. Without it, LM words that are decimal integers
            are token ids (LMs built by draftlattice).
        oov_logprob: natural-log score of a token the LM does not know when it has no ``<unk>``.
        copy: read a binary model into private memory instead of mapping it. A mapped model
            follows its file: rewriting the file in place (``cp`` over it) silently changes
            scores, and truncating it kills the process with SIGBUS on the next lookup. With
            ``copy=True`` later changes to the file cannot reach the model (it costs the file's
            size in private memory, where a mapping shares the page cache). ARPA models are always
            parsed into private memory. Install new models by rename (:meth:`save` does), never
            by writing over a file that a running process may have mapped.
        max_decompressed_bytes: a ``.gz``/``.xz``/``.bz2`` ARPA file is decompressed as it is parsed and
            refused (FormatError naming the file and the limit) once more than this many bytes
            come out (default 16 GiB). ARPA text is read line by line, plain or compressed; a
            line over 16 MiB is a FormatError, so a parse holds one block and one line of text
            besides the model.

    The file's identity (device, inode, size, modification time) is recorded at load; a file
    that changes while it is loaded is a FormatError, and :meth:`changed` tells later whether
    the file at ``path`` is still the one loaded.

    Raises:
        FormatError: malformed, truncated or corrupted file (message names file and line), one
            that changed while it was loaded, or an ARPA word or metadata that is not UTF-8 (a
            binary model's non-UTF-8 word is a FormatError when :meth:`words`/:meth:`word` meet it).
        OSError: the file cannot be read (FileNotFoundError when it does not exist).
        ValueError: vocab not covering the LM, NaN or positive ``oov_logprob``, a bad limit.
    """

    def __init__(
        self,
        path: PathLike,
        vocab: Sequence[str] | None = None,
        oov_logprob: float = -1000.0,
        *,
        copy: bool = False,
        max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
    ) -> None:
        path = os.fspath(path)
        check_limit(max_decompressed_bytes)
        identity = _file_identity(path)
        file_format = detect_format(path)
        vocab_list = None if vocab is None else [str(word) for word in vocab]
        try:
            if file_format in ("arpa.xz", "arpa.gz", "arpa.bz2"):
                logger.info("decompressing %s as it is parsed", path)
                with open_input(path, file_format.removeprefix("arpa."), max_decompressed_bytes) as stream:
                    super().__init__(stream, path, vocab_list, oov_logprob, bool(copy))
            else:
                super().__init__(path, path, vocab_list, oov_logprob, bool(copy))
            # Words and metadata reach Python as UTF-8 text. An ARPA file's are checked here, at
            # load (one pass over the vocabulary, small beside parsing); a mapped binary model's
            # words only when asked for (words(), word()), so that mapping it stays O(1).
            _ = self.metadata
            if file_format != "binary":
                super().words()
        except UnicodeDecodeError as error:
            raise _not_utf8(path, error, file_format, max_decompressed_bytes) from None
        if _file_identity(path) != identity:
            raise FormatError(f"{path}: the file changed while it was being loaded; load it again")
        self.path = path
        self.file_format = file_format
        self.mapped = file_format == "binary" and not copy
        self.file_identity = identity
        logger.info("loaded %s: order %d, counts %s", path, self.order, self.counts)

    def changed(self) -> bool:
        """True when the file at :attr:`path` is no longer the file this model was loaded from.

        Compares the file's (device, inode, size, modification time in ns) with those recorded
        at load: one ``stat``, cheap enough to call before each use. It sees a file rewritten in
        place (``cp`` over it), truncated, appended to, replaced by rename, or deleted. It does
        not read the content, so it misses a same-size rewrite whose modification time was set
        back (``touch -d``, ``cp -p``) or that fell in the same timestamp tick as the load. A
        mapped model (:attr:`mapped`) whose file changed in place may already score with the new
        bytes or crash on the next lookup: reload it (or load with ``copy=True``).
        """
        return _file_identity(self.path) != self.file_identity

    def with_vocab(self, vocab: Sequence[str] | None, oov_logprob: float | None = None) -> NgramLM:
        """The same model (shared in memory, not reloaded) under another token mapping."""
        oov = self.oov_ln if oov_logprob is None else oov_logprob
        other = NgramLM.__new__(NgramLM)
        vocab_list = None if vocab is None else [str(word) for word in vocab]
        try:
            _core.NgramLM.__init__(other, self, vocab_list, oov)
        except UnicodeDecodeError as error:  # a message quoting a binary model's non-UTF-8 word
            raise _not_utf8(self.path, error) from None
        other.path = self.path
        other.file_format = self.file_format
        other.mapped = self.mapped
        other.file_identity = self.file_identity
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
        return super().token_scores(_token_ids(tokens), _token_ids(context), bool(bos), bool(eos))

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
        return super().start(_token_ids(context), bool(bos))

    def advance(self, state: LmState, tokens: TokenSeq) -> LmState:
        """The state after ``tokens`` following ``state``: what a decoder keeps for its committed
        text, advanced by the tokens each step accepts (O(len(tokens)), not O(history))."""
        return super().advance(state, _token_ids(tokens))

    def step(self, state: LmState, token: int) -> tuple[float, LmState]:
        """(natural-log probability of ``token`` after ``state``, the next state)."""
        return super().step(state, token)

    def step_eos(self, state: LmState) -> tuple[float, LmState]:
        """(natural-log probability of ``</s>`` after ``state``, the next state)."""
        return super().step_eos(state)

    def word(self, index: int) -> str:
        """The LM word with LM word id ``index``."""
        try:
            return super().word(index)
        except UnicodeDecodeError as error:
            raise _not_utf8(self.path, error) from None

    def words(self) -> list[str]:
        """The LM's words, by LM word id."""
        try:
            return super().words()
        except UnicodeDecodeError as error:
            raise _not_utf8(self.path, error) from None

    def state_words(self, state: LmState) -> tuple[str, ...]:
        """The LM words a state retains, most recent first."""
        return tuple(self.word(i) for i in state.word_ids)

    def save(self, path: PathLike, overwrite: bool = False) -> None:
        """Write the model in the binary format (refuses to replace a file unless ``overwrite``)."""
        super().save(os.fspath(path), bool(overwrite))

    def __repr__(self) -> str:
        return f"NgramLM({self.path!r}, order={self.order}, counts={list(self.counts)})"


def _not_utf8(
    path: str, error: UnicodeDecodeError, file_format: str = "binary", limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> FormatError:
    """The error for LM text (a word, metadata) that is not UTF-8: for an ARPA file it names the
    file's first line that is not UTF-8 (read again, only on this error path)."""
    if file_format != "binary":
        compression = None if file_format == "arpa" else file_format.removeprefix("arpa.")
        with open_input(path, compression, limit) as stream:
            for number, line in enumerate(stream, start=1):
                try:
                    line.decode("utf-8")
                except UnicodeDecodeError as bad:
                    return FormatError(
                        f"{path}:{number}: not valid UTF-8 ({bad.reason} at byte {bad.start} of the line): "
                        f"{line.rstrip()[:200]!r}"
                    )
    context = error.object[max(0, error.start - 60) : error.end + 20]
    return FormatError(f"{path}: holds an LM word or metadata that is not valid UTF-8 ({error.reason}): {context!r}")


def _token_ids(values: TokenSeq | Iterable[int]) -> object:
    """Token ids as the bindings take them (iterators become lists, torch tensors numpy)."""
    if not isinstance(values, (np.ndarray, Sequence)) and not type(values).__module__.startswith("torch"):
        return list(values)
    return tokens_in(values)


__all__ = ["FormatError", "LmState", "NgramLM", "detect_format"]
