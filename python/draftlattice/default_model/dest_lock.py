"""One process at a time writes a destination: an exclusive lock file beside it.

The lock file lives only while it is held: its holder deletes it, then unlocks. A waiter that
then locks the deleted file sees that the path no longer names it and locks the path's current
file instead, so two processes never hold the lock of one destination at once, and no lock file
is left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)


class LockError(RuntimeError):
    """The lock could not be taken: another process held it too long, or its file cannot be made."""


def make_folders(folder: Path) -> list[Path]:
    """Creates ``folder`` and its missing parents; returns those it created, deepest first.
    OSError as ``mkdir`` raises it."""
    missing = []
    for path in (folder, *folder.parents):
        if path.is_dir():
            break
        missing.append(path)
    folder.mkdir(parents=True, exist_ok=True)
    return missing


@contextlib.contextmanager
def locked(
    out: Path, wait_seconds: float, poll_seconds: float, doing: str = "writing", error: type = LockError
) -> Iterator[None]:
    """An exclusive lock beside ``out``; waits (logging) up to ``wait_seconds`` while another
    process holds it, trying every ``poll_seconds``. ``doing`` names the work in messages;
    ``error`` (one message argument) is raised when the lock cannot be taken."""
    lock_path = out.with_name(f".{out.name}.lock")
    try:
        lock = _acquire(lock_path, out, wait_seconds, poll_seconds, doing)
    except LockError as failed:
        raise error(str(failed)) from None
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_path)  # the file we hold: no other process deletes it while we do
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _acquire(lock_path: Path, out: Path, wait_seconds: float, poll_seconds: float, doing: str):
    """The open, locked file at ``lock_path``."""
    deadline = time.monotonic() + wait_seconds
    logged = False
    while True:
        try:
            lock = open(lock_path, "a+")
        except FileNotFoundError:  # a failed run removed the folder it had created: make it again
            try:
                make_folders(lock_path.parent)
            except OSError as error:
                raise LockError(f"cannot create the folder {lock_path.parent}: {error.strerror}") from None
            continue
        except OSError as error:
            raise LockError(f"cannot lock {lock_path}: {error.strerror}") from None
        try:
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise LockError(
                            f"another process has been {doing} {out} for over {wait_seconds:.0f} s "
                            f"(lock {lock_path}); try again later"
                        ) from None
                    if not logged:
                        logger.warning("another process is %s %s; waiting for it", doing, out)
                        logged = True
                    time.sleep(poll_seconds)
            if _names(lock_path, lock):
                return lock
        except BaseException:
            lock.close()
            raise
        lock.close()  # its holder deleted it when done: lock the path's current file


def _names(path: Path, file) -> bool:
    """Whether ``path`` still names the open ``file`` (not deleted, not replaced)."""
    try:
        current = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(file.fileno())
    return (mine.st_dev, mine.st_ino) == (current.st_dev, current.st_ino)
