"""The drafter's side of fitting drafts to the hardware (draftlattice.lean.fit): for each p, the
tokens per target call and the tokens verified per call of the demo's best drafter
(``ngram_lookup_tree``: the lattice's p best drafts and one copied from the context, else the
datastore's, one tree), on held-out prompts (chat questions after the demo's, WikiText-2 *valid*
openings), greedy, through the lean step; and, for the ``lookup`` row (one copied draft alone, no
heads: the context's copy, else the shipped datastore's), the same per longest copy
(``--copy-tokens``) and per retrieval branch beside the copy (``--retrieval``: the datastore's
draft of up to n tokens as a second branch, 0 for none); the same tree with the lattice's n best prefixes in place of its p best drafts
(``--nodes``, :mod:`draftlattice.node_tree`); and plain decoding on the same step (no drafts).
The copy rows are measured first; the tree's options then once per length of the copy beside it
(``--tree-copy-tokens``; default: the copy alone's fastest length on this run's cost curve, no
retrieval branch, and the library's 6): where extra nodes cost, a long copy in the tree costs more
than it gains (210 against 248 tokens/s for 6 against 3 tokens on the demo's prompts, Zen 4),
where they are nearly free it gains; each option records its copy, and the fit picks. The table it writes is
what ``draftlattice demo`` reads to choose p and the copy's length on each machine, and
``fastest_drafting`` to choose between the copy, the tree and no drafts.

    python bench/draft_budget.py [--p 1 2 3 4 6 8 12 16] [--nodes 3 5 8 12 16 24] [--copy-tokens 2 3 4 6 8] \\
        [--retrieval 0 3] [--chat 6] [--text 6] \\
        [--weights int4] [--heads DIR] [-o lm_models/smollm2/draft_budget.json]

``--temperature T [T ...]`` measures sampling instead: the same tree of best prefixes (``--nodes``)
and the copy alone (``--copy-tokens``, no retrieval branch) verified by the tree rule
(``draft_sample="tree"``, lossless) and plain sampling on the same step, at each temperature,
``--seeds`` seeded paths a prompt (default 3: sampled acceptance varies from path to path), and
adds them to the existing table (``-o``, default the shipped one) as its ``sampled`` entries, one
a temperature (an entry measured before at the same temperature is replaced; the greedy entries
and the other temperatures' are kept): what ``fastest_drafting(b, sampling=True, temperature=T)``
reads, interpolating between them.

``--heads DIR`` drafts with other heads than the shipped ones (a DraftHeads folder), to compare
new heads through the drafts before shipping them (``--copy-tokens`` with no value skips the
copy rows, which do not read the heads, ``--nodes`` with none the node budgets); each needs
``-o``, so that the shipped table stays the shipped heads' and whole.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import platform
from datetime import date
from pathlib import Path

import torch

import draftlattice.hf as dlhf
from draftlattice.cli._output import atomic_file
from draftlattice.decode.drafters.lookup import LOOKUP_TOKENS
from draftlattice.default_model import load_default
from draftlattice.hf.heads import DraftHeads
from draftlattice.lean.fit import best_option, measure_cost_curve, options_from
from tune_sample_alpha import calibration_prompts

SHIPPED_TABLE = "lm_models/smollm2/draft_budget.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--p", type=int, nargs="+", default=[1, 2, 3, 4, 6, 8, 12, 16])
    parser.add_argument("--nodes", type=int, nargs="*", default=[3, 5, 8, 12, 16, 24])
    parser.add_argument("--copy-tokens", type=int, nargs="*", default=[2, 3, 4, 6, 8])
    parser.add_argument("--chat", type=int, default=6)
    parser.add_argument("--text", type=int, default=6)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--lookup", type=int, default=3)
    parser.add_argument(
        "--tree-copy-tokens",
        type=int,
        nargs="+",
        help="the longest copied draft beside the tree, one set of tree options each (default: the copy "
        f"alone's fastest length here and {LOOKUP_TOKENS})",
    )
    parser.add_argument(
        "--retrieval",
        type=int,
        nargs="+",
        default=[0, 3],
        help="the copy alone: the datastore's draft beside the copy, up to this many tokens (0: none)",
    )
    parser.add_argument("--weights", default="int4")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--heads", type=Path, help="a DraftHeads folder (default: the shipped heads)")
    parser.add_argument(
        "--temperature", type=float, nargs="+", help="measure sampling at these temperatures (see above)"
    )
    parser.add_argument("--seeds", type=int, default=3, help="sampling: seeded paths a prompt (default 3)")
    parser.add_argument("-o", "--output", help=f"where to write the table (default: {SHIPPED_TABLE})")
    args = parser.parse_args()
    for temperature in args.temperature or []:
        if not temperature > 0:
            parser.error(f"--temperature must be > 0, got {temperature}")
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    for length in args.tree_copy_tokens or []:
        if length < 1:
            parser.error(f"--tree-copy-tokens must be >= 1, got {length}")
    if args.temperature is not None and not args.nodes:
        parser.error("--temperature measures the tree of best prefixes: give --nodes")
    if args.output is None:
        if args.heads is not None or ((not args.copy_tokens or not args.nodes) and args.temperature is None):
            parser.error("--heads or an empty --copy-tokens or --nodes: name the output (-o), not the shipped table")
        args.output = SHIPPED_TABLE
    torch.set_num_threads(args.threads)
    bundle = load_default(weights=args.weights)
    if args.heads is not None:
        heads = DraftHeads.from_pretrained(args.heads, bundle.model, strict_name=False)
        bundle = dataclasses.replace(bundle, heads=heads.to(bundle.model.dtype).eval())
    prompts = calibration_prompts(bundle, args.chat, args.text)
    curve = measure_cost_curve(bundle.step)  # the table's reference: the forward's cost by nodes

    def measure(sampling: dict | None = None, **drafting) -> dict:
        # greedy decoding takes one path a prompt; sampling --seeds paths (its tokens a call vary)
        runs = [(0, prompts[0])]  # the first call warms up, uncounted
        runs += [
            (i + 1000 * s, prompt) for s in range(args.seeds if sampling else 1) for i, prompt in enumerate(prompts)
        ]
        sampling = sampling or {"do_sample": False}
        total, warm = None, False
        for seed, prompt in runs:
            ids = torch.tensor([prompt])
            settings = dict(draft_k=args.k, draft_alpha=args.alpha, draft_lookup=args.lookup, draft_step=bundle.step)
            torch.manual_seed(seed)
            out = bundle.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=args.max_new_tokens if warm else 8,
                **sampling,
                custom_generate=dlhf.generate,
                return_dict_in_generate=True,
                **{**settings, **drafting},
            )
            if warm:
                total = out.draft_stats if total is None else total + out.draft_stats
            warm = True
        step_ms = 1e3 * (total.drafting_seconds + total.verification_seconds) / total.steps
        forward_ms = 1e3 * total.forward_seconds / total.steps
        return {
            "tokens_per_call": round(total.tokens_per_call, 4),
            "nodes": round(total.mean_nodes, 2),
            # the step's time beyond its forward (drafting, acceptance, cache edits, Python),
            # timed in the same calls: a slow or fast phase of the machine moves both alike
            "host_ms": round(step_ms - forward_ms, 2),
            "step_ms": round(step_ms, 2),
            "forward_ms": round(forward_ms, 2),
        }

    # the lattice's tree (its p best drafts, or its best prefixes) with the copy, else the datastore's
    tree = {"draft_heads": bundle.heads, "draft_lm": bundle.lm, "draft_datastore": bundle.datastore}
    if args.temperature is not None:
        tree["draft_sample"] = "tree"
        for temperature in args.temperature:
            add_sampled(args, bundle, tree, functools.partial(measure, sampling_at(temperature)), temperature)
        return
    copy_options = []
    for retrieval in args.retrieval:
        for length in args.copy_tokens:
            drafting = {"draft_heads": None, "draft_lookup_tokens": length, "draft_datastore": bundle.datastore}
            option = {"copy_tokens": length, "retrieval": retrieval}
            copy_options.append({**option, **measure(**drafting, draft_retrieval=retrieval)})
            print(copy_options[-1], flush=True)
    options, node_options = [], []
    for copy in tree_copy_tokens(args, curve, copy_options):
        beside = {**tree, "draft_lookup_tokens": copy}
        for p in args.p:
            options.append({"p": p, "copy_tokens": copy, **measure(**beside, draft_p=p)})
            print(options[-1], flush=True)
        for nodes in args.nodes:
            node_options.append({"node_budget": nodes, "copy_tokens": copy, **measure(**beside, draft_nodes=nodes)})
            print(node_options[-1], flush=True)
    # plain decoding on the same step and loop (no drafts): its host time a token, for the choice
    plain = measure(draft_heads=None, draft_lookup=0)
    print({"plain": plain}, flush=True)
    table = {
        "drafter": f"ngram_lookup_tree k={args.k} alpha={args.alpha} lookup={args.lookup}, else the datastore's",
        # what draftlattice.default_model.fastest_drafting passes to generate() for these options
        # (each tree option names the copy beside it; this one is for options that do not)
        "settings": {"k": args.k, "alpha": args.alpha, "lookup": args.lookup, "copy_tokens": LOOKUP_TOKENS},
        "prompts": f"{args.chat} held-out chat + {args.text} WikiText-2 valid openings x {args.max_new_tokens} tokens",
        "weights": args.weights,
        "heads": str(args.heads) if args.heads else "shipped",
        "measured": measured(args),
        "cost_curve_ms": dict(zip(curve.nodes, [round(ms, 2) for ms in curve.ms])),
        "options": options,
        "node_options": node_options,
        "copy_drafter": f"lookup (the context's copy, else the datastore's; with retrieval, "
        f"the datastore's beside the copy too) lookup={args.lookup}",
        "copy_options": copy_options,
        "plain": plain,
    }
    write(table, args.output)
    print(f"wrote {args.output}")


def tree_copy_tokens(args, curve, copy_options: list[dict]) -> list[int]:
    """The lengths of the copy beside the tree to measure: ``--tree-copy-tokens``, else the copy
    alone's length of the most predicted tokens/s on ``curve`` (options without a retrieval
    branch: the tree has none) and the drafter's default."""
    if args.tree_copy_tokens:
        return list(dict.fromkeys(args.tree_copy_tokens))
    alone = [o for o in options_from({"copy_options": copy_options}, "copy_options") if o.retrieval == 0]
    return list(dict.fromkeys([best_option(curve, alone).copy_tokens, LOOKUP_TOKENS] if alone else [LOOKUP_TOKENS]))


