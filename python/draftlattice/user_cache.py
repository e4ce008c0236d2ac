"""Where draftlattice keeps what it fetches or measures once per machine: the default model and
its GGUF (:mod:`draftlattice.default_model.fetch`), the lean step's cost curves
(:func:`draftlattice.lean.fit.cached_cost_curve`). Its own module so that the layers below the
default model (the lean step's fit) find the cache without importing it."""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "DRAFTLATTICE_CACHE"


def cache_dir() -> Path:
    """``$DRAFTLATTICE_CACHE``, else ``$XDG_CACHE_HOME/draftlattice``, else ``~/.cache/draftlattice``."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "draftlattice"
