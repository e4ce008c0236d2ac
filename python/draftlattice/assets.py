"""Where the shipped artifacts (lm_models/) and the workplace data (../shared/data) live.

Search order for lm_models/: ``$DRAFTLATTICE_MODELS``; the copy installed inside the package
(wheels built by ``pip install .`` include it); the source checkout the package was built from
(recorded at build time) or runs from (``PYTHONPATH=python``); ``./lm_models``. Data
(WikiText-2 etc.): ``$DRAFTLATTICE_DATA``; ``shared/data`` beside that checkout or one of its
ancestors, then beside the current directory. Missing files raise FileNotFoundError naming every path tried.
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


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
    raise FileNotFoundError(f"{what} not found; tried:\n  {tried}\n{hint}")


def models_dir() -> Path:
    """The lm_models/ directory (default model, tokenizer, n-gram LMs, neural rescorer)."""
    env = os.environ.get("DRAFTLATTICE_MODELS")
    candidates = [Path(env)] if env else []
    candidates += [PACKAGE_DIR / "lm_models"] + [root / "lm_models" for root in _checkouts()]
    return _first_existing(candidates, "lm_models/", "set DRAFTLATTICE_MODELS to the directory of the shipped models")


def model_asset(name: str, base: Path | None = None) -> Path:
    """A file or directory inside lm_models/, e.g. ``default`` or ``katz4.dlm``; only inside
    ``base`` when it is given (an explicit choice is never silently replaced)."""
    env = os.environ.get("DRAFTLATTICE_MODELS")
    if base is not None:
        bases = [Path(base)]
    else:
        bases = ([Path(env)] if env else []) + [PACKAGE_DIR / "lm_models"] + [r / "lm_models" for r in _checkouts()]
    return _first_existing([base / name for base in bases], f"shipped artifact lm_models/{name}",
                           "rebuild it with the recipes in lm_models/ or set DRAFTLATTICE_MODELS")


def shared_data_dir() -> Path:
    """The workplace data directory (``../shared/data`` beside the checkout)."""
    env = os.environ.get("DRAFTLATTICE_DATA")
    candidates = [Path(env)] if env else []
    # ../shared/data beside the checkout, or beside an ancestor (git worktrees live deeper).
    candidates += [parent / "shared" / "data" for root in _checkouts() for parent in root.parents]
    return _first_existing(candidates, "shared data directory", "pass --data or set DRAFTLATTICE_DATA")
