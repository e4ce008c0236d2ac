"""`draftlattice tokenizer train`: train a byte-level BPE tokenizer on a corpus."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(subparsers) -> None:
    parser = subparsers.add_parser("tokenizer", help="train byte-level BPE tokenizers")
    commands = parser.add_subparsers(dest="tokenizer_command", metavar="SUBCOMMAND")
    train = commands.add_parser(
        "train",
        help="train a byte-level BPE on text files (one document per line)",
        description="Train a byte-level BPE tokenizer (tokenizers package, offline). Line-edge "
        "spaces are stripped and blank lines dropped.",
    )
    train.add_argument("corpus", nargs="+", type=Path, help="UTF-8 text files")
    train.add_argument("--vocab-size", type=int, default=4096, help="vocabulary size (default 4096)")
    train.add_argument("--min-frequency", type=int, default=2, help="minimum pair count to merge")
    train.add_argument(
        "--special-token",
        action="append",
        dest="special_tokens",
        metavar="TOKEN",
        help="special token (repeatable; default <|endoftext|>)",
    )
    train.add_argument("-o", "--output", type=Path, required=True, help="tokenizer.json to write")
    train.add_argument("--force", action="store_true", help="overwrite an existing output (never an input)")
    train.set_defaults(func=_train)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def _train(args: argparse.Namespace) -> int:
    from draftlattice.tokenizer import DEFAULT_SPECIAL_TOKENS, tokenizer_sha256, train_tokenizer

    from ..filekinds import expect_text
    from ._output import atomic_file, check_output

    check_output(args.output, force=args.force, inputs=args.corpus)
    for path in args.corpus:
        expect_text(path)
    special = args.special_tokens or list(DEFAULT_SPECIAL_TOKENS)
    with atomic_file(args.output) as tmp:
        tokenizer = train_tokenizer(
            args.corpus,
            args.vocab_size,
            tmp,
            special,
            min_frequency=args.min_frequency,
            show_progress=sys.stderr.isatty(),
        )
    print(f"wrote {args.output}: vocab {tokenizer.get_vocab_size()}, sha256 {tokenizer_sha256(args.output)}")
    return 0
