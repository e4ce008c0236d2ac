"""`draftlattice lattice show`: draw a lattice as Graphviz DOT, PNG/SVG (with Graphviz) or OpenFST text."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess

from ._lattice_input import load_lattices, read_vocab
from ._output import FORCE_HELP, atomic_file, check_output


def _show(args: argparse.Namespace) -> int:
    suffix = os.path.splitext(args.output)[1].lower()
    if suffix not in (".dot", ".png", ".svg", ".pdf", ".fst", ".txt"):
        raise ValueError(f"-o {args.output}: use a .dot, .png, .svg, .pdf or .fst (OpenFST text) suffix")
    check_output(args.output, force=args.force, inputs=[args.input, args.vocab])
    is_npz = not args.input.endswith(".npy")  # anything else is read as (and reported as) a top-k .npz
    if is_npz and (args.k is not None or args.temperature is not None):
        raise ValueError(f"{args.input}: -k and --temperature apply to logits .npy input, not to a top-k .npz")
    if not is_npz and args.k is None:
        raise ValueError(f"{args.input}: a logits .npy input needs -k (candidates per head)")
    temperature = 1.0 if args.temperature is None else args.temperature  # load_lattices checks it
    lattices = load_lattices(None if is_npz else args.input, args.input if is_npz else None, args.k, temperature)
    if not 0 <= args.index < len(lattices):
        raise ValueError(f"--index {args.index} out of range: the input holds {len(lattices)} lattice(s)")
    lattice = lattices[args.index]
    if suffix in (".fst", ".txt"):
        text = lattice.to_fst_text()
    else:
        text = lattice.to_dot(read_vocab(args.vocab) if args.vocab else None)
    if suffix in (".dot", ".fst", ".txt"):
        with atomic_file(args.output) as tmp:
            tmp.write_text(text, encoding="utf-8")
    else:
        dot = shutil.which("dot")
        if dot is None:
            raise ValueError(
                f"writing {suffix[1:].upper()} needs Graphviz's `dot` on PATH "
                "(apt-get install graphviz); write a .dot file instead"
            )
        with atomic_file(args.output) as tmp:
            done = subprocess.run([dot, f"-T{suffix[1:]}", "-o", str(tmp)], input=text.encode(), capture_output=True)
            if done.returncode != 0:
                raise ValueError(f"dot failed ({done.returncode}): {done.stderr.decode(errors='replace').strip()}")
    print(f"wrote {args.output} (h={lattice.h}, k={lattice.k})")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("lattice", help="inspect top-k lattices")
    commands = parser.add_subparsers(dest="lattice_command", metavar="COMMAND", required=True)
    show = commands.add_parser(
        "show",
        help="write a lattice as DOT/PNG/SVG/PDF or OpenFST text (chosen by the -o suffix)",
        description="INPUT is logits .npy ([h, V] or [B, h, V], needs -k) or top-k .npz "
        "(tokens, logprobs). PNG/SVG/PDF need Graphviz's dot.",
    )
    show.add_argument("input", help="logits .npy or top-k .npz")
    show.add_argument("-o", "--output", required=True, help="output file (.dot, .png, .svg, .pdf, .fst)")
    show.add_argument("-k", type=int, help="candidates per head (for logits input)")
    show.add_argument("--temperature", type=float, help="softmax temperature of logits input (default 1)")
    show.add_argument("--index", type=int, default=0, help="which lattice of a batch (default 0)")
    show.add_argument("--vocab", help="vocabulary file (line i = word of token i) for arc labels")
    show.add_argument("--force", action="store_true", help=FORCE_HELP)
    show.set_defaults(func=_show)
