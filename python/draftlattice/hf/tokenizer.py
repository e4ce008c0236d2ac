"""The tokenizer of a transformers model folder, its hash, and the LM-tokenizer check.

An n-gram LM built with ``draftlattice lm build --tokenizer MODEL_DIR`` records the sha256 of
the folder's tokenizer (of its ``tokenizer.json`` bytes when it has one, so the hash equals that
of ``--tokenizer MODEL_DIR/tokenizer.json``; otherwise of the JSON that transformers' fast
tokenizer serialises to). :func:`check_lm_for_model` compares it with the model's folder.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path

logger = logging.getLogger(__name__)


def folder_tokenizer(folder: str | os.PathLike[str]):
    """``(tokenizers.Tokenizer, sha256 hex)`` of a model folder's tokenizer (offline)."""
    from ..tokenizer import load_tokenizer, tokenizer_sha256

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


def model_tokenizer_sha256(model) -> str | None:
    """The hash of the model's tokenizer when ``config.name_or_path`` is a local folder holding
    one, else None (a hub id without a local copy cannot be checked offline)."""
    name = getattr(model.config, "name_or_path", None)
    if not name or not Path(name).is_dir():
        return None
    try:
        return folder_tokenizer(name)[1]
    except ValueError:
        return None


def check_lm_for_model(lm, model) -> None:
    """Raise ``TokenizerMismatchError`` (a ValueError) when ``lm`` records a tokenizer hash and
    the model's folder has a different tokenizer; nothing when either is unknown."""
    from ..ngram.build import TOKENIZER_SHA256_KEY
    from ..pairing import check_lm_tokenizer_pair

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
