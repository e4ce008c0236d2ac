"""The CLI's one overwrite policy for the files and folders it writes.

- An existing output is refused unless ``--force`` is given.
- An output is never one of the command's inputs, even with ``--force`` (``lm compile x.arpa -o
  x.arpa`` would destroy the model it reads).
- Writers replace files atomically (temporary file, then rename), so an interrupted run leaves
  the old output intact: ``NgramLM.save``, ``build_lm``, ``save_trace`` and the tokenizer writer
  do; folder outputs are written into place file by file.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def check_output(output: str | os.PathLike, inputs: Iterable[str | os.PathLike] = (), force: bool = False,
                 what: str = "output") -> Path:
    """``output`` as a Path; FileExistsError if it exists without ``force``, ValueError if it
    is one of ``inputs`` (same file or same folder)."""
    out = Path(output)
    for source in inputs:
        source = Path(source)
        if out.resolve() == source.resolve() or (out.exists() and source.exists() and os.path.samefile(out, source)):
            raise ValueError(f"{what} {out} is also an input of this command; write to another path")
    if out.exists() and not force:
        kind = "folder" if out.is_dir() else "file"
        raise FileExistsError(f"{out}: {kind} exists (use --force to replace it)")
    return out
