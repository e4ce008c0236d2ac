"""Block efficiency of copied drafts (prompt lookup; retrieval from a datastore) alone and added to
the lattice's p best drafts.

Decodes the demo's prompts (4 chat questions, 4 WikiText-2 raw test openings) greedily with the
default model, its shipped heads, 4-gram and datastore, through the engine, and prints tokens per
verification call (prompt forwards excluded) for: the lattice alone (``ngram_tree``), plus one
copied draft for several match lengths n and copy lengths, and, for the default (3, 6), the three
ways of choosing among a suffix's occurrences (the library's rule against always the most recent
and always the earliest, transformers' prompt lookup's choice); then the copy alone (no heads,
the demo's ``lookup`` row) without and with the datastore's draft where the context has none
(several datastore settings), and the lattice plus that copy; last, both with the datastore's
draft of 2 / 3 / 4 tokens also beside a copy (a second branch, ``retrieval``). Block efficiency is
exact and does not depend on the machine's load; seconds are shown for orientation only.

    python bench/lookup_drafts.py [--max-new-tokens 64] [--dtype bfloat16] [--weights int4] [--rows TEXT]
"""

from __future__ import annotations

import argparse
import time

import torch

import draftlattice.decode.drafters.lookup as lookup
from draftlattice import Datastore
from draftlattice.apps.demo_prompts import demo_prompts
from draftlattice.assets import WIKITEXT_RAW_TEST, data_file
from draftlattice.decode import ContextLookup, Engine, LatticeDrafter, RowStopper
from draftlattice.default_model import load_default

LIBRARY_RULE = lookup.continuation


def occurrence_rule(pick):
    """A continuation rule choosing among a suffix's occurrences with ``pick(starts)``."""

    def rule(context, max_ngram, length, min_ngram=1):
        size = len(context)
        for n in range(min(max_ngram, size - 1), min_ngram - 1, -1):
            starts = [s for s in range(size - n) if context[s : s + n] == context[size - n :]]
            if starts:
                start = pick(starts)
                return context[start + n : start + n + length]
        return []

    return rule


def tokens_per_call(bundle, prompts, make, max_new: int) -> tuple[float, float]:
    calls = tokens = 0
    start = time.perf_counter()
    for prompt in prompts:
        ids = torch.tensor([prompt.ids])
        drafter = make()
        heads = bundle.heads if getattr(drafter, "reads_heads", True) else None
        engine = Engine(bundle.model, heads, drafter, layout="tree", step=bundle.step)
        _, stats = engine.run(ids, RowStopper(ids, max_new, set(), [], 0), max_length=ids.shape[1] + max_new)
        calls += stats.target_calls - stats.prefill_calls
        tokens += stats.new_tokens - stats.prefill_calls  # each prompt forward gives one token
    return tokens / calls, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--weights", choices=["int8", "int4"], help="decode with the lean step in this format")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rows", help="run only the rows whose label holds this text")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bundle = load_default(getattr(torch, args.dtype), weights=args.weights)
    shipped = bundle.datastore
    prompts = demo_prompts(bundle.tokenizer, data_file(WIKITEXT_RAW_TEST), 4, 4)

    def lattice():
        return LatticeDrafter(bundle.lm, k=8, p=4, alpha=0.5)

    rows = [("ngram_tree (k=8, p=4, alpha=0.5)", LIBRARY_RULE, lattice)]
    for n, length in ((3, 3), (3, 6), (3, 10), (2, 6), (4, 6)):
        rows.append(
            (f"+ copy n<={n}, <={length} tokens", LIBRARY_RULE, lambda n=n, ln=length: ContextLookup(lattice(), n, ln))
        )
    for label, rule in (
        ("always the most recent", occurrence_rule(max)),
        ("always the earliest", occurrence_rule(min)),
    ):
        rows.append((f"+ copy n<=3, <=6 tokens, {label}", rule, lambda: ContextLookup(lattice(), 3, 6)))
    stores = {"n=2..4, min_count 2 (shipped)": shipped}
    for n, count in ((3, 2), (2, 1)):
        stores[f"n={n}..4, min_count {count}"] = Datastore(
            shipped.tokens, shipped.offsets, min_ngram=n, min_count=count
        )
    for length in (2, 4, 6):
        rows.append((f"copy alone n<=3, <={length} tokens", LIBRARY_RULE, lambda ln=length: ContextLookup(None, 3, ln)))
        for label, store in stores.items():
            make = lambda ln=length, s=store: ContextLookup(None, 3, ln, s)  # noqa: E731
            rows.append((f"copy alone n<=3, <={length} tokens, else the datastore's ({label})", LIBRARY_RULE, make))
    rows.append(
        ("+ copy n<=3, <=6 tokens, else the datastore's", LIBRARY_RULE, lambda: ContextLookup(lattice(), 3, 6, shipped))
    )
    for retrieval in (2, 3, 4):  # the datastore's draft beside a copy too: a second branch
        beside = f"else the datastore's, and its <={retrieval} beside a copy"
        alone = lambda r=retrieval: ContextLookup(None, 3, 6, shipped, r)  # noqa: E731
        joined = lambda r=retrieval: ContextLookup(lattice(), 3, 6, shipped, r)  # noqa: E731
        rows += [(f"copy alone n<=3, <=6 tokens, {beside}", LIBRARY_RULE, alone)]
        rows += [(f"+ copy n<=3, <=6 tokens, {beside}", LIBRARY_RULE, joined)]
    rows = [row for row in rows if args.rows is None or args.rows in row[0]]
    target = args.dtype if args.weights is None else f"lean step, {args.weights} weights"
    print(
        f"default model ({target}), {len(prompts)} demo prompts x {args.max_new_tokens} tokens, h={bundle.heads.horizon}"
    )
    print("| drafts | tokens per verification call | seconds |")
    print("| --- | ---: | ---: |")
    for name, rule, make in rows:
        lookup.continuation = rule
        try:
            efficiency, seconds = tokens_per_call(bundle, prompts, make, args.max_new_tokens)
        finally:
            lookup.continuation = LIBRARY_RULE
        print(f"| {name} | {efficiency:.3f} | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
