"""`draftlattice eval`: block efficiency and the paper's analyses, on a trace or live."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from ..pairing import ALLOW_MISMATCH_HELP
from ._limits import add_decompression_limit
from ._output import FORCE_HELP, atomic_dir, check_output
from ._target import TARGET_HELP
from .trace import WIKITEXT_HELP, check_record_args, record_from_args, target_tokenizer_sha

DEFAULT_ALPHAS = (0.0, 0.1, 0.25, 0.5, 1.0, 2.0)  # --tune-alpha's grid
# the largest LM weight: far past the point where the LM alone ranks the drafts, far below the
# weights whose scores overflow (alpha=1e308 left no draft to replay)
MAX_ALPHA = 1e6
DEFAULT_KS = (1, 2, 4, 8, 16)  # Figure 6's k values, those up to the trace's top-K
# a live evaluation's recording options (None in the parser: given without --live, they are refused)
LIVE_DEFAULTS = {"dtype": "float32", "prompt_tokens": 32, "max_new_tokens": 128, "top_k": 16}
LIVE_OPTIONS = ("prompts", "wikitext_test", "wikitext_path", *LIVE_DEFAULTS)
# what `eval -o` writes: --force replaces a folder holding nothing else (a previous report)
REPORT_FILES = ("results.json", "tables.txt", "figure6_oracle.png", "figure7_pbest.png")


def _floats(text: str, option: str) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x]
    except ValueError:
        raise ValueError(f"{option} takes comma-separated numbers, got {text!r}") from None
    if not values:
        raise ValueError(f"{option} takes at least one number, got {text!r}")
    return values


def _ints(text: str, option: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x]
    except ValueError:
        raise ValueError(f"{option} takes comma-separated whole numbers, got {text!r}") from None
    if not values:
        raise ValueError(f"{option} takes at least one whole number, got {text!r}")
    if any(v < 1 for v in values):
        raise ValueError(f"{option} takes whole numbers >= 1, got {text!r}")
    return values


def _weight(option: str, value: float) -> None:
    if not (math.isfinite(value) and 0 <= value <= MAX_ALPHA):
        raise ValueError(f"{option} must be a finite number in [0, {MAX_ALPHA:g}], got {value}")


def _check_numbers(args: argparse.Namespace) -> tuple[list[int] | None, list[int], list[float] | None]:
    """The numeric options, checked; returns the --ks (None: the default), --ps and --alphas lists."""
    from ._checks import at_least

    at_least("--k", args.k, 1)
    at_least("--p", args.p, 1)
    _weight("--alpha", args.alpha)
    _weight("--neural-alpha", args.neural_alpha)
    at_least("--threads", args.threads, 0)
    if not 0 < args.heldout_fraction < 1:
        raise ValueError(f"--heldout-fraction must be in (0, 1), got {args.heldout_fraction}")
    if not (math.isfinite(args.entropy_threshold) and args.entropy_threshold >= 0):
        raise ValueError(f"--entropy-threshold must be a finite number of nats >= 0, got {args.entropy_threshold}")
    if not 0 <= args.accuracy_threshold <= 1:
        raise ValueError(f"--accuracy-threshold must be a top-1 accuracy in [0, 1], got {args.accuracy_threshold}")
    ks = _ints(args.ks, "--ks") if args.ks is not None else None
    ps = _ints(args.ps, "--ps")
    alphas = None
    if args.alphas is not None:
        alphas = _floats(args.alphas, "--alphas")
        for alpha in alphas:
            _weight("--alphas", alpha)
    return ks, ps, alphas


def _check_top_k(k: int, ks: list[int] | None, top_k: int, where: str, fix: str) -> list[int]:
    """--k and every --ks value within the ``top_k`` candidates ``where`` records (``fix``: how
    to record more); returns Figure 6's k values (the default ones up to ``top_k``)."""
    if k > top_k:
        raise ValueError(f"k={k} candidates per head: {where} records only the top {top_k} ({fix} or lower --k)")
    if ks is None:
        return [kk for kk in DEFAULT_KS if kk <= top_k]
    above = [kk for kk in ks if kk > top_k]
    if above:
        raise ValueError(
            f"--ks {','.join(map(str, above))}: {where} records only the top {top_k} candidates per head "
            f"({fix} or lower --ks)"
        )
    return ks


