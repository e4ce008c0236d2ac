"""Finding the shipped models and the shared data: the one place that knows where they live.

Two environment variables, one per kind of file; when one is set, it is the only place looked at
(an explicit choice is never silently replaced):

* ``DRAFTLATTICE_MODELS``: the shipped-models directory (``lm_models/``: the default model, its
  tokenizer, n-gram LMs, the neural rescorer). Otherwise: the copy installed inside the package
  (wheels built by ``pip install .`` include it), then ``lm_models/`` of the source checkout the
  package runs from (``PYTHONPATH=python``) or was built from (recorded at build time), then of
  the current directory.
* ``DRAFTLATTICE_DATA``: the shared data directory (WikiText-2, the enwiki sample, reference
  ARPA LMs). Otherwise: ``shared/data`` beside the checkout or beside one of its ancestors (git
  worktrees sit deeper), then the same beside the current directory.

A missing file raises :class:`AssetNotFoundError` (a ``FileNotFoundError``) naming what was looked
for and every place tried.
"""

from __future__ import annotations

import os
from pathlib import Path

MODELS_ENV = "DRAFTLATTICE_MODELS"
DATA_ENV = "DRAFTLATTICE_DATA"
PACKAGE_DIR = Path(__file__).resolve().parent
WIKITEXT_TEST = "wikitext-2/test.txt"  # inside the data directory
WIKITEXT_RAW_TEST = "wikitext-2-raw/test.txt"  # the demo's text prompts
WIKITEXT_RAW_VALID = "wikitext-2-raw/valid.txt"  # held-out calibration prompts (the demo reads test)


class AssetNotFoundError(FileNotFoundError):
    """A shipped model or a shared data file is not where it was looked for."""


def _checkouts() -> list[Path]:
    """Source checkouts this package may come from, most specific first."""
    roots = [PACKAGE_DIR.parents[1]]  # python/draftlattice -> checkout root
    recorded = PACKAGE_DIR / "source_dir.txt"  # written by CMake when a wheel is built
    if recorded.is_file():
        roots.append(Path(recorded.read_text().strip()))
    roots.append(Path.cwd())
    return roots


def _first_existing(candidates: list[Path], what: str, hint: str) -> Path:
    candidates = list(dict.fromkeys(candidates))  # drop repeats, keep order
    for path in candidates:
        if path.exists():
            return path
    tried = "\n  ".join(str(p) for p in candidates)
    raise AssetNotFoundError(f"{what} not found; tried:\n  {tried}\n{hint}")


def _model_bases(base: Path | None) -> tuple[list[Path], str]:
    if base is not None:
        return [Path(base)], "(the directory given)"
    env = os.environ.get(MODELS_ENV)
    if env:
        return [Path(env)], f"(from ${MODELS_ENV})"
    bases = [PACKAGE_DIR / "lm_models"] + [root / "lm_models" for root in _checkouts()]
    return bases, f"set {MODELS_ENV} to the shipped-models directory"


def model_asset(name: str, base: Path | None = None) -> Path:
    """A file or directory among the shipped models, e.g. ``default`` or ``katz4.dlm``; only
    inside ``base`` when it is given."""
    bases, hint = _model_bases(base)
    return _first_existing(
        [b / name for b in bases], f"shipped model file {name!r}", f"{hint}; the recipes in lm_models/ rebuild it"
    )


def data_dir() -> Path:
    """The shared data directory (``shared/data``)."""
    env = os.environ.get(DATA_ENV)
    if env:
        return _first_existing([Path(env)], "the shared data directory", f"(from ${DATA_ENV})")
    candidates = [parent / "shared" / "data" for root in _checkouts() for parent in root.parents]
    return _first_existing(
        candidates, "the shared data directory shared/data", f"set {DATA_ENV} to the shared data directory"
    )


def data_file(relative: str) -> Path:
    """A file inside the shared data directory, e.g. ``wikitext-2/test.txt``."""
    directory = data_dir()
    return _first_existing(
        [directory / relative],
        f"shared data file {relative!r}",
        f"the data directory is {directory} (${DATA_ENV} chooses another)",
    )
