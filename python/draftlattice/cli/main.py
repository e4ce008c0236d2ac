"""Entry point of the `draftlattice` command.

Each command group lives in its own module exposing ``register(subparsers)``; the parser it
adds sets ``func`` to a callable taking the parsed arguments and returning an exit code. The
modules import their heavy dependencies (torch, transformers) inside ``func``, so ``--help``
stays fast.
"""

from __future__ import annotations

import argparse
import logging
import sys

import draftlattice

from . import demo, hf, lattice, lm, model, rescore, tokenizer, trace
from . import eval as eval_command

# In the order they appear in --help.
COMMANDS = [lm, rescore, lattice, tokenizer, model, hf, trace, eval_command, demo]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="draftlattice",
        description="Blockwise parallel decoding with exact n-gram lattice rescoring of drafts.",
    )
    parser.add_argument("--version", action="version", version=draftlattice.__version__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (ValueError, OSError, ImportError) as error:  # FormatError is a ValueError
        print(f"draftlattice: error: {_one_line(error)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("draftlattice: interrupted (outputs are written by rename: none was left half-written)", file=sys.stderr)
        return 130


def _one_line(error: BaseException) -> str:
    """The message on one line; OSErrors without the file name in it get it added."""
    text = str(error)
    if isinstance(error, OSError) and error.filename and str(error.filename) not in text:
        text = f"{error.filename}: {text}"
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