def _check_outputs(args: argparse.Namespace, inputs: list) -> None:
    """-o and --html, before any work (see :func:`_check_report_folder`)."""
    if args.output and args.html and Path(args.output).resolve() == Path(args.html).resolve():
        raise ValueError(f"-o and --html both name {args.output}: the report folder and the HTML page need two paths")
    if args.output:
        _check_report_folder(Path(args.output), force=args.force, inputs=inputs, html=args.html)
    if args.html:
        html = check_output(args.html, force=args.force, inputs=inputs, expect="file", described="an HTML file")
        if args.output and html.parent.resolve() == Path(args.output).resolve() and html.name in REPORT_FILES:
            raise ValueError(f"--html {html}: would overwrite the report's own {html.name}")


def _check_report_folder(out: Path, *, force: bool, inputs: list, html: str | None) -> None:
    """The report folder replaces ``out`` whole (atomic_dir): refuse a file there, a folder that
    holds one of the inputs, and, even with --force, a folder holding anything but a previous
    report's files (the --html page of this run aside), so that --force never deletes user files."""
    check_output(out, force=True, inputs=inputs, expect="folder")  # an input or a file there; a missing parent
    check_output(out, force=force)  # an existing folder needs --force
    if not out.is_dir():
        return
    folder = out.resolve()
    for source in inputs:
        if source is not None and folder in Path(source).resolve().parents:
            raise ValueError(
                f"{out}: holds the input {source}, which replacing the folder would delete; write elsewhere"
            )
    kept = set(REPORT_FILES)
    if html and Path(html).resolve().parent == folder:
        kept.add(Path(html).name)  # written again by this run
    for item in sorted(out.iterdir()):
        if item.name not in kept or (item.is_dir() and not item.is_symlink()):
            raise ValueError(
                f"{out}: holds {item.name}, not a file of eval's report ({', '.join(REPORT_FILES)}); "
                "--force replaces only the folder of a previous report: move it or write elsewhere"
            )


def _check_live(args: argparse.Namespace) -> None:
    """Live-only options without --live are refused; with it, the defaults fill the others in."""
    if not args.live:
        given = [f"--{name.replace('_', '-')}" for name in ("model", *LIVE_OPTIONS) if getattr(args, name) is not None]
        if given:
            raise ValueError(
                f"{', '.join(given)}: for a live evaluation only (add --live); a --trace was recorded with its own"
            )
        return
    for name, value in LIVE_DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)


