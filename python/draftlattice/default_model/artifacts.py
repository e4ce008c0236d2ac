"""Where the default model's shipped artifacts are: the draft heads, the n-gram LM, the datastore
and the drafters' gains table (``lm_models/smollm2``). Its own module so that what reads them
(loading, the fastest drafting) imports no loader."""

from __future__ import annotations

import os
from pathlib import Path

from ..assets import model_asset

ARTIFACTS = "smollm2"
HEADS = "heads"
SAMPLING_HEADS = "heads-sampled"
LM = "katz4.dlm"
DATASTORE = "datastore.npz"


def artifacts_dir(models: str | os.PathLike[str] | None = None) -> Path:
    """``lm_models/smollm2`` (or ``models/smollm2``), checked to hold the heads and the LM."""
    folder = model_asset(ARTIFACTS, base=Path(models) if models is not None else None)
    for name in (HEADS, SAMPLING_HEADS, LM, DATASTORE):
        if not (folder / name).exists():
            raise FileNotFoundError(f"{folder / name} is missing: the default model's artifacts are incomplete")
    return folder
