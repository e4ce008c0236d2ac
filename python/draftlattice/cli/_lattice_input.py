"""Reading lattices for the CLI: logits .npy ([h, V] or [B, h, V]) or top-k .npz
(arrays ``tokens`` and ``logprobs``, [h, k] or [B, h, k]); vocabulary files; contexts."""

from __future__ import annotations

import io
import re

import numpy as np

from draftlattice.lattice import Lattice

from ._checks import positive

_NPY = "a NumPy array (.npy)"
_NPZ = "a zip archive"  # how filekinds.describe starts for an .npz
_TOKEN_ID = re.compile(r"[0-9]+")


def read_vocab(path: str) -> list[str]:
    """One word per line; line i is the word of token id i."""
    from draftlattice.filekinds import expect_text

    expect_text(path)
    return read_lines(path, "vocabulary file")


def read_lines(path: str, what: str = "text file") -> list[str]:
    """The lines of a UTF-8 file, newlines as ``open()`` reads them; ValueError naming the file
    (a ``what``), the line and the byte offset of the first byte that is not UTF-8."""
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:  # error.start counts bytes from the start of the file
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(
            f"{path}: not a UTF-8 {what} ({error.reason} at line {line}, byte offset {error.start})"
        ) from None
    return [line.rstrip("\n") for line in io.StringIO(text, newline=None)]


def _numpy_file(path: str, what: str, kind: str, reader):
    """``reader(file)`` on an opened .npy/.npz that ``filekinds.describe`` calls ``kind``; another
    kind of file, or a damaged one, is a ValueError naming ``path`` and ``what`` was expected."""
    import zipfile

    from draftlattice.filekinds import describe

    found = describe(path)
    if found != "missing" and not found.startswith(kind):
        raise ValueError(f"{path}: is {found}, expected {what}")
    try:
        with open(path, "rb") as file:  # np.load leaves its own file open on a damaged zip
            return reader(file)
    except (EOFError, zipfile.BadZipFile, ValueError, OSError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise ValueError(f"{path}: not readable as {what} (it is {found}): {error}") from None


def _read_topk(file) -> tuple[np.ndarray, np.ndarray]:
    with np.load(file, allow_pickle=False) as data:
        missing = {"tokens", "logprobs"} - set(data.files)
        if missing:
            raise ValueError(f"missing array(s) {sorted(missing)} (need 'tokens' and 'logprobs')")
        return data["tokens"], data["logprobs"]


def load_lattices(logits: str | None, topk: str | None, k: int | None, temperature: float = 1.0) -> list[Lattice]:
    """The lattices of a logits .npy (with ``k`` and ``temperature``) or of a top-k .npz.

    A top-k .npz holds its candidates and their log-probabilities already: ``k`` or a temperature
    other than 1 with it would be silently ignored, so they are refused.
    """
    if (logits is None) == (topk is None):
        raise ValueError("give exactly one of --logits X.npy or --topk X.npz")
    positive("--temperature", temperature)
    if logits is not None:
        if k is None:
            raise ValueError("-k is required with --logits")
        array = _numpy_file(
            logits, "a logits .npy array ([h, V] or [B, h, V])", _NPY, lambda f: np.load(f, allow_pickle=False)
        )
        try:
            if array.ndim == 2:
                return [Lattice.from_logits(array, k, temperature)]
            if array.ndim == 3:
                return Lattice.batch_from_logits(array, k, temperature)
        except ValueError as error:  # the core's message names the value, not the file
            raise ValueError(f"{logits}: {error}") from None
        raise ValueError(f"{logits}: logits must have shape [h, V] or [B, h, V], got {list(array.shape)}")

    if k is not None:
        raise ValueError(f"-k {k} applies to logits only: the top-k .npz {topk} holds its own k candidates per head")
    if temperature != 1.0:
        raise ValueError(
            f"--temperature {temperature} applies to logits only: the top-k .npz {topk} holds log-probabilities"
        )
    tokens, logprobs = _numpy_file(topk, "a top-k .npz archive (arrays tokens and logprobs)", _NPZ, _read_topk)
    try:
        if tokens.ndim == 2:
            return [Lattice.from_topk(tokens, logprobs)]
        if tokens.ndim == 3 and logprobs.ndim == 3 and tokens.shape[0] == logprobs.shape[0]:
            return [Lattice.from_topk(t, lp) for t, lp in zip(tokens, logprobs)]
    except ValueError as error:
        raise ValueError(f"{topk}: {error}") from None
    raise ValueError(
        f"{topk}: tokens/logprobs must be [h, k] or [B, h, k], got {list(tokens.shape)} and {list(logprobs.shape)}"
    )


def parse_context(text: str | None, vocab: list[str] | None) -> list[int]:
    """Whitespace-separated token ids, or words when a vocabulary is given and not all are ids."""
    if not text:
        return []
    items = text.split()
    if all(_TOKEN_ID.fullmatch(item) for item in items):
        return [int(item) for item in items]
    if vocab is None:
        bad = next(item for item in items if not _TOKEN_ID.fullmatch(item))
        raise ValueError(
            f"--context {text!r}: {bad!r} is not a token id (ids are integers >= 0; give --vocab to pass words)"
        )
    index = {word: i for i, word in enumerate(vocab)}
    unknown = [item for item in items if item not in index]
    if unknown:
        raise ValueError(f"--context words not in the vocabulary: {unknown[:5]}")
    return [index[item] for item in items]