def _run(args: argparse.Namespace) -> int:
    from draftlattice.evaluate.report import evaluate_trace, format_tables, write_figures, write_results
    from draftlattice.evaluate.trace import load_trace
    from draftlattice.filekinds import expect_lm
    from draftlattice.ngram import NgramLM
    from draftlattice.pairing import check_lm_tokenizer_pair, check_same_tokenizer

    _check_live(args)
    ks, ps, alphas = _check_numbers(args)
    if alphas is not None and not args.tune_alpha:
        print("draftlattice: note: --alphas has no effect without --tune-alpha", file=sys.stderr)
    inputs = [args.trace, args.lm, args.model, args.neural_lm, args.prompts, args.wikitext_path]
    _check_outputs(args, inputs)  # before the long work: refuse now, not after it
    expect_lm(args.lm)
    if args.live:
        if not (args.prompts or args.wikitext_test):
            raise ValueError("live evaluation needs --prompts or --wikitext-test")
        check_record_args(args)
        ks = _check_top_k(args.k, ks, args.top_k, f"--top-k {args.top_k}", "raise --top-k")
    elif not Path(args.trace).is_file():
        raise FileNotFoundError(f"{args.trace}: no such trace file")
    if args.neural_lm and not (Path(args.neural_lm) / "config.json").is_file():
        raise FileNotFoundError(f"--neural-lm {args.neural_lm}: not a transformers model folder (no config.json)")
    lm = NgramLM(args.lm, max_decompressed_bytes=args.max_decompressed_bytes)  # before the model: fails fast
    model_name = f"the model {args.model or '(the default model)'}" if args.live else f"the model of {args.trace}"
    if args.live:  # the target's tokenizer is known without loading it: the pair is checked before recording
        check_lm_tokenizer_pair(
            lm.metadata,
            target_tokenizer_sha(args.model),
            lm_name=args.lm,
            tokenizer_name=model_name,
            allow_mismatch=args.allow_mismatch,
        )
    # live: record in memory; replay is exact (see replay.py)
    trace = record_from_args(args) if args.live else load_trace(args.trace)
    if not args.live:
        ks = _check_top_k(args.k, ks, trace.top_k, "the trace", "record it with a larger --top-k")
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
        alphas=alphas if alphas is not None else DEFAULT_ALPHAS,
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
    group = parser.add_argument_group("live evaluation (with --live; refused without it)")
    group.add_argument("--model", type=Path, help=TARGET_HELP)
    group.add_argument("--dtype", choices=("float32", "bfloat16"), help="model dtype (default float32)")
    group.add_argument("--prompts", help="text file, one prompt per line")
    group.add_argument("--wikitext-test", type=int, metavar="N", help="first N paragraphs of WikiText-2 test")
    group.add_argument("--wikitext-path", help=WIKITEXT_HELP)
    group.add_argument("--prompt-tokens", type=int, help="tokens per prompt (default 32)")
    group.add_argument("--max-new-tokens", type=int, help="new tokens per prompt (default 128)")
    group.add_argument("--top-k", type=int, help="K candidates recorded per head (default 16; >= --k and --ks)")
    parser.add_argument("--lm", required=True, help="n-gram LM (.arpa[.xz|.gz] or .dlm) over the model's token ids")
    add_decompression_limit(parser, "--lm ARPA file")
    parser.add_argument("--allow-mismatch", action="store_true", help=ALLOW_MISMATCH_HELP)
    parser.add_argument("--k", type=int, default=16, help="candidates per head (<= the recorded top-K)")
    parser.add_argument("--p", type=int, default=16, help="drafts for the p-best rows of Table 4")
    parser.add_argument(
        "--alpha", type=float, default=0.5, help=f"LM weight (natural log), in [0, {MAX_ALPHA:g}] (default 0.5)"
    )
    parser.add_argument("--tune-alpha", action="store_true", help="tune alpha on held-out prompts, report on the rest")
    parser.add_argument(
        "--alphas", help="the alphas --tune-alpha tries (default: " + ",".join(f"{a:g}" for a in DEFAULT_ALPHAS) + ")"
    )
    parser.add_argument("--heldout-fraction", type=float, default=0.25)
    parser.add_argument(
        "--ks",
        help="k values of Figure 6, each <= the recorded top-K (default: "
        + ",".join(map(str, DEFAULT_KS))
        + ", those up to the top-K)",
    )
    parser.add_argument("--ps", default="1,2,4,8,16", help="p values of Figure 7")
    parser.add_argument(
        "--neural-lm", help="a small transformers causal LM folder (same tokenizer) for the neural rescoring row"
    )
    parser.add_argument("--neural-alpha", type=float, default=0.5, help="its weight in the neural rescoring row")
    parser.add_argument("--no-adaptive", action="store_true", help="skip entropy-adaptive drafting")
    parser.add_argument("--entropy-threshold", type=float, default=3.0, help="h_max threshold (nats, >= 0)")
    parser.add_argument(
        "--accuracy-threshold", type=float, default=0.1, help="h_max top-1 accuracy threshold (in [0, 1])"
    )
    parser.add_argument("--threads", type=int, default=0, help="rescoring threads (default: all)")
    parser.add_argument(
        "-o",
        "--output",
        help="directory for results.json, tables.txt and PNGs (PNGs need matplotlib: the `plot` extra); "
        "--force replaces only a folder holding a previous report's files",
    )
    parser.add_argument(
        "--html", help="also write a self-contained HTML report: Table 4's rows and the oracle top-k and p-best curves"
    )
    parser.add_argument("--force", action="store_true", help=FORCE_HELP)
    parser.set_defaults(func=_run)
