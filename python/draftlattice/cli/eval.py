"""`draftlattice eval`: block efficiency and the paper's analyses, on a trace or live."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..pairing import ALLOW_MISMATCH_HELP
from ._limits import add_decompression_limit
from ._output import FORCE_HELP, atomic_dir, check_output
from ._target import TARGET_HELP
from .trace import WIKITEXT_HELP, check_record_args, record_from_args


def _floats(text: str, option: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x]
    except ValueError:
        raise ValueError(f"{option} takes comma-separated numbers, got {text!r}") from None


def _ints(text: str, option: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x]
    except ValueError:
        raise ValueError(f"{option} takes comma-separated whole numbers, got {text!r}") from None
    if any(v < 1 for v in values):
        raise ValueError(f"{option} takes whole numbers >= 1, got {text!r}")
    return values


def _run(args: argparse.Namespace) -> int:
    from draftlattice.evaluate.report import evaluate_trace, format_tables, write_figures, write_results
    from draftlattice.evaluate.trace import load_trace
    from draftlattice.filekinds import expect_lm
    from draftlattice.ngram import NgramLM
    from draftlattice.pairing import check_lm_tokenizer_pair, check_same_tokenizer

    from ._checks import at_least, finite

    if args.model is not None and not args.live:
        raise ValueError("--model picks the target of a live evaluation: add --live (or give --trace)")
    if args.output:  # before the long work: refuse now, not after it
        check_output(args.output, force=args.force, inputs=[args.trace, args.lm, args.model, args.neural_lm])
    if args.html:
        check_output(args.html, force=args.force, inputs=[args.trace, args.lm, args.model, args.neural_lm])
    at_least("--k", args.k, 1)
    at_least("--p", args.p, 1)
    finite("--alpha", args.alpha)
    finite("--neural-alpha", args.neural_alpha)
    at_least("--threads", args.threads, 0)
    if not 0 < args.heldout_fraction < 1:
        raise ValueError(f"--heldout-fraction must be in (0, 1), got {args.heldout_fraction}")
    ks, ps, alphas = _ints(args.ks, "--ks"), _ints(args.ps, "--ps"), _floats(args.alphas, "--alphas")
    expect_lm(args.lm)
    if args.live:
        if not (args.prompts or args.wikitext_test):
            raise ValueError("live evaluation needs --prompts or --wikitext-test")
        check_record_args(args)
    elif not Path(args.trace).is_file():
        raise FileNotFoundError(f"{args.trace}: no such trace file")
    if args.neural_lm and not (Path(args.neural_lm) / "config.json").is_file():
        raise FileNotFoundError(f"--neural-lm {args.neural_lm}: not a transformers model folder (no config.json)")
    lm = NgramLM(args.lm, max_decompressed_bytes=args.max_decompressed_bytes)  # before the model: fails fast
    # live: record in memory; replay is exact (see replay.py)
    trace = record_from_args(args) if args.live else load_trace(args.trace)
    model_name = f"the model of {args.trace or args.model or 'the default model'}"
    tokenizer_sha = trace.meta.get("tokenizer_sha256")  # recorded by `trace record`
    check_lm_tokenizer_pair(
        lm.metadata, tokenizer_sha, lm_name=args.lm, tokenizer_name=model_name, allow_mismatch=args.allow_mismatch
    )
    neural = None
    if args.neural_lm:  # a small transformers causal LM over the same tokenizer
        from transformers import AutoModelForCausalLM

        from draftlattice.decode import NeuralDrafter

        if tokenizer_sha is not None:
            check_same_tokenizer(
                tokenizer_sha,
                Path(args.neural_lm) / "tokenizer.json",
                owner=f"neural LM {args.neural_lm}",
                allow_mismatch=args.allow_mismatch,
            )
        small = AutoModelForCausalLM.from_pretrained(args.neural_lm, dtype="float32")
        neural = NeuralDrafter(small, k=args.k, alpha=args.neural_alpha)
    result = evaluate_trace(
        trace,
        lm,
        k=args.k,
        p=args.p,
        alpha=args.alpha,
        ks=ks,
        ps=ps,
        tune_alpha=args.tune_alpha,
        alphas=alphas,
        heldout_fraction=args.heldout_fraction,
        adaptive=not args.no_adaptive,
        entropy_threshold=args.entropy_threshold,
        accuracy_threshold=args.accuracy_threshold,
        num_threads=args.threads or None,
        neural=neural,
    )
    print(format_tables(result), end="")
    if args.output:
        _write(result, args.output, write_results, write_figures)
    if args.html:
        from draftlattice.evaluate.html import eval_run
        from draftlattice.report import write_html_report

        title = f"draftlattice eval: {args.trace or args.model or 'the default model'}"
        write_html_report(eval_run(result, title, args.lm), args.html, force=True)  # checked up front
        print(f"wrote {args.html}")
    return 0


def _write(result: dict, output: str, write_results, write_figures) -> None:
    """Results first (they need nothing), then the figures if matplotlib is there; all or nothing."""
    with atomic_dir(output) as tmp:
        names = [path.name for path in write_results(result, tmp)]
        try:
            names += [path.name for path in write_figures(result, tmp)]
        except ImportError as error:
            print(f"draftlattice: figures skipped: {error}", file=sys.stderr)
    for name in names:
        print(f"wrote {Path(output) / name}")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("eval", help="block efficiency and analyses (trace replay or live)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--trace", help="trace file from `draftlattice trace record`")
    source.add_argument(
        "--live", action="store_true", help="record a trace in memory first (the decoding engine), then replay it"
    )
    group = parser.add_argument_group("live evaluation (with --live)")
    group.add_argument("--model", type=Path, help=TARGET_HELP)
    group.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    group.add_argument("--prompts")
    group.add_argument("--wikitext-test", type=int, metavar="N")
    group.add_argument("--wikitext-path", help=WIKITEXT_HELP)
    group.add_argument("--prompt-tokens", type=int, default=32)
    group.add_argument("--max-new-tokens", type=int, default=128)
    group.add_argument("--top-k", type=int, default=16)
    parser.add_argument("--lm", required=True, help="n-gram LM (.arpa[.xz|.gz] or .dlm) over the model's token ids")
    add_decompression_limit(parser, "--lm ARPA file")
    parser.add_argument("--allow-mismatch", action="store_true", help=ALLOW_MISMATCH_HELP)
    parser.add_argument("--k", type=int, default=16, help="candidates per head (<= trace top-K)")
    parser.add_argument("--p", type=int, default=16, help="drafts for the p-best rows of Table 4")
    parser.add_argument("--alpha", type=float, default=0.5, help="LM weight (natural log)")
    parser.add_argument("--tune-alpha", action="store_true", help="tune alpha on held-out prompts, report on the rest")
    parser.add_argument("--alphas", default="0,0.1,0.25,0.5,1,2")
    parser.add_argument("--heldout-fraction", type=float, default=0.25)
    parser.add_argument("--ks", default="1,2,4,8,16", help="k values of Figure 6")
    parser.add_argument("--ps", default="1,2,4,8,16", help="p values of Figure 7")
    parser.add_argument(
        "--neural-lm", help="a small transformers causal LM folder (same tokenizer) for the neural rescoring row"
    )
    parser.add_argument("--neural-alpha", type=float, default=0.5, help="its weight in the neural rescoring row")
    parser.add_argument("--no-adaptive", action="store_true", help="skip entropy-adaptive drafting")
    parser.add_argument("--entropy-threshold", type=float, default=3.0, help="h_max threshold (nats)")
    parser.add_argument("--accuracy-threshold", type=float, default=0.1, help="h_max top-1 accuracy threshold")
    parser.add_argument("--threads", type=int, default=0, help="rescoring threads (default: all)")
    parser.add_argument(
        "-o",
        "--output",
        help="directory for results.json, tables.txt and PNGs (PNGs need matplotlib: the `plot` extra)",
    )
    parser.add_argument(
        "--html", help="also write a self-contained HTML report: Table 4's rows and the oracle top-k and p-best curves"
    )
    parser.add_argument("--force", action="store_true", help=FORCE_HELP)
    parser.set_defaults(func=_run)
