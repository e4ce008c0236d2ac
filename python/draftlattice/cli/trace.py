"""`draftlattice trace`: record greedy decoding traces (record) and describe them (info)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ._target import TARGET_HELP

WIKITEXT_HELP = "WikiText-2 test.txt (default: wikitext-2/test.txt in the shared data directory, $DRAFTLATTICE_DATA)"


def add_prompt_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--prompts", help="text file, one prompt per line")
    group.add_argument("--wikitext-test", type=int, metavar="N", help="first N paragraphs of WikiText-2 test")
    parser.add_argument("--wikitext-path", help=WIKITEXT_HELP)
    parser.add_argument("--prompt-tokens", type=int, default=32, help="tokens per prompt (default 32)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--top-k", type=int, default=16, help="K candidates recorded per head")
    parser.add_argument(
        "--dtype", choices=("float32", "bfloat16"), default="float32", help="model dtype (default float32)"
    )


def check_record_args(args) -> None:
    """The arguments of a recording (``trace record``, ``eval --live``), before any loading."""
    from draftlattice.filekinds import expect_text

    from ._checks import at_least
    from ._target import check_target

    at_least("--prompt-tokens", args.prompt_tokens, 1)
    at_least("--max-new-tokens", args.max_new_tokens, 1)
    at_least("--top-k", args.top_k, 1)
    if args.wikitext_test is not None:
        at_least("--wikitext-test", args.wikitext_test, 1)
    at_least("--threads", args.threads, 0)
    for path in (args.prompts, args.wikitext_path):
        if path:
            if not Path(path).is_file():
                raise FileNotFoundError(f"{path}: no such prompts file")
            expect_text(path)
    check_target(args.model)


def record_from_args(args):
    """A trace recorded as the arguments say (checked first by :func:`check_record_args`)."""
    import torch

    from draftlattice.assets import WIKITEXT_TEST, data_file
    from draftlattice.evaluate.prompts import paragraph_prompts
    from draftlattice.evaluate.record import record_trace
    from draftlattice.pairing import check_tokenizer_fits
    from draftlattice.tokenizer import load_tokenizer, tokenizer_sha256

    from ._target import load_target

    check_record_args(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    model, heads, tok, name = load_target(args.model, args.dtype)
    tokenizer = load_tokenizer(tok)
    check_tokenizer_fits(tokenizer, heads.vocab_size, tokenizer_name=str(tok))
    source = args.prompts or args.wikitext_path or data_file(WIKITEXT_TEST)
    prompts = paragraph_prompts(source, tokenizer, args.wikitext_test, args.prompt_tokens)
    meta = {
        "model": name,
        "dtype": args.dtype,
        "tokenizer_sha256": tokenizer_sha256(tok),
        "prompts_from": str(source),
        "prompt_tokens": args.prompt_tokens,
    }
    return record_trace(model, heads, prompts, args.max_new_tokens, args.top_k, meta)


def _record(args: argparse.Namespace) -> int:
    from draftlattice.evaluate.trace import save_trace

    from ._output import atomic_file, check_output

    check_output(args.output, force=args.force, inputs=[args.model, args.prompts, args.wikitext_path])
    trace = record_from_args(args)
    with atomic_file(args.output) as tmp:
        save_trace(trace, tmp, args.logprob_dtype)
    print(f"{args.output}: {len(trace)} prompts, {trace.num_positions} positions, h={trace.num_heads}, K={trace.top_k}")
    return 0


def _info(args: argparse.Namespace) -> int:
    from draftlattice.evaluate.trace import load_trace

    trace = load_trace(args.trace)
    print(
        json.dumps(
            {
                "prompts": len(trace),
                "positions": trace.num_positions,
                "num_heads": trace.num_heads,
                "top_k": trace.top_k,
                "vocab_size": trace.vocab_size,
                "meta": trace.meta,
            },
            indent=2,
        )
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("trace", help="record / inspect greedy decoding traces for replay")
    sub = parser.add_subparsers(dest="trace_command", metavar="SUBCOMMAND", required=True)
    rec = sub.add_parser("record", help="greedy-decode prompts (the decoding engine), keeping every head's top-K")
    rec.add_argument("--model", type=Path, help=TARGET_HELP)
    add_prompt_args(rec)
    rec.add_argument("--logprob-dtype", choices=("float32", "float16"), default="float32")
    rec.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    rec.add_argument("-o", "--output", required=True, help="trace file to write")
    rec.add_argument("--force", action="store_true", help="overwrite an existing output (never an input)")
    rec.set_defaults(func=_record)
    info = sub.add_parser("info", help="sizes and metadata of a trace")
    info.add_argument("trace")
    info.set_defaults(func=_info)
