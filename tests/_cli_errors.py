"""The CLI's refusal as the bad-input tests expect it: one line, a non-zero exit, no traceback."""

from __future__ import annotations

import pytest

from draftlattice.cli.main import main


def one_line_error(argv: list[str], capsys) -> str:
    """Run ``main(argv)`` in-process and return the one line it printed on stderr.

    Fails the test when an exception escapes ``main`` (the user would see a traceback), when it
    exits 0, or when stderr holds anything but one ``draftlattice: error:`` line.
    """
    command = " ".join(map(str, argv))
    try:
        code = main(argv)
    except BaseException as error:  # noqa: BLE001 (any escape is a traceback for the user)
        pytest.fail(f"{command}: escaped main: {type(error).__name__}: {error}")
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code != 0, f"exit code 0 for {command}"
    assert len(lines) == 1, f"{command}: expected one line, got:\n{err}"
    assert lines[0].startswith("draftlattice: error:"), f"{command}: {lines[0]}"
    return lines[0]
