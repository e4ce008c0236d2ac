"""The CLI's one overwrite policy for files and folders it writes.

1. An existing output is refused unless the user passed ``--force``.
2. An output is never one of the command's inputs, even with ``--force`` (that would destroy the
   data the command is reading).
3. The output is written under a temporary name beside it and renamed into place only when
   complete, so an interrupted or failed run leaves the old file (or nothing) behind, never half
   a file.

Commands call :func:`check_output` while validating arguments (before any long work), then write
through :func:`atomic_file` or :func:`atomic_dir`. ``lm compile`` / ``lm build`` can adopt the
same three calls.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from .._files import give_usual_permissions

FORCE_HELP = "overwrite an existing output (never one of the inputs)"


def check_output(
    path: str | os.PathLike,
    *,
    force: bool,
    inputs: Iterable[str | os.PathLike | None] = (),
    expect: str | None = None,
    described: str | None = None,
) -> Path:
    """``path`` as a Path after checking the policy; ValueError naming the file otherwise.

    ``expect`` ("file" or "folder") also refuses an existing output of the other kind (its
    message calls the output ``described``, e.g. "a trace file"), and the folder it goes in is
    tried for writing (a file created and removed there), so that a path the command cannot
    write is refused before its work, not after.
    """
    out = Path(path)
    for source in inputs:
        if source is not None and _same_file(out, Path(source)):
            raise ValueError(f"{out}: the output is also an input ({source}); write elsewhere")
    if (out.exists() or out.is_symlink()) and not force:
        raise ValueError(f"{out}: exists (use --force to overwrite)")
    if not out.parent.is_dir():
        raise ValueError(f"{out}: parent folder {out.parent} does not exist")
    if expect == "file" and out.is_dir():
        raise ValueError(f"{out}: is a folder, expected {described or 'a file'} to write")
    if expect == "folder" and out.exists() and not out.is_dir():
        raise ValueError(f"{out}: exists and is a file, expected {described or 'a folder'} to write")
    if expect is not None:
        _try_writing_in(out)
    return out


def _try_writing_in(out: Path) -> None:
    try:
        fd, probe = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".probe", dir=out.parent)
    except OSError as error:
        raise ValueError(f"{out}: cannot write in {out.parent} ({error.strerror})") from None
    os.close(fd)
    os.unlink(probe)


def _same_file(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike) -> Iterator[Path]:
    """Yields a temporary path beside ``path``; renames it onto ``path`` if the block succeeds."""
    out = Path(path)
    if out.is_dir():
        raise ValueError(f"{out}: is a folder, expected a file to write")
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        give_usual_permissions(tmp)
        os.replace(tmp, out)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yields an empty temporary folder beside ``path``; on success it replaces ``path``.

    Replacing a folder takes two renames (the old one aside, the new one in); the old folder is
    deleted only after the new one is in place.
    """
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out}: is a file, expected a folder to write")
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        yield tmp
        give_usual_permissions(tmp, directory=True)
        old = None
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
            os.replace(out, old / "previous")
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
