"""The tokenizer of a transformers model, its hash, and the LM-tokenizer check.

An n-gram LM built with ``draftlattice lm build --tokenizer MODEL_DIR`` records the sha256 of
the folder's tokenizer (:func:`draftlattice.tokenizer.folder_tokenizer`). :func:`check_lm_for_model`
compares it with the model's folder.
"""

from __future__ import annotations

import functools
import logging
from pathlib import Path

from ..ngram.build import TOKENIZER_SHA256_KEY
from ..pairing import check_lm_tokenizer_pair
from ..tokenizer import folder_tokenizer, tokenizer_sha256

logger = logging.getLogger(__name__)

__all__ = ["check_lm_for_model", "model_tokenizer_sha256"]


def model_tokenizer_sha256(model) -> str | None:
    """The hash of the model's tokenizer when ``config.name_or_path`` is a local folder holding
    one, else None (a hub id without a local copy cannot be checked offline)."""
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
    """Raise ``TokenizerMismatchError`` (a ValueError) when ``lm`` records a tokenizer hash and
    the model's folder has a different tokenizer; nothing when either is unknown."""
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
        lm_name=f"draft_lm {getattr(lm, 'path', lm)}",
        tokenizer_name=f"the model's tokenizer ({model.config.name_or_path})",
    )
