"""`draftlattice trace`: record greedy decoding traces (record) and describe them (info)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path



def _shared_wikitext() -> Path:
    """../shared/data/wikitext-2/test.txt beside the project (or an ancestor, for worktrees)."""
    root = Path(__file__).resolve().parents[3]
    for base in [root, *root.parents]:
        candidate = base.parent / "shared" / "data" / "wikitext-2" / "test.txt"
        if candidate.is_file():
            return candidate
    return root.parent / "shared" / "data" / "wikitext-2" / "test.txt"


WIKITEXT_TEST = _shared_wikitext()


def add_prompt_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--prompts", help="text file, one prompt per line")
    group.add_argument("--wikitext-test", type=int, metavar="N", help="first N paragraphs of WikiText-2 test")
    parser.add_argument("--wikitext-path", default=str(WIKITEXT_TEST), help="WikiText-2 test.txt")
    parser.add_argument("--prompt-tokens", type=int, default=32, help="tokens per prompt (default 32)")
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--top-k", type=int, default=16, help="K candidates recorded per head")


def record_from_args(args):
    import torch

    from draftlattice.evaluate.prompts import prompts_from_file
    from draftlattice.evaluate.record import record_trace
    from draftlattice.ngram.build import tokenizer_sha256
    from draftlattice.model.io import load_model, tokenizer_file

    if args.threads:
        torch.set_num_threads(args.threads)
    model = load_model(args.model)
    tok = tokenizer_file(args.model)
    source = args.prompts or args.wikitext_path
    prompts = prompts_from_file(source, tok, args.wikitext_test, args.prompt_tokens)
    meta = {"model": str(args.model), "tokenizer_sha256": tokenizer_sha256(tok), "prompts_from": str(source),
            "prompt_tokens": args.prompt_tokens}
    return record_trace(model, prompts, args.max_new_tokens, args.top_k, meta)


def _record(args: argparse.Namespace) -> int:
    from draftlattice.evaluate.trace import save_trace

    trace = record_from_args(args)
    save_trace(trace, args.output, args.logprob_dtype)
    print(f"{args.output}: {len(trace)} prompts, {trace.num_positions} positions, h={trace.num_heads}, K={trace.top_k}")
    return 0


def _info(args: argparse.Namespace) -> int:
    from draftlattice.evaluate.trace import load_trace

    trace = load_trace(args.trace)
    print(json.dumps({"prompts": len(trace), "positions": trace.num_positions, "num_heads": trace.num_heads,
                      "top_k": trace.top_k, "vocab_size": trace.vocab_size, "meta": trace.meta}, indent=2))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("trace", help="record / inspect greedy decoding traces for replay")
    sub = parser.add_subparsers(dest="trace_command", metavar="SUBCOMMAND", required=True)
    rec = sub.add_parser("record", help="greedy-decode prompts, keeping every head's top-K")
    rec.add_argument("--model", required=True, help="model directory (BlockwiseLM + tokenizer.json)")
    add_prompt_args(rec)
    rec.add_argument("--logprob-dtype", choices=("float32", "float16"), default="float32")
    rec.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    rec.add_argument("-o", "--output", required=True, help="trace file to write")
    rec.set_defaults(func=_record)
    info = sub.add_parser("info", help="sizes and metadata of a trace")
    info.add_argument("trace")
    info.set_defaults(func=_info)
