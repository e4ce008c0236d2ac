"""Shared fixtures: the workplace's ../shared data, decompressed LMs (once per session)."""

from __future__ import annotations

import lzma
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def shared_dir() -> Path:
    """../shared beside the project (or beside an ancestor, for git worktrees)."""
    env = os.environ.get("DRAFTLATTICE_SHARED")
    if env:
        return Path(env)
    for parent in [ROOT, *ROOT.parents]:
        candidate = parent.parent / "shared" if parent == ROOT else parent / "shared"
        if (candidate / "data").is_dir():
            return candidate
    raise FileNotFoundError(
        f"no shared/data found beside {ROOT} or its ancestors; set DRAFTLATTICE_SHARED"
    )


@pytest.fixture(scope="session")
def shared_data() -> Path:
    return shared_dir() / "data"


@pytest.fixture(scope="session")
def decompressed_lm(shared_data, tmp_path_factory):
    """Callable name -> path of the decompressed ARPA (each decompressed at most once)."""
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            target = tmp_path_factory.mktemp("lm") / f"{name}.arpa"
            with lzma.open(shared_data / "lm" / f"{name}.arpa.xz", "rb") as src, open(
                target, "wb"
            ) as dst:
                while chunk := src.read(1 << 24):
                    dst.write(chunk)
            cache[name] = target
        return cache[name]

    return get
