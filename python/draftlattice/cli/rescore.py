"""`draftlattice rescore`: the p best drafts of lattices under an n-gram LM, as JSON lines."""

from __future__ import annotations

import argparse
import json

from ._lattice_input import load_lattices, parse_context, read_vocab
from ._limits import add_decompression_limit


def _run(args: argparse.Namespace) -> int:
    from draftlattice.ngram import NgramLM
    from draftlattice.rescore import rescore_batch

    vocab = read_vocab(args.vocab) if args.vocab else None
    lattices = load_lattices(args.logits, args.topk, args.k, args.temperature)
    lm = NgramLM(args.lm, vocab=vocab, max_decompressed_bytes=args.max_decompressed_bytes)
    context = parse_context(args.context, vocab)
    results = rescore_batch(
        lattices, lm, [context] * len(lattices), p=args.p, alpha=args.alpha, bos=args.bos, num_threads=args.threads
    )
    for index, result in enumerate(results):
        drafts = []
        for i in range(len(result)):
            draft = {
                "tokens": result.tokens[i].tolist(),
                "score": round(float(result.scores[i]), 6),
                "head_score": round(float(result.head_scores[i]), 6),
                "lm_score": round(float(result.lm_scores[i]), 6),
            }
            if vocab is not None:
                draft["words"] = [vocab[t] if t < len(vocab) else None for t in draft["tokens"]]
            drafts.append(draft)
        print(json.dumps({"lattice": index, "alpha": args.alpha, "drafts": drafts}, ensure_ascii=False))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "rescore",
        help="p best drafts of lattices rescored by an n-gram LM (JSON lines)",
        description="Prints one JSON line per lattice: its p best drafts under lattice log-prob + "
        "alpha * LM log-prob (natural log), best first, exact.",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--logits", help="logits .npy, [h, V] or [B, h, V] (needs -k)")
    source.add_argument("--topk", help="top-k .npz with arrays tokens and logprobs, [h, k] or [B, h, k]")
    parser.add_argument("--lm", required=True, help="ARPA (.arpa/.gz/.xz) or binary LM")
    add_decompression_limit(parser, "--lm ARPA file")
    parser.add_argument("--vocab", help="vocabulary file: line i is the LM word of token id i")
    parser.add_argument("-k", type=int, help="candidates per head (with --logits)")
    parser.add_argument("-p", type=int, default=1, help="number of drafts (default 1)")
    parser.add_argument("--alpha", type=float, default=1.0, help="LM weight (default 1.0)")
    parser.add_argument("--temperature", type=float, default=1.0, help="softmax temperature of --logits")
    parser.add_argument("--context", help="decoded text before the drafts: token ids or words (with --vocab)")
    parser.add_argument("--bos", action="store_true", help="put <s> before the context")
    parser.add_argument("--threads", type=int, default=None, help="worker threads (default: all)")
    parser.set_defaults(func=_run)
