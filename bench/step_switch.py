"""What one change of the decoding step saves: the demo's rows on the default model with it on
and off, alternated prompt by prompt in one run, after one warm-up each. Per row: milliseconds
per target call, tokens/s, and how many outputs are identical on and off (same seeds).

Switches:

* ``grouped_attention`` (decode/attention.py): grouped-query attention under the verification
  mask; off: transformers' "sdpa" attention, which repeats the cache per query head.
* ``host_walk`` (verify/multi_draft_host.py): the sampling rules of several drafts walked row by
  row on the CPU; off: the batched walk.

    python bench/step_switch.py --switch NAME [--temperature T] [--rows ngram_multi heads_multi]
        [--chat 4] [--text 4] [--max-new-tokens 64] [--rounds 1]
"""

from __future__ import annotations

import argparse
import collections
import contextlib

import torch

import draftlattice.decode.attention as attention
import draftlattice.verify.multi_draft as multi_draft
from _default_model import add_demo_set_arguments, demo_set
from draftlattice.apps.demo import DemoSettings, decode_once, row_specs


@contextlib.contextmanager
def _transformers_attention(model):
    yield


SWITCHES = {  # name -> (module, attribute, value on, value off)
    "grouped_attention": (
        attention,
        "grouped_query_attention",
        attention.grouped_query_attention,
        _transformers_attention,
    ),
    "host_walk": (multi_draft, "HOST_WALK_MAX_ROWS", multi_draft.HOST_WALK_MAX_ROWS, 0),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--switch", choices=sorted(SWITCHES), required=True)
    parser.add_argument("--temperature", type=float, help="sampling rows at T (default: the greedy rows)")
    parser.add_argument("--rows", nargs="+", default=["ngram_multi"])
    add_demo_set_arguments(parser)
    args = parser.parse_args()
    bundle, prompts = demo_set(args.chat, args.text, torch.bfloat16, args.threads)
    settings = DemoSettings(max_new_tokens=args.max_new_tokens, temperature=args.temperature)
    specs = {spec.name: spec for spec in row_specs(bundle, settings)}
    unknown = sorted(set(args.rows) - set(specs))
    if unknown:
        raise SystemExit(f"unknown rows {unknown}; the rows are {sorted(specs)}")
    module, attribute, on, off = SWITCHES[args.switch]
    variants = {"on": on, "off": off}
    totals = collections.defaultdict(collections.Counter)
    outputs = collections.defaultdict(list)
    with torch.inference_mode():
        for name in args.rows:
            for switch in variants.values():  # warm-up
                setattr(module, attribute, switch)
                decode_once(bundle, specs[name], prompts[0], settings, 8, settings.seed)
        for _ in range(args.rounds):
            for i, prompt in enumerate(prompts):
                for name in args.rows:
                    for variant, switch in variants.items():
                        setattr(module, attribute, switch)
                        tokens, calls, seconds, _ = decode_once(
                            bundle, specs[name], prompt, settings, settings.max_new_tokens, settings.seed + i
                        )
                        totals[name, variant].update({"seconds": seconds, "calls": calls, "tokens": len(tokens)})
                        outputs[name, variant].append(tokens)
    setattr(module, attribute, on)
    mode = "greedy" if args.temperature is None else f"T = {args.temperature}"
    print(f"default model, bf16, {args.threads} threads, {mode}, {len(prompts)} demo prompts x {args.max_new_tokens}")
    print(f"| row | {args.switch} | ms/call | tokens/s | identical outputs |")
    print("|---|---|---:|---:|---:|")
    for name in args.rows:
        same = sum(a == b for a, b in zip(outputs[name, "on"], outputs[name, "off"]))
        for variant in variants:
            row = totals[name, variant]
            print(
                f"| {name} | {variant} | {1e3 * row['seconds'] / row['calls']:.1f} | "
                f"{row['tokens'] / row['seconds']:.1f} | {same}/{len(outputs[name, variant])} |"
            )


if __name__ == "__main__":
    main()
