"""The README's and the guides' commands, so that they cannot rot.

Convention for fenced blocks in README.md and docs/*.md (the info string after the language):

* ``bash run`` / ``python run``: run as written, from a copy of the checkout (``examples/`` and
  ``lm_models/`` linked in, ``../shared`` pointing at the shared data), and must succeed. Kept to
  commands that take seconds and need no model download.
* ``bash fails``: every command must fail the way bad input fails: exit status 1 and one
  ``draftlattice: error:`` line.
* any other ``bash`` block: every ``draftlattice ...`` line is parsed by the CLI's own parser
  (the subcommand and every flag must exist and take the values given) but not run; ``python
  SCRIPT`` lines must name a file of the checkout.

Also: every command of ``draftlattice --help`` is shown in some guide.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import draftlattice
from draftlattice.assets import data_dir
from draftlattice.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)([^\n]*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def _blocks() -> list[tuple[str, str, set[str], str]]:
    """(file name, language, marks, text) of every fenced block."""
    out = []
    for path in DOCS:
        for match in FENCE.finditer(path.read_text(encoding="utf-8")):
            out.append((path.relative_to(ROOT).as_posix(), match[1], set(match[2].split()), match[3]))
    return out


BLOCKS = _blocks()


def _commands(text: str) -> list[list[str]]:
    """Shell command lines of a block (backslash continuations joined, comments dropped)."""
    lines, current = [], ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        current += line
        words = shlex.split(current, comments=True)
        if words:
            lines.append(words)
        current = ""
    return lines


def _parse(words: list[str]) -> str | None:
    """argparse's complaint about a `draftlattice` command line, or None if it parses."""
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(words[1:])
    except SystemExit as exit:
        if exit.code:
            return stderr.getvalue().strip().splitlines()[-1]
    return None


SHELL = [b for b in BLOCKS if b[1] in ("bash", "sh")]


@pytest.mark.parametrize("where, text", [(b[0], b[3]) for b in SHELL], ids=[f"{b[0]}:{i}" for i, b in enumerate(SHELL)])
def test_every_documented_command_line_parses(where, text):
    for words in _commands(text):
        if words[0] == "draftlattice":
            assert _parse(words) is None, f"{where}: {shlex.join(words)}: {_parse(words)}"
        elif words[0] == "python" and words[1].endswith(".py"):
            assert (ROOT / words[1]).is_file(), f"{where}: {words[1]} is not in the checkout"


def _leaf_commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        return [prefix]
    return [leaf for name, sub in subparsers[0].choices.items() for leaf in _leaf_commands(sub, (*prefix, name))]


def test_every_command_of_the_help_is_shown_in_a_guide():
    shown = {tuple(words[1:3]) for _, _, _, text in SHELL for words in _commands(text) if words[0] == "draftlattice"}
    missing = [
        " ".join(leaf) for leaf in _leaf_commands(build_parser()) if not any(s[: len(leaf)] == leaf for s in shown)
    ]
    assert not missing, f"commands of `draftlattice --help` no guide shows: {missing}"


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A working directory laid out like the checkout, and the environment to run commands in."""
    work = tmp_path_factory.mktemp("docs")
    root = work / "checkout"
    root.mkdir()
    for name in ("examples", "lm_models"):
        (root / name).symlink_to(ROOT / name)
    (work / "shared").symlink_to(data_dir().parent)
    bin_dir = work / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "draftlattice"  # the installed console script, or the working tree's package
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m draftlattice.cli.main "$@"\n')
    shim.chmod(0o755)
    package_parent = str(Path(draftlattice.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH", "")) if p)
    env.pop("DRAFTLATTICE_DATA", None)
    return root, env


RUN = [b for b in BLOCKS if "run" in b[2]]


@pytest.mark.slow
@pytest.mark.parametrize(
    "where, language, text", [(b[0], b[1], b[3]) for b in RUN], ids=[f"{b[0]}:{i}" for i, b in enumerate(RUN)]
)
def test_blocks_marked_run_run_as_written(checkout, where, language, text):
    root, env = checkout
    if language == "python":
        argv = [sys.executable, "-c", text]
    else:
        argv = ["bash", "-e", "-c", text]
    done = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (
        f"{where} failed ({done.returncode}):\n{text}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    )


FAILS = [b for b in BLOCKS if "fails" in b[2]]


@pytest.mark.parametrize("where, text", [(b[0], b[3]) for b in FAILS], ids=[f"{b[0]}:{i}" for i, b in enumerate(FAILS)])
def test_blocks_marked_fails_fail_with_one_error_line(checkout, where, text):
    root, env = checkout
    for words in _commands(text):
        done = subprocess.run(words, cwd=root, env=env, capture_output=True, text=True, timeout=120)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 1 and len(lines) == 1 and lines[0].startswith("draftlattice: error:"), (
            f"{where}: {shlex.join(words)} -> {done.returncode}: {done.stderr}"
        )


def test_the_marks_are_used():
    assert RUN and FAILS, "no block is run: the convention above lost its marks"
