"""Do a model, its tokenizer and an n-gram LM belong together? The one check every entry point runs.

An n-gram LM over a model's tokens is only meaningful with the tokenizer it was counted with: the
same ids under another tokenizer are other words, and rescoring with it silently degrades every
draft. LMs built by draftlattice record the sha256 of their tokenizer.json (metadata key
``draftlattice-tokenizer-sha256``); model directories carry their tokenizer.json, and traces
record its sha256. ``demo``, ``eval`` (live and on a trace) and the drafters they build call
:func:`check_lm_tokenizer_pair` (:func:`check_lm_tokenizer` for an LM file, :func:`check_lm_for_model`
for a loaded LM and a transformers model: the decoding engine's check); a mismatch, or an LM that records no tokenizer, is a
:class:`TokenizerMismatchError` unless ``allow_mismatch`` is set (``--allow-mismatch``: a
word-level LM with a ``vocab`` mapping, used on purpose), which logs a warning instead.
:func:`check_tokenizer_fits` checks the tokenizer against the model (``demo``, ``trace record``).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from pathlib import Path

from .ngram.build import TOKENIZER_SHA256_KEY, read_arpa_metadata
from .ngram.model import NgramLM
from .tokenizer import folder_tokenizer, tokenizer_sha256

logger = logging.getLogger(__name__)

__all__ = [
    "ALLOW_MISMATCH_HELP",
    "TokenizerMismatchError",
    "check_lm_for_model",
    "check_lm_tokenizer",
    "check_lm_tokenizer_pair",
    "check_same_tokenizer",
    "check_tokenizer_fits",
    "model_tokenizer_sha256",
    "tokenizer_sha256",
]

ALLOW_MISMATCH_HELP = (
    "use the LM even if it was not built over the model's tokenizer (e.g. a word-level LM "
    "with a vocab mapping, on purpose)"
)


class TokenizerMismatchError(ValueError):
    """An LM is used with a tokenizer other than the one it was built over."""


def check_lm_tokenizer_pair(
    lm_metadata: Mapping[str, str],
    tokenizer_sha: str | None,
    *,
    lm_name: str,
    tokenizer_name: str,
    allow_mismatch: bool = False,
) -> None:
    """Raises TokenizerMismatchError unless the LM records the tokenizer with sha256 ``tokenizer_sha``.

    Args:
        lm_metadata: the LM's metadata (``NgramLM.metadata`` or ``ngram.build.read_arpa_metadata``).
        tokenizer_sha: hex sha256 of the model's tokenizer.json (:func:`tokenizer_sha256`); None
            when unknown (e.g. a trace recorded without it), which cannot be checked.
        lm_name, tokenizer_name: how the error names the two (paths, usually).
        allow_mismatch: log a warning instead of raising.
    """
    recorded = lm_metadata.get(TOKENIZER_SHA256_KEY)
    if recorded is None:
        problem = (
            f"{lm_name} records no tokenizer ({TOKENIZER_SHA256_KEY}), so it cannot be checked against {tokenizer_name}"
        )
    elif tokenizer_sha is None:
        problem = f"the tokenizer of {tokenizer_name} is unknown, so {lm_name} cannot be checked against it"
    elif recorded.lower() != tokenizer_sha.lower():
        problem = (
            f"{lm_name} was built over tokenizer sha256 {recorded}, but {tokenizer_name} has sha256 {tokenizer_sha}"
        )
    else:
        return
    _report(problem, allow_mismatch)


def check_lm_tokenizer(lm_path: str | os.PathLike[str], tokenizer: str | os.PathLike[str]) -> None:
    """Raises TokenizerMismatchError unless the LM at ``lm_path`` was built over ``tokenizer``.

    ``lm_path`` is an ARPA file (possibly compressed) or a ``.dlm`` binary LM.
    """
    lm = Path(lm_path)
    if lm.suffix.lower() == ".dlm":
        metadata = dict(NgramLM(str(lm)).metadata)
    else:
        metadata = read_arpa_metadata(lm)
    check_lm_tokenizer_pair(metadata, tokenizer_sha256(tokenizer), lm_name=str(lm), tokenizer_name=str(tokenizer))


def model_tokenizer_sha256(model) -> str | None:
    """The hash of a transformers model's tokenizer when ``config.name_or_path`` is a local folder
    holding one, else None (a hub id without a local copy cannot be checked offline)."""
    name = getattr(model.config, "name_or_path", None)
    if not name or not Path(name).is_dir():
        return None
    json_file = Path(name) / "tokenizer.json"
    if json_file.is_file():
        stat = json_file.stat()
        return _json_sha256(str(json_file.resolve()), stat.st_mtime_ns, stat.st_size)
    try:
        return folder_tokenizer(name)[1]
    except ValueError:
        return None


@functools.lru_cache(maxsize=16)
def _json_sha256(path: str, mtime_ns: int, size: int) -> str:
    """The hash of a tokenizer.json, once per version of the file: ``generate()`` checks its LM
    on every call, and parsing the tokenizer each time cost 0.12 s per call on the default model
    (the hash equals :func:`folder_tokenizer`'s for a folder with a tokenizer.json)."""
    return tokenizer_sha256(path)


def check_lm_for_model(lm, model) -> None:
    """Raise ``TokenizerMismatchError`` (a ValueError) when ``lm`` (an :class:`NgramLM`) records a
    tokenizer hash and the transformers ``model``'s folder has a different tokenizer; nothing when
    either is unknown."""
    metadata = dict(lm.metadata)
    if not metadata.get(TOKENIZER_SHA256_KEY):
        return
    actual = model_tokenizer_sha256(model)
    if actual is None:
        logger.info("cannot check the LM's tokenizer: the model has no local tokenizer folder")
        return
    check_lm_tokenizer_pair(
        metadata,
        actual,
        lm_name=f"the n-gram LM {getattr(lm, 'path', lm)}",
        tokenizer_name=f"the model's tokenizer ({model.config.name_or_path})",
    )


def check_same_tokenizer(expected_sha: str, path: str | Path, *, owner: str, allow_mismatch: bool = False) -> None:
    """Raises TokenizerMismatchError unless the tokenizer.json at ``path`` (of ``owner``, e.g. a
    neural rescorer's directory) has sha256 ``expected_sha`` (the target model's tokenizer)."""
    actual = tokenizer_sha256(path)
    if actual != expected_sha.lower():
        _report(
            f"{owner} uses tokenizer {path} (sha256 {actual}), not the model's (sha256 {expected_sha})", allow_mismatch
        )


def _report(problem: str, allow_mismatch: bool) -> None:
    if allow_mismatch:
        logger.warning("%s; going on because the mismatch is allowed", problem)
        return
    raise TokenizerMismatchError(f"{problem}; pass --allow-mismatch (allow_mismatch=True) if this is intended")


def check_tokenizer_fits(tokenizer, vocab_size: int, *, tokenizer_name: str) -> None:
    """Raises ValueError if the ``tokenizers.Tokenizer`` can emit ids the model (vocabulary
    ``vocab_size``) has no embedding for."""
    size = tokenizer.get_vocab_size()
    if size > vocab_size:
        raise ValueError(f"tokenizer {tokenizer_name} has {size} tokens, the model only {vocab_size}")
