"""`draftlattice lm ...`: inspect, score with, and compile n-gram language models.

``register(subparsers)`` adds the ``lm`` group: ``info``, ``score`` and ``compile`` (here) and
``build`` (``cli/lm_build.py``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any

from ..pairing import ALLOW_MISMATCH_HELP
from . import lm_build
from ._lattice_input import read_lines, read_vocab
from ._limits import add_decompression_limit


def _info(args: argparse.Namespace) -> int:
    from draftlattice.ngram import NgramLM, detect_format

    start = time.perf_counter()
    lm = NgramLM(args.path, max_decompressed_bytes=args.max_decompressed_bytes)
    seconds = time.perf_counter() - start
    info = {
        "path": os.fspath(args.path),
        "format": detect_format(args.path),
        "order": lm.order,
        "counts": list(lm.counts),
        "total_ngrams": sum(lm.counts),
        "vocab_size": lm.vocab_size,
        "metadata": dict(sorted(lm.metadata.items())),
        "file_bytes": os.path.getsize(args.path),
        "load_seconds": round(seconds, 4),
    }
    if args.json:
        print(json.dumps(info, ensure_ascii=False))
        return 0
    for key, value in info.items():
        if key == "metadata":
            print("metadata:" + ("" if value else " (none)"))
            for name, text in value.items():
                print(f"  {name}: {text}")
        elif key == "counts":
            for n, count in enumerate(value, 1):
                print(f"{n}-grams: {count}")
        else:
            print(f"{key}: {value}")
    return 0


def _score(args: argparse.Namespace) -> int:
    from draftlattice.ngram import NgramLM

    if bool(args.text) == bool(args.file):
        raise ValueError("give either TEXT arguments or --file, not both or neither")
    if args.allow_mismatch and args.tokenizer is None:
        raise ValueError(
            "--allow-mismatch applies only with --tokenizer (it allows a tokenizer the LM does not record)"
        )
    lines = read_lines(args.file, "text file") if args.file else list(args.text)
    vocab = read_vocab(args.vocab) if args.vocab else None
    lm = NgramLM(args.path, vocab=vocab, max_decompressed_bytes=args.max_decompressed_bytes)
    tokenizer = _score_tokenizer(args, lm)
    if tokenizer is not None:
        vocab = None
    elif not args.ids:
        # Text words map through the vocabulary (default: the LM's own words), plus one extra
        # token id that no LM word has: words outside the vocabulary score as <unk> (or
        # oov_logprob when the LM has none).
        vocab = (vocab if vocab is not None else lm.words()) + ["\0unknown-word"]
        lm = lm.with_vocab(vocab)
    index = {word: i for i, word in enumerate(vocab or [])}
    total, count = 0.0, 0
    print("logprob_ln\tperplexity\ttokens\tunknown\ttext")
    for line in lines:
        if tokenizer is not None:
            ids, unknown = tokenizer.encode(line).ids, 0
        elif args.ids:
            try:
                ids = [int(field) for field in line.split()]
            except ValueError as error:
                raise ValueError(f"--ids: {error} in line {line!r}") from error
            unknown = 0
        else:
            ids = [index.get(word, len(vocab) - 1) for word in line.split()]
            unknown = sum(1 for i in ids if i == len(vocab) - 1)
        scores = lm.token_scores(ids, bos=args.bos, eos=args.eos)
        n = len(scores)
        logprob = float(scores.sum())
        perplexity = _perplexity(logprob, n)
        print(f"{logprob:.6f}\t{perplexity:.6g}\t{n}\t{unknown}\t{line}")
        total += logprob
        count += n
    if len(lines) > 1 and count:
        print(f"{total:.6f}\t{_perplexity(total, count):.6g}\t{count}\t-\t(all {len(lines)} lines)")
    return 0


def _perplexity(logprob: float, n: int) -> float:
    """exp(-logprob / n); inf when that overflows (oov_logprob=-1000 words), nan for no tokens."""
    if not n:
        return float("nan")
    try:
        return math.exp(-logprob / n)
    except OverflowError:
        return float("inf")


def _score_tokenizer(args: argparse.Namespace, lm: Any) -> Any:
    """The tokenizer that turns text into the LM's token ids, or None when words are scored as
    words (or --ids). An LM built over a tokenizer needs it (--tokenizer) or --ids: its words
    are token ids, and scoring raw words against them would count every word as unknown."""
    from draftlattice.ngram.build import TOKENIZER_SHA256_KEY
    from draftlattice.pairing import check_lm_tokenizer_pair
    from draftlattice.tokenizer import load_tokenizer, tokenizer_sha256

    recorded = lm.metadata.get(TOKENIZER_SHA256_KEY)
    if args.tokenizer is None:
        if recorded and not args.ids:
            raise ValueError(
                f"{args.path}: built over a tokenizer (sha256 {recorded}); pass "
                "--tokenizer PATH to score text, or --ids for token ids"
            )
        return None
    if args.ids or args.vocab:
        raise ValueError("--tokenizer cannot be combined with --ids or --vocab")
    if not recorded:
        raise ValueError(
            f"{args.path}: records no tokenizer, so --tokenizer cannot apply (its words are scored as whitespace words)"
        )
    tokenizer = load_tokenizer(args.tokenizer)  # a file that is no tokenizer is refused as such
    check_lm_tokenizer_pair(
        lm.metadata,
        tokenizer_sha256(args.tokenizer),
        lm_name=args.path,
        tokenizer_name=args.tokenizer,
        allow_mismatch=args.allow_mismatch,
    )
    return tokenizer


def _compile(args: argparse.Namespace) -> int:
    from draftlattice.ngram import NgramLM

    from ._output import check_output

    check_output(args.output, force=args.force, inputs=[args.arpa])
    start = time.perf_counter()
    lm = NgramLM(args.arpa, max_decompressed_bytes=args.max_decompressed_bytes)
    loaded = time.perf_counter()
    lm.save(args.output, overwrite=args.force)
    saved = time.perf_counter()
    print(
        f"{args.output}: order {lm.order}, counts {list(lm.counts)}, "
        f"{os.path.getsize(args.output)} bytes (ARPA load {loaded - start:.2f} s, "
        f"write {saved - loaded:.2f} s)"
    )
    return 0


def register_lm(lm_subparsers) -> None:
    info = lm_subparsers.add_parser("info", help="order, n-gram counts, vocabulary, metadata")
    info.add_argument("path", help="ARPA (.arpa, .arpa.gz, .arpa.xz) or binary model")
    info.add_argument("--json", action="store_true", help="one JSON object instead of text")
    add_decompression_limit(info, "ARPA file")
    info.set_defaults(func=_info)

    score = lm_subparsers.add_parser("score", help="natural-log probability and perplexity of each line of text")
    score.add_argument("path", help="ARPA or binary model")
    score.add_argument("text", nargs="*", help="lines of whitespace-separated words")
    score.add_argument("--file", help="read lines from this file instead")
    score.add_argument("--vocab", help="vocabulary file: line i is the LM word of token id i")
    score.add_argument("--ids", action="store_true", help="text holds decimal token ids")
    score.add_argument(
        "--tokenizer",
        help="tokenizer.json the LM was built over: score text through it (checked against the LM's recorded sha256)",
    )
    score.add_argument("--allow-mismatch", action="store_true", help=ALLOW_MISMATCH_HELP + " (with --tokenizer)")
    score.add_argument("--bos", action="store_true", help="put <s> before each line")
    score.add_argument("--eos", action="store_true", help="score </s> after each line")
    add_decompression_limit(score, "ARPA file")
    score.set_defaults(func=_score)

    compile_ = lm_subparsers.add_parser("compile", help="convert an ARPA model to the binary format")
    compile_.add_argument("arpa", help="ARPA file (.arpa, .arpa.gz, .arpa.xz)")
    compile_.add_argument("-o", "--output", required=True, help="binary model to write (.dlm)")
    compile_.add_argument("--force", action="store_true", help="replace an existing output file")
    add_decompression_limit(compile_, "ARPA file")
    compile_.set_defaults(func=_compile)


class _IntermixedParser(argparse.ArgumentParser):
    """Lets options follow free text (`lm score PATH "some text" --bos`)."""

    _mixing = False

    def parse_known_args(self, args=None, namespace=None):
        if self._mixing:
            return super().parse_known_args(args, namespace)
        self._mixing = True
        try:
            return self.parse_known_intermixed_args(args, namespace)
        finally:
            self._mixing = False


def register(subparsers) -> None:
    parser = subparsers.add_parser("lm", help="n-gram language models: build, info, score, compile")
    lm_subparsers = parser.add_subparsers(dest="lm_command", metavar="LM_COMMAND", parser_class=_IntermixedParser)
    parser.set_defaults(func=lambda args: (parser.print_help(sys.stderr), 2)[1])
    register_lm(lm_subparsers)
    lm_build.register_lm(lm_subparsers)
