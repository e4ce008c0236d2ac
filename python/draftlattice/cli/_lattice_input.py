"""Reading lattices for the CLI: logits .npy ([h, V] or [B, h, V]) or top-k .npz
(arrays ``tokens`` and ``logprobs``, [h, k] or [B, h, k]); vocabulary files; contexts."""

from __future__ import annotations

import os

import numpy as np

from draftlattice.lattice import Lattice


def read_vocab(path: str) -> list[str]:
    """One word per line; line i is the word of token id i."""
    from draftlattice.filekinds import expect_text

    expect_text(path)
    try:
        with open(path, encoding="utf-8") as handle:
            return [line.rstrip("\n") for line in handle]
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not a UTF-8 vocabulary file ({error.reason} at byte {error.start})") from None


def _numpy_file(path: str, what: str, reader):
    """``reader(file)`` on an opened .npy/.npz; damage or another kind of file names ``path``."""
    import zipfile

    from draftlattice.filekinds import describe

    try:
        with open(path, "rb") as file:  # np.load leaves its own file open on a damaged zip
            return reader(file)
    except (EOFError, zipfile.BadZipFile, ValueError, OSError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise ValueError(f"{path}: not a readable {what} (it is {describe(path)}): {error}") from None


def load_lattices(logits: str | None, topk: str | None, k: int | None, temperature: float = 1.0) -> list[Lattice]:
    if (logits is None) == (topk is None):
        raise ValueError("give exactly one of --logits X.npy or --topk X.npz")
    if logits is not None:
        if k is None:
            raise ValueError("-k is required with --logits")
        array = _numpy_file(logits, "logits .npy", lambda file: np.load(file, allow_pickle=False))
        if array.ndim == 2:
            return [Lattice.from_logits(array, k, temperature)]
        if array.ndim == 3:
            return Lattice.batch_from_logits(array, k, temperature)
        raise ValueError(f"{logits}: logits must have shape [h, V] or [B, h, V], got {list(array.shape)}")

    def read_topk(file):
        with np.load(file, allow_pickle=False) as data:
            if not hasattr(data, "files"):
                raise ValueError("a single .npy array, not an .npz archive")
            missing = {"tokens", "logprobs"} - set(data.files)
            if missing:
                raise ValueError(f"missing array(s) {sorted(missing)} (need 'tokens' and 'logprobs')")
            return data["tokens"], data["logprobs"]

    tokens, logprobs = _numpy_file(topk, "top-k .npz", read_topk)
    if tokens.ndim == 2:
        return [Lattice.from_topk(tokens, logprobs)]
    if tokens.ndim == 3 and logprobs.ndim == 3 and tokens.shape[0] == logprobs.shape[0]:
        return [Lattice.from_topk(t, lp) for t, lp in zip(tokens, logprobs)]
    raise ValueError(
        f"{topk}: tokens/logprobs must be [h, k] or [B, h, k], got {list(tokens.shape)} and {list(logprobs.shape)}"
    )


def parse_context(text: str | None, vocab: list[str] | None) -> list[int]:
    """Whitespace-separated token ids, or words when a vocabulary is given and not all are ids."""
    if not text:
        return []
    items = text.split()
    if all(item.lstrip("-").isdigit() for item in items):
        return [int(item) for item in items]
    if vocab is None:
        raise ValueError("--context holds words: give --vocab to map them to token ids")
    index = {word: i for i, word in enumerate(vocab)}
    unknown = [item for item in items if item not in index]
    if unknown:
        raise ValueError(f"--context words not in the vocabulary: {unknown[:5]}")
    return [index[item] for item in items]


def check_output(path: str, force: bool) -> None:
    if os.path.exists(path) and not force:
        raise ValueError(f"{path} exists; pass --force to overwrite it")
