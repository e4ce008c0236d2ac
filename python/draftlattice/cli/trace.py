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
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=128,
        help="new tokens per prompt (default 128; with the prompt's, within the model's context)",
    )
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
    check_context(args, target_context(args.model))  # None: the default model, not fetched yet


def check_context(args, context: int | None) -> None:
    """Each prompt and its new tokens must fit the model's context of ``context`` positions."""
    if context is not None and args.prompt_tokens + args.max_new_tokens > context:
        raise ValueError(
            f"--prompt-tokens {args.prompt_tokens} + --max-new-tokens {args.max_new_tokens} exceed the model's "
            f"context of {context} tokens (max_position_embeddings)"
        )


def _default_model_folder() -> Path | None:
    """The fetched default model's transformers folder; None when it is not in the cache yet."""
    from draftlattice.default_model.fetch import default_model_dir, is_fetched

    folder = default_model_dir()
    return folder if is_fetched(folder) else None


def target_context(folder: Path | None) -> int | None:
    """The target's context length from its config alone (no weights loaded); None when unknown
    without the long work (the default model not fetched yet) or unreadable (its loading says why)."""
    model_dir = Path(folder) / "model" if folder is not None else _default_model_folder()
    if model_dir is None:
        return None
    from transformers import AutoConfig

    try:
        return context_of(AutoConfig.from_pretrained(model_dir, local_files_only=True))
    except (OSError, ValueError, KeyError):
        return None


def context_of(config) -> int | None:
    """A transformers config's position table size (None if it names none)."""
    return getattr(config, "max_position_embeddings", None) or getattr(config, "n_positions", None)


def target_tokenizer_sha(folder: Path | None) -> str | None:
    """sha256 of the target's tokenizer.json without loading the model: the target folder's, the
    fetched default model's, else the one the default model's shipped LM records."""
    from draftlattice.tokenizer import tokenizer_sha256

    if folder is not None:
        return tokenizer_sha256(Path(folder) / "model" / "tokenizer.json")
    fetched = _default_model_folder()
    if fetched is not None:
        return tokenizer_sha256(fetched / "tokenizer.json")
    from draftlattice.default_model.load import LM, artifacts_dir
    from draftlattice.ngram import NgramLM
    from draftlattice.ngram.build import TOKENIZER_SHA256_KEY

    return NgramLM(str(artifacts_dir() / LM)).metadata.get(TOKENIZER_SHA256_KEY)


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
    check_context(args, context_of(model.config))  # the default model's is known only now if it was just fetched
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

    inputs = [args.model, args.prompts, args.wikitext_path]
    check_output(args.output, force=args.force, inputs=inputs, expect="file", described="a trace file")
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
