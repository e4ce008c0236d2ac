"""`draftlattice lm build`: build a Katz backoff n-gram LM from text (see draftlattice.ngram.build).

The `lm` command group (cli/lm.py) adds this subcommand with ``register_build(lm_subparsers)``.
"""

from __future__ import annotations

import argparse
import sys

from ._limits import add_decompression_limit


def _min_counts(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--min-count takes comma-separated integers, one per order (e.g. 1,1,2,4), got {text!r}"
        ) from None


def register_build(lm_subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    parser = lm_subparsers.add_parser(
        "build",
        help="build a Katz backoff n-gram LM (OpenGrm-compatible) from text",
        description=(
            "Count n-grams in CORPUS files (one sentence per line; .xz/.gz/.bz2 ok), estimate a "
            "Katz backoff model exactly as OpenGrm NGram's ngrammake --method=katz, optionally "
            "prune it with relative entropy (ngramshrink), and write ARPA (.arpa) or binary (.dlm)."
        ),
    )
    parser.add_argument("corpus", nargs="+", help="text corpus files")
    parser.add_argument("--order", type=int, default=4, help="n-gram order (default 4)")
    parser.add_argument(
        "--tokenizer",
        help="Hugging Face tokenizer.json or transformers model folder: build over its token ids "
        "(default: whitespace words)",
    )
    parser.add_argument(
        "--min-count",
        type=_min_counts,
        metavar="C1,C2,..",
        help="minimum count per order, e.g. 1,1,2,4 (the paper's)",
    )
    prune = parser.add_mutually_exclusive_group()
    prune.add_argument(
        "--prune-to",
        type=int,
        metavar="N",
        help="relative-entropy pruning to N n-grams in total (unigrams and <s> included)",
    )
    prune.add_argument("--prune-threshold", type=float, metavar="T", help="relative-entropy pruning threshold")
    parser.add_argument("-o", "--output", required=True, help="output file (.arpa or .dlm)")
    parser.add_argument("--force", action="store_true", help="overwrite the output file")
    add_decompression_limit(parser, "corpus file")
    spark = parser.add_argument_group("Spark engine (docs/SCALE.md; needs draftlattice[spark] and Java)")
    spark.add_argument(
        "--engine",
        choices=("local", "spark"),
        default="local",
        help="local: the one-machine C++ trainer (default); spark: the same model as Spark jobs, "
        "CORPUS may then also name directories and globs",
    )
    spark.add_argument("--master", help="Spark master URL (default local[*]), e.g. spark://host:7077, yarn")
    spark.add_argument(
        "--partitions",
        type=int,
        help="shuffle partitions of the n-gram tables, >= 1 (default: Spark's default parallelism, at least 2)",
    )
    spark.add_argument(
        "--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)"
    )
    parser.set_defaults(func=run_build)
    return parser


def register_lm(lm_subparsers: argparse._SubParsersAction) -> None:
    """Adds `lm build` to the `lm` group (called by cli/lm.py)."""
    register_build(lm_subparsers)


def _spark_options(args: argparse.Namespace) -> dict:
    if args.partitions is not None and args.partitions < 1:
        raise ValueError(f"--partitions must be >= 1, got {args.partitions}")
    if args.engine != "spark":
        if args.master or args.partitions is not None or args.spark_conf:
            raise ValueError("--master, --partitions and --spark-conf need --engine spark")
        return {"max_decompressed_bytes": args.max_decompressed_bytes}
    conf = dict(item.split("=", 1) for item in args.spark_conf if "=" in item)
    if len(conf) != len(args.spark_conf):
        raise ValueError(f"--spark-conf takes KEY=VALUE, got {args.spark_conf}")
    return {
        "master": args.master,
        "partitions": args.partitions,
        "spark_conf": conf,
        "max_decompressed_bytes": args.max_decompressed_bytes,
    }


def run_build(args: argparse.Namespace) -> int:
    from ._output import check_output

    check_output(args.output, force=args.force, inputs=[*args.corpus, args.tokenizer])
    spark_options = _spark_options(args)
    if args.engine == "spark":
        try:
            from ..spark import build_lm
        except ImportError as error:
            raise ValueError(f"--engine spark needs pyspark: pip install 'draftlattice[spark]' ({error})") from None
    else:
        from ..ngram.build import build_lm

    result = build_lm(
        args.corpus,
        args.order,
        out_path=args.output,
        tokenizer=args.tokenizer,
        min_counts=args.min_count,
        prune_to=args.prune_to,
        prune_threshold=args.prune_threshold,
        overwrite=args.force,
        **spark_options,
    )
    counts = " / ".join(f"{c:,}" for c in result.counts)
    seconds = sum(result.seconds.values())
    print(
        f"wrote {result.path}: order {result.order}, n-grams per order {counts} "
        f"({result.sentences:,} sentences, {result.tokens:,} tokens, {seconds:.1f} s)",
        file=sys.stdout,
    )
    return 0
