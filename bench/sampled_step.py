"""Where a step of lossless sampling goes on the default model: milliseconds per target call of
plain sampling ``generate()`` (the reference) and of the demo's sampling rows through the
plug-in, split into the engine's phases.

Phases (per target call): ``trunk`` (the base model's forward over the step's nodes; for
``generate()``, over its one token),
``output`` (the output projection at the nodes), ``heads`` (the draft heads at the accepted
node), ``verify`` (the target's law at the nodes read as chains, and the rule), ``draft``
(proposal and host half: lattice sampling, q), ``cache`` (rolling the cache back to the accepted
path), ``other`` (the rest of the call: tree, masks, commits, generate()'s own setup). The
phases are timed by wrapping the engine's functions, which costs a few microseconds a call.

Rows run prompt by prompt, every row in turn within a prompt, after one warm-up each: a slow
phase of the shared machine hits all rows alike.

    python bench/sampled_step.py [--temperature 1.0] [--rows heads heads_multi ngram_multi]
        [--chat 4] [--text 4] [--max-new-tokens 64] [--sample-alpha 0.2] [--rounds 1]
"""

from __future__ import annotations

import argparse
import collections
import time

import torch

import draftlattice.decode.engine as engine_module
import draftlattice.decode.target as target_module
from _default_model import add_demo_set_arguments, demo_set
from draftlattice.apps.demo import DemoSettings, decode_once, row_specs
from draftlattice.decode import LatticeDrafter

PHASES = ("trunk", "output", "heads", "verify", "draft", "cache")
TIMED = (  # (owner, function, phase); the trunk (the base model's forward) is added in main()
    (target_module.Target, "node_logits", "output"),
    (engine_module._Run, "_heads_at", "heads"),
    (engine_module._Run, "_sampled_on_tree", "verify"),
    (engine_module._Run, "_sampling_rule", "verify"),
    (LatticeDrafter, "propose", "draft"),
    (LatticeDrafter, "finish", "draft"),
    (engine_module._Run, "_keep", "cache"),
)


def instrument(seconds: collections.Counter, model) -> None:
    """Wrap the engine's functions of TIMED, and the forward of ``model``'s trunk (in plain
    ``generate()`` too), so their time adds to ``seconds[phase]``."""
    for owner, name, phase in (*TIMED, (type(model.base_model), "forward", "trunk")):
        function = getattr(owner, name)

        def timed(*args, _function=function, _phase=phase, **kwargs):
            start = time.perf_counter()
            try:
                return _function(*args, **kwargs)
            finally:
                seconds[_phase] += time.perf_counter() - start

        setattr(owner, name, timed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--rows", nargs="+", default=["heads", "heads_multi", "ngram_multi"])
    add_demo_set_arguments(parser)
    parser.add_argument("--sample-alpha", type=float, default=0.2)
    parser.add_argument("--p", type=int, default=4)
    args = parser.parse_args()
    bundle, prompts = demo_set(args.chat, args.text, torch.bfloat16, args.threads)
    settings = DemoSettings(
        max_new_tokens=args.max_new_tokens, temperature=args.temperature, sample_alpha=args.sample_alpha, p=args.p
    )
    specs = {spec.name: spec for spec in row_specs(bundle, settings)}
    unknown = sorted(set(args.rows) - set(specs))
    if unknown:
        raise SystemExit(f"unknown rows {unknown}; the sampling rows are {sorted(specs)}")
    names = ["generate", *[n for n in args.rows if n != "generate"]]
    phase_seconds = collections.Counter()
    instrument(phase_seconds, bundle.model)
    totals = {n: collections.Counter() for n in names}
    with torch.inference_mode():
        for name in names:  # warm-up
            decode_once(bundle, specs[name], prompts[0], settings, 8, settings.seed)
        for _ in range(args.rounds):
            for i, prompt in enumerate(prompts):
                for name in names:
                    phase_seconds.clear()
                    tokens, calls, seconds, _ = decode_once(
                        bundle, specs[name], prompt, settings, settings.max_new_tokens, settings.seed + i
                    )
                    row = totals[name]
                    row.update(phase_seconds)
                    row.update({"seconds": seconds, "calls": calls, "tokens": len(tokens)})
    print(
        f"default model, bf16, {args.threads} threads, T = {args.temperature}, {len(prompts)} demo prompts x "
        f"{args.max_new_tokens} tokens x {args.rounds} round(s); ms per target call"
    )
    print("| row | block efficiency | tokens/s | ms/call | " + " | ".join(PHASES) + " | other |")
    print("|---|---:|---:|---:|" + "---:|" * (len(PHASES) + 1))
    for name in names:
        row = totals[name]
        calls = row["calls"]
        per_call = {phase: 1e3 * row[phase] / calls for phase in PHASES}
        total = 1e3 * row["seconds"] / calls
        cells = " | ".join(f"{per_call[p]:.1f}" if name != "generate" or p == "trunk" else "-" for p in PHASES)
        other = f"{total - sum(per_call.values()):.1f}" if name != "generate" else "-"
        print(
            f"| {name} | {row['tokens'] / calls:.3f} | {row['tokens'] / row['seconds']:.1f} | {total:.1f} | "
            f"{cells} | {other} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
