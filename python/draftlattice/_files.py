"""Files written under a temporary name (``tempfile.mkstemp``/``mkdtemp``, created 0600/0700 so
that nobody reads half a file) get, before their rename into place, the permissions a plain
``open()`` or ``mkdir()`` would have given them under the process's umask."""

from __future__ import annotations

import os


def give_usual_permissions(path: str | os.PathLike, *, directory: bool = False) -> None:
    mask = os.umask(0o022)  # the umask is only readable by setting it: set it back at once
    os.umask(mask)
    os.chmod(path, (0o777 if directory else 0o666) & ~mask)
