"""Shared fixtures: the shared data directory, decompressed LMs (once per session)."""

from __future__ import annotations

import lzma
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# The independent ARPA scorer (tests/arpa_scorer.py) is imported by several tests.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data directory (draftlattice.assets: $DRAFTLATTICE_DATA or shared/data nearby)."""
    from draftlattice.assets import data_dir

    return data_dir()


@pytest.fixture(scope="session")
def decompressed_lm(shared_data, tmp_path_factory):
    """Callable name -> path of the decompressed ARPA (each decompressed at most once)."""
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            target = tmp_path_factory.mktemp("lm") / f"{name}.arpa"
            with lzma.open(shared_data / "lm" / f"{name}.arpa.xz", "rb") as src, open(target, "wb") as dst:
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


@pytest.fixture()
def empty_cache(tmp_path_factory, monkeypatch) -> Path:
    """An empty user cache (``$DRAFTLATTICE_CACHE``, ``$HOME`` and ``$XDG_CACHE_HOME`` in a fresh
    folder) in which a fetch fails the test: for checks that must refuse before fetching, and that
    must not depend on what an earlier run left in the real cache. Yields the cache folder."""
    from draftlattice import user_cache
    from draftlattice.default_model import fetch

    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    monkeypatch.setenv(user_cache.CACHE_ENV, str(home / "cache"))

    def no_fetch(*args, **kwargs):
        pytest.fail("the default model was fetched before the arguments were checked")

    monkeypatch.setattr(fetch, "_fetch_into", no_fetch)
    yield home / "cache"
    assert not (home / "cache").exists(), "the fetch created the cache folder before the arguments were checked"


@pytest.fixture()
def no_loading(monkeypatch):
    """Loading a transformers model fails the case: the arguments must be refused before."""
    from transformers import AutoModelForCausalLM

    def refuse(*args, **kwargs):
        pytest.fail("a model was loaded before the arguments were checked")

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", refuse)
