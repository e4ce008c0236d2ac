"""Byte-level BPE tokenizers (the `tokenizers` package): training, loading, and the hash LMs record.

A byte-level BPE covers every UTF-8 string (no unknown tokens), so n-gram LMs and the blockwise
model built over it see every corpus line. Corpus lines are read as documents: line-edge spaces
are stripped and blank lines dropped, the convention of the WikiText-2 recipes in lm_models/.

A tokenizer is a ``tokenizer.json`` or a transformers model folder (:func:`folder_tokenizer`); its
sha256 is what n-gram LMs built over it record (``draftlattice.pairing`` compares them).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)

DEFAULT_SPECIAL_TOKENS = ("<|endoftext|>",)
MIN_VOCAB_SIZE = 256 + 1  # the 256 byte symbols plus at least one merge or special token
# The trainer reserves memory in proportion to vocab_size before it reads the corpus, and aborts the
# process (no Python exception) near 2**31; real vocabularies are a few hundred thousand at most.
MAX_VOCAB_SIZE = 1 << 24


def corpus_lines(files: Iterable[str | Path]) -> Iterator[str]:
    """Yield the non-blank lines of ``files`` with line-edge whitespace stripped.

    Raises ``ValueError`` naming the file and line when a file is not valid UTF-8.
    """
    for path in files:
        path = Path(path)
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                try:
                    line = raw.decode("utf-8").strip()
                except UnicodeDecodeError as error:
                    raise ValueError(f"{path}:{number}: not valid UTF-8 ({error.reason})") from None
                if line:
                    yield line


def train_tokenizer(
    files: Sequence[str | Path],
    vocab_size: int,
    out_path: str | Path,
    special_tokens: Sequence[str] = DEFAULT_SPECIAL_TOKENS,
    *,
    min_frequency: int = 2,
    show_progress: bool = False,
):
    """Train a byte-level BPE tokenizer on ``files`` and write it to ``out_path`` (tokenizer.json).

    ``vocab_size`` counts the 256 byte symbols, the merges and ``special_tokens`` (which get the
    first ids, in the order given); at most :data:`MAX_VOCAB_SIZE`. It is an upper bound: training
    stops early when no pair occurs ``min_frequency`` (>= 1) times (tiny corpora). Returns the
    trained ``tokenizers.Tokenizer``. Raises ValueError for a size or frequency out of range, before
    any training.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if not files:
        raise ValueError("no corpus files given")
    for path in files:
        if not Path(path).is_file():
            raise ValueError(f"corpus file not found: {path}")
    if vocab_size < MIN_VOCAB_SIZE + len(special_tokens):
        raise ValueError(
            f"vocab_size {vocab_size} too small: needs at least 256 byte symbols + "
            f"{len(special_tokens)} special tokens + 1 merge"
        )
    if vocab_size > MAX_VOCAB_SIZE:
        raise ValueError(
            f"vocab_size {vocab_size} too large: at most {MAX_VOCAB_SIZE} (the trainer reserves memory "
            "for the whole vocabulary up front and aborts on sizes near 2**31)"
        )
    # The trainer merges a pair only if it occurs at least once and at least min_frequency times, so
    # 0 would silently mean 1; it holds min_frequency in 64 bits.
    if not 1 <= min_frequency < 1 << 64:
        raise ValueError(
            f"min_frequency must be an integer in [1, 2**64) (the least count of a merged pair), got {min_frequency}"
        )
    if len(set(special_tokens)) != len(special_tokens) or any(not t for t in special_tokens):
        raise ValueError(f"special tokens must be distinct and non-empty: {list(special_tokens)}")

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=show_progress,
    )
    lines = corpus_lines(files)
    first = next(lines, None)
    if first is None:
        raise ValueError(f"corpus is empty (no non-blank lines): {[str(f) for f in files]}")

    def all_lines() -> Iterator[str]:
        yield first
        yield from lines

    tokenizer.train_from_iterator(all_lines(), trainer=trainer)
    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out_path))
    logger.info("wrote %s (vocab %d)", out_path, tokenizer.get_vocab_size())
    return tokenizer


def load_tokenizer(path: str | Path):
    """Load a ``tokenizer.json`` offline.

    Raises ``FileNotFoundError`` if it is missing and ``draftlattice.FormatError`` (a
    ``ValueError``) if it does not parse.
    """
    from tokenizers import Tokenizer

    from ._core import FormatError

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"tokenizer file not found: {path}")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as error:  # tokenizers raises a bare Exception on malformed JSON
        raise FormatError(f"{path}: not a valid tokenizer.json ({error})") from None


def tokenizer_sha256(path: str | Path) -> str:
    """Hex sha256 of the tokenizer.json bytes (what n-gram LMs record to detect a mismatch)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def folder_tokenizer(folder: str | os.PathLike[str]):
    """``(tokenizers.Tokenizer, sha256 hex)`` of a transformers model folder's tokenizer (offline).

    The hash is that of the folder's ``tokenizer.json`` bytes when it has one (so it equals
    :func:`tokenizer_sha256` of ``FOLDER/tokenizer.json``), otherwise of the JSON that
    transformers' fast tokenizer serialises to. Raises ValueError when the folder holds no fast
    tokenizer transformers can load.
    """
    folder = Path(folder)
    json_file = folder / "tokenizer.json"
    if json_file.is_file():
        return load_tokenizer(json_file), tokenizer_sha256(json_file)
    from transformers import AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except (OSError, ValueError) as error:
        raise ValueError(f"{folder}: no tokenizer transformers can load ({error})") from None
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is None:
        raise ValueError(f"{folder}: {type(tok).__name__} is not a fast tokenizer; draftlattice needs one")
    return backend, hashlib.sha256(backend.to_str().encode()).hexdigest()
