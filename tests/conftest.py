"""Shared fixtures: the workplace's ../shared data, decompressed LMs (once per session)."""

from __future__ import annotations

import lzma
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The independent ARPA scorer (tests/arpa_scorer.py) is imported by several tests.
sys.path.insert(0, str(Path(__file__).parent))


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


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run fastest on one torch thread (the CI machine's 2 cores are shared)."""
    import torch  # only the tests that ask for this fixture need torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
