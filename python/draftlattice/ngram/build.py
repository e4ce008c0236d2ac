"""Building Katz backoff n-gram LMs from text (the OpenGrm NGram recipe of the paper).

``build_lm`` counts n-grams (C++, streaming), estimates a Katz backoff model exactly as OpenGrm
NGram 1.3.11's ``ngrammake --method=katz`` (see ``shared/docs/katz-opengrm.md``), optionally
prunes it with relative entropy as ``ngramshrink --method=relative_entropy`` and writes ARPA
(``.arpa``) or our binary format (``.dlm``). A ``.dlm`` is written straight from the trainer's
values (each probability rounded once, to the engine's float32 natural log), not through ARPA
text. The C++ core validates the options (order, min counts, pruning) before counting starts.

Corpus conventions:

- One line is one sentence, with implicit ``<s>`` before and ``</s>`` after it. Lines that are
  empty after stripping their edge whitespace are skipped (OpenGrm would count them as
  ``<s> </s>``; the paper's recipe drops them).
- Whitespace mode (no tokenizer): the ARPA words are the corpus words, split on ASCII whitespace.
- Tokenizer mode: each stripped line is encoded with a Hugging Face ``tokenizer.json`` (without
  special tokens); the ARPA words are decimal token ids, and the ARPA records
  ``# draftlattice-tokenizer-sha256: HEX`` so that using the LM with another tokenizer is detected
  (:func:`draftlattice.pairing.check_lm_tokenizer`).
- Files ending in ``.xz``, ``.gz`` or ``.bz2`` are decompressed as a stream, at most
  ``max_decompressed_bytes`` per file (default 16 GiB, ``draftlattice._compressed``): more is a
  FormatError naming the file and the limit (a decompression bomb stops there). A NUL byte,
  invalid UTF-8 or a line longer than 64 MiB is an error naming the file, line and byte offset.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from .. import _core
from .._compressed import DEFAULT_MAX_DECOMPRESSED_BYTES, check_limit, compression_of_name, open_input
from .._core import FormatError
from .._files import give_usual_permissions
from ..distilled_corpus import DistilledCorpus
from ..tokenizer import folder_tokenizer, load_tokenizer, tokenizer_sha256

logger = logging.getLogger(__name__)

__all__ = [
    "TOKENIZER_SHA256_KEY",
    "LmBuildResult",
    "build_lm",
    "read_arpa_metadata",
    "tokenizer_sha256",
]

TOKENIZER_SHA256_KEY = "draftlattice-tokenizer-sha256"
MAX_ORDER = 8
_CHUNK_BYTES = 8 << 20
# A line is a sentence; a longer one is no text corpus (and would be held whole in memory).
_MAX_LINE_BYTES = 64 << 20
_ENCODE_BATCH_LINES = 4096


def line_too_long(path: str | os.PathLike[str], line_no: int, offset: int) -> FormatError:
    """The error for a corpus line over _MAX_LINE_BYTES (without its newline); both engines."""
    return FormatError(
        f"{path}: line {line_no} (byte offset {offset}) is longer than {_MAX_LINE_BYTES} bytes; "
        "a corpus holds one sentence per line"
    )


def _first_long_line(chunk: bytes) -> int:
    """Offset in ``chunk`` (whole lines) of the first line longer than _MAX_LINE_BYTES, or -1."""
    if len(chunk) <= _MAX_LINE_BYTES:
        return -1
    start = 0
    while start < len(chunk):
        end = chunk.find(b"\n", start)
        end = len(chunk) if end < 0 else end
        if end - start > _MAX_LINE_BYTES:
            return start
        start = end + 1
    return -1


@dataclasses.dataclass
class LmBuildResult:
    """What :func:`build_lm` built.

    counts: n-grams per order in the written model (``counts[0]`` includes ``<s>``).
    counts_before_pruning: the same before relative-entropy pruning (after min counts).
    seconds: wall time per phase (``count``, ``estimate``, ``prune``, ``write``).
    """

    path: Path
    order: int
    sentences: int
    tokens: int
    counts: list[int]
    counts_before_pruning: list[int]
    tokenizer_sha256: str | None
    seconds: dict[str, float]
    count_of_counts: list[list[int]]
    discounts: list[list[float]]


def _open_binary(path: Path, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> IO[bytes]:
    """The corpus file, decompressed by its suffix (.xz/.gz/.bz2) as a bounded stream."""
    return open_input(path, compression_of_name(path), max_decompressed_bytes)


def _read_chunks(
    path: Path, progress: Any, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> Iterator[tuple[bytes, str]]:
    """Yields (raw bytes, decoded text) of whole lines, about _CHUNK_BYTES at a time.

    Reads fixed-size blocks (so neither a long line nor a decompression bomb is ever held whole)
    and cuts each after its last newline. Raises FormatError for a NUL byte, invalid UTF-8 or a
    line over _MAX_LINE_BYTES (without its newline), with line number and byte offset, and for
    compressed data that is corrupt or decompresses to more than ``max_decompressed_bytes``.
    """
    line_no = 0  # lines before the chunk
    offset = 0  # bytes before the chunk
    try:
        file = _open_binary(path, max_decompressed_bytes)
    except OSError as error:
        raise OSError(f"cannot read corpus {path}: {error.strerror or error}") from None
    with file:
        carry = b""  # the start of a line that continues in the next block
        while True:
            block = file.read(_CHUNK_BYTES)
            if not block:
                chunk, carry = carry, b""  # the last line, without its newline
                if not chunk:
                    return
            else:
                data = carry + block
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    if len(data) > _MAX_LINE_BYTES:
                        raise line_too_long(path, line_no + 1, offset)
                    carry = data
                    continue
                chunk, carry = data[:cut], data[cut:]
            long_line = _first_long_line(chunk)  # lines before it are checked first, as read
            text = _checked_text(path, chunk if long_line < 0 else chunk[:long_line], line_no, offset)
            if long_line >= 0:
                raise line_too_long(path, line_no + chunk.count(b"\n", 0, long_line) + 1, offset + long_line)
            yield chunk, text
            line_no += chunk.count(b"\n")
            offset += len(chunk)
            if progress is not None:
                progress.update(len(chunk))


def _checked_text(path: Path, chunk: bytes, line_no: int, offset: int) -> str:
    """``chunk`` (whole lines after ``line_no`` lines, ``offset`` bytes) decoded; FormatError for a
    NUL byte or invalid UTF-8, with line number and byte offset."""
    nul = chunk.find(b"\x00")
    if nul >= 0:
        at_line = line_no + chunk.count(b"\n", 0, nul) + 1
        raise FormatError(
            f"{path}: line {at_line} (byte offset {offset + nul}) contains a NUL byte; "
            "this looks like a binary file, not a text corpus"
        )
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError as error:
        at_line = line_no + chunk.count(b"\n", 0, error.start) + 1
        raise FormatError(
            f"{path}: line {at_line} (byte offset {offset + error.start}) is not valid UTF-8 ({error.reason})"
        ) from None
    return text


def _make_progress(total: int | None, desc: str) -> Any:
    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        disable=not sys.stderr.isatty(),
        leave=False,
    )


def _count_distilled(counter: Any, folder: Path) -> None:
    """A distilled corpus (:mod:`draftlattice.distilled_corpus`): each record, prompt and the model's
    continuation, is one sentence of token ids (no re-tokenization: the model's own tokens)."""
    corpus = DistilledCorpus.load(folder)
    counter.add_token_batch(np.ascontiguousarray(corpus.tokens, dtype=np.int32), corpus.offsets.astype(np.int64))


def _is_distilled(path: Path) -> bool:
    return path.is_dir() and (path / "meta.json").is_file()


def _count_file(counter: Any, path: Path, tokenizer: Any, max_decompressed_bytes: int) -> None:
    total = None if compression_of_name(path) else path.stat().st_size
    with _make_progress(total, f"counting {path.name}") as progress:
        for chunk, text in _read_chunks(path, progress, max_decompressed_bytes):
            if tokenizer is None:
                counter.add_text(chunk)
                continue
            lines = [line for line in (raw.strip() for raw in text.split("\n")) if line]
            for start in range(0, len(lines), _ENCODE_BATCH_LINES):
                batch = tokenizer.encode_batch(lines[start : start + _ENCODE_BATCH_LINES], add_special_tokens=False)
                ids = [encoding.ids for encoding in batch]
                offsets = np.zeros(len(ids) + 1, dtype=np.int64)
                np.cumsum([len(x) for x in ids], out=offsets[1:])
                flat = np.fromiter((token for seq in ids for token in seq), dtype=np.int32, count=int(offsets[-1]))
                counter.add_token_batch(flat, offsets)


def build_lm(
    corpus_paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    order: int,
    *,
    out_path: str | os.PathLike[str],
    tokenizer: str | os.PathLike[str] | None = None,
    min_counts: Sequence[int] | None = None,
    prune_to: int | None = None,
    prune_threshold: float | None = None,
    overwrite: bool = False,
    arpa_digits: int = 7,
    max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
) -> LmBuildResult:
    """Builds a Katz backoff n-gram LM and writes it to ``out_path`` (``.arpa`` or ``.dlm``).

    Args:
      corpus_paths: one or more text files (one sentence per line; ``.xz``/``.gz``/``.bz2`` ok),
        or distilled corpora (folders of :func:`draftlattice.training.distill.distill`: token ids of
        the model's own outputs, one sentence per record; needs ``tokenizer``).
      order: n-gram order N (1..8).
      out_path: output file; ``.arpa`` writes ARPA text, ``.dlm`` our binary format.
      tokenizer: path to a Hugging Face ``tokenizer.json`` or a transformers model folder
        (loaded offline); None = whitespace words.
      min_counts: per-order minimum counts, e.g. ``[1, 1, 2, 4]`` (the paper: trigrams >= 2,
        4-grams >= 4). N-grams below them are removed before estimation; their mass goes to the
        backoff. ``min_counts[0]`` must be 1 and the list must not decrease.
      prune_to: relative-entropy pruning to this total number of n-grams (all unigrams and
        ``<s>`` included), as ``ngramshrink --target_number_of_ngrams``.
      prune_threshold: relative-entropy pruning with this threshold (``ngramshrink --theta``).
      overwrite: replace an existing ``out_path``.
      arpa_digits: significant digits of ARPA log10 values (OpenGrm prints 7, which rounds each
        value by up to 5e-7; more keeps the estimate's full precision). Unused for ``.dlm``.
      max_decompressed_bytes: a compressed corpus file is refused (FormatError naming the file and
        the limit) once more than this many bytes come out of it (default 16 GiB per file).

    Raises:
      ValueError: impossible parameters, empty corpus; FormatError (a ValueError) for a corpus
      that is not UTF-8 text or a tokenizer file that does not parse; OSError for unreadable or
      existing files.
    """
    _core.check_build_options(order, min_counts, prune_threshold, prune_to)
    check_limit(max_decompressed_bytes)
    if isinstance(arpa_digits, bool) or not isinstance(arpa_digits, int) or not 1 <= arpa_digits <= 17:
        raise ValueError(f"arpa_digits must be an integer in 1..17, got {arpa_digits!r}")
    if isinstance(corpus_paths, (str, os.PathLike)):
        corpus_paths = [corpus_paths]
    paths = [Path(p) for p in corpus_paths]
    if not paths:
        raise ValueError("no corpus files given")
    for path in paths:
        if not path.is_file() and not _is_distilled(path):
            raise FileNotFoundError(f"corpus file not found: {path}")
        if _is_distilled(path) and tokenizer is None:
            raise ValueError(f"{path} is a distilled corpus of token ids: give the model's tokenizer (tokenizer=)")
    out = Path(out_path)
    suffix = out.suffix.lower()
    if suffix not in (".arpa", ".dlm"):
        raise ValueError(f"output must end in .arpa or .dlm, got {out}")
    if out.exists() and not overwrite:
        raise FileExistsError(f"{out} exists (pass overwrite=True / --force to replace it)")
    for path in paths:  # --force replaces an old output, never an input
        if out.exists() and path.is_file() and os.path.samefile(out, path):
            raise ValueError(f"output {out} is the corpus file {path}: refusing to write over an input")
    if not out.parent.exists():
        raise FileNotFoundError(f"output directory does not exist: {out.parent}")

    tok = None
    tok_sha = None
    if tokenizer is not None:
        tok_path = Path(tokenizer)
        if tok_path.is_dir():  # a transformers model folder
            tok, tok_sha = folder_tokenizer(tok_path)
        else:
            tok = load_tokenizer(tok_path)
            tok_sha = tokenizer_sha256(tok_path)

    seconds: dict[str, float] = {}
    start = time.perf_counter()
    counter = _core.NgramCounter(order)
    for path in paths:
        before = counter.sentences
        if _is_distilled(path):
            _count_distilled(counter, path)
        else:
            _count_file(counter, path, tok, max_decompressed_bytes)
        if counter.sentences == before:
            logger.warning("%s holds no sentences (empty or blank lines only)", path)
    if counter.sentences == 0:
        names = ", ".join(str(p) for p in paths)
        raise ValueError(f"empty corpus: no words in {names} (empty files or blank lines only)")
    seconds["count"] = time.perf_counter() - start
    logger.info(
        "counted %d sentences, %d tokens, n-grams per order %s in %.1f s",
        counter.sentences,
        counter.tokens,
        [counter.num_ngrams(k) for k in range(1, order + 1)],
        seconds["count"],
    )
    sentences, tokens = counter.sentences, counter.tokens

    start = time.perf_counter()
    model = _core.estimate_katz(counter, min_counts)
    del counter
    seconds["estimate"] = time.perf_counter() - start
    counts_before = list(model.counts())

    start = time.perf_counter()
    if prune_to is not None or prune_threshold is not None:
        theta, removed = model.prune(threshold=prune_threshold, target=prune_to)
        logger.info("relative-entropy pruning: theta=%.4g, removed %d n-grams", theta, removed)
    seconds["prune"] = time.perf_counter() - start

    start = time.perf_counter()
    metadata = []
    if tok_sha is not None:
        metadata.append((TOKENIZER_SHA256_KEY, tok_sha))
    _write_model(model, out, metadata, arpa_digits)
    seconds["write"] = time.perf_counter() - start

    return LmBuildResult(
        path=out,
        order=order,
        sentences=sentences,
        tokens=tokens,
        counts=list(model.counts()),
        counts_before_pruning=counts_before,
        tokenizer_sha256=tok_sha,
        seconds=seconds,
        count_of_counts=[list(c) for c in model.count_of_counts],
        discounts=[list(d) for d in model.discounts],
    )


def _write_model(model: Any, out: Path, metadata: list[tuple[str, str]], digits: int) -> None:
    """Writes atomically: a temporary file in the same folder, then a rename. ``.dlm`` comes
    straight from the trainer's model; ``.arpa`` rounds log10 values to ``digits`` digits."""
    fd, tmp_name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        if out.suffix.lower() == ".dlm":
            model.write_binary(str(tmp), metadata, overwrite=True)
        else:
            model.write_arpa(str(tmp), metadata, digits)
        give_usual_permissions(tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)


def read_arpa_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The ``# key: value`` lines before ``\\data\\`` of an ARPA file."""
    metadata: dict[str, str] = {}
    with _open_binary(Path(path)) as file:
        for raw in file:
            line = raw.decode("utf-8", errors="replace").strip()
            if line == "\\data\\":
                break
            if line.startswith("#") and ":" in line:
                key, value = line[1:].split(":", 1)
                metadata[key.strip()] = value.strip()
    return metadata
