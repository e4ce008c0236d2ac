"""What grouped-query attention under the verification mask saves (decode/attention.py): the
demo's rows on the default model with it on and off (off: transformers' "sdpa" attention, which
repeats the cache per query head under an explicit mask), alternated prompt by prompt in one run,
after one warm-up each. Per row: milliseconds per target call, tokens/s, and how many outputs
are identical on and off (same seeds).

    python bench/grouped_attention.py [--temperature T] [--rows ngram_multi heads_multi]
        [--chat 4] [--text 4] [--max-new-tokens 64] [--rounds 1]
"""

from __future__ import annotations

import argparse
import collections
import contextlib

import torch

import draftlattice.decode.attention as attention
from _default_model import demo_set
from draftlattice.apps.demo import DemoSettings, decode_once, row_specs

GROUPED = attention.grouped_query_attention


@contextlib.contextmanager
def _transformers_attention(model):
    yield


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--temperature", type=float, help="sampling rows at T (default: the greedy rows)")
    parser.add_argument("--rows", nargs="+", default=["ngram_multi"])
    parser.add_argument("--chat", type=int, default=4)
    parser.add_argument("--text", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    bundle, prompts = demo_set(args.chat, args.text, torch.bfloat16, args.threads)
    settings = DemoSettings(max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    specs = {spec.name: spec for spec in row_specs(bundle, settings)}
    unknown = sorted(set(args.rows) - set(specs))
    if unknown:
        raise SystemExit(f"unknown rows {unknown}; the rows are {sorted(specs)}")
    variants = {"grouped": GROUPED, "repeated": _transformers_attention}
    totals = collections.defaultdict(collections.Counter)
    outputs = collections.defaultdict(list)
    with torch.inference_mode():
        for name in args.rows:
            for switch in variants.values():  # warm-up
                attention.grouped_query_attention = switch
                decode_once(bundle, specs[name], prompts[0], settings, 8, settings.seed)
        for _ in range(args.rounds):
            for i, prompt in enumerate(prompts):
                for name in args.rows:
                    for variant, switch in variants.items():
                        attention.grouped_query_attention = switch
                        tokens, calls, seconds, _ = decode_once(
                            bundle, specs[name], prompt, settings, settings.max_new_tokens, settings.seed + i
                        )
                        totals[name, variant].update({"seconds": seconds, "calls": calls, "tokens": len(tokens)})
                        outputs[name, variant].append(tokens)
    attention.grouped_query_attention = GROUPED
    mode = "greedy" if args.temperature is None else f"T = {args.temperature}"
    print(f"default model, bf16, {args.threads} threads, {mode}, {len(prompts)} demo prompts x {args.max_new_tokens}")
    print("| row | attention | ms/call | tokens/s | identical outputs |")
    print("|---|---|---:|---:|---:|")
    for name in args.rows:
        same = sum(a == b for a, b in zip(outputs[name, "grouped"], outputs[name, "repeated"]))
        for variant in variants:
            row = totals[name, variant]
            print(
                f"| {name} | {variant} | {1e3 * row['seconds'] / row['calls']:.1f} | "
                f"{row['tokens'] / row['seconds']:.1f} | {same}/{len(outputs[name, variant])} |"
            )


if __name__ == "__main__":
    main()
