"""Block efficiency of context-copy (prompt lookup) drafts added to the lattice's p best drafts.

Decodes the demo's prompts (4 chat questions, 4 WikiText-2 raw test openings) greedily with the
default model, its shipped heads and 4-gram, through the engine, and prints tokens per
verification call (prompt forwards excluded) for: the lattice alone (``ngram_tree``), plus one
copied draft for several match lengths n and copy lengths, and, for the default (3, 6), the three
ways of choosing among a suffix's occurrences (the library's rule against always the most recent
and always the earliest, transformers' prompt lookup's choice). Block efficiency is exact and
does not depend on the machine's load; seconds are shown for orientation only.

    python bench/lookup_drafts.py [--max-new-tokens 64] [--dtype bfloat16]
"""

from __future__ import annotations

import argparse
import time

import torch

import draftlattice.decode.drafters.lookup as lookup
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
        engine = Engine(bundle.model, bundle.heads, make(), layout="tree")
        _, stats = engine.run(ids, RowStopper(ids, max_new, set(), [], 0), max_length=ids.shape[1] + max_new)
        calls += stats.target_calls - stats.prefill_calls
        tokens += stats.new_tokens - stats.prefill_calls  # each prompt forward gives one token
    return tokens / calls, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bundle = load_default(getattr(torch, args.dtype))
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
    print(
        f"default model ({args.dtype}), {len(prompts)} demo prompts x {args.max_new_tokens} tokens, h={bundle.heads.horizon}"
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