def greedy_tree_copies(table: dict) -> list[int]:
    """The lengths of the copy beside the table's greedy tree options (its settings' for options
    that name none)."""
    default = table["settings"]["copy_tokens"]
    return list(dict.fromkeys(o.get("copy_tokens", default) for o in table.get("node_options", [])) or [default])


def measured(args) -> str:
    return f"{date.today()} {platform.processor() or platform.machine()}, {args.threads} threads"


def write(table: dict, path: str) -> None:
    """Whole or not at all: an interrupted run leaves the table as it was."""
    with atomic_file(path) as tmp:
        tmp.write_text(json.dumps(table, indent=1) + "\n")


def sampling_at(temperature: float) -> dict:
    """generate()'s sampling arguments: the whole law at ``temperature`` (no top-k, no nucleus)."""
    return {"do_sample": True, "top_k": 0, "temperature": temperature}


def add_sampled(args, bundle, tree: dict, measure, temperature: float) -> None:
    """A ``sampled`` entry: the tree rule's node budgets, the copy alone by length and plain
    sampling at ``temperature``, into the table at ``args.output`` (its other entries kept, an
    entry of the same temperature replaced; a table of one entry, as written before, becomes a
    list)."""
    table = json.loads(Path(args.output).read_text())
    node_options = []
    for copy in greedy_tree_copies(table):  # the greedy options' copies: the fit matches them (T -> 0)
        for nodes in args.nodes:
            option = {"node_budget": nodes, "copy_tokens": copy}
            node_options.append({**option, **measure(**tree, draft_lookup_tokens=copy, draft_nodes=nodes)})
            print(node_options[-1], flush=True)
    copy_options = []
    for length in args.copy_tokens:  # the copy alone, a fixed tree: the tree rule too
        drafting = {"draft_heads": None, "draft_lookup_tokens": length, "draft_datastore": bundle.datastore}
        copy_options.append({"copy_tokens": length, **measure(**drafting, draft_sample="tree")})
        print(copy_options[-1], flush=True)
    plain = measure(draft_heads=None, draft_lookup=0)  # plain sampling on the same step
    print({"plain": plain}, flush=True)
    entry = {
        "temperature": temperature,
        "rule": "tree",
        "seeds": args.seeds,
        "measured": measured(args),
        "node_options": node_options,
        "copy_options": copy_options,
        "plain": plain,
    }
    kept = table.get("sampled", [])
    kept = [kept] if isinstance(kept, dict) else kept
    kept = [e for e in kept if e.get("temperature") != temperature]
    table["sampled"] = sorted(kept + [entry], key=lambda e: e["temperature"])
    write(table, args.output)
    print(f"added the sampled entry (T = {temperature:g}) to {args.output}")


if __name__ == "__main__":
    main()
