"""How far the shipped heads' lattices can take block efficiency on the demo's prompts: the oracle
draft (the best path of the top-k lattice given the target's own greedy output) beside what the
demo's drafters reach, in one run.

No draft chosen from a top-k lattice, by any LM or tree of drafts from it, can be accepted further
than the oracle's path through the same lattice (tree verification keeps the longest accepted
path, and every path of the tree is a path of the lattice): the oracle's block efficiency at k is
the ceiling of ``heads_tree`` and ``ngram_tree`` at that k. float32, so every row decodes exactly
the greedy output (checked), through the one engine (``decode.Engine``, tree layout), on the
demo's prompt set (chat questions through the chat template, WikiText-2 raw test openings),
stopping at EOS or ``--max-new-tokens``. ``--weights int4`` runs the lean step instead (bf16
compute: the rows then decode that step's own greedy output, which the demo's drafted rows
verify against); ``--heads DIR`` scores other heads than the shipped ones (a DraftHeads folder).
``ngram_lookup_tree`` adds the context's copy, else the shipped datastore's draft, to the tree.
``--nodes N ...`` adds the tree rows again with the lattice's N best prefixes in place of its p
best drafts (``heads_tree nodes=N`` and so on; :mod:`draftlattice.node_tree`). Each row reports
its mean tree size (nodes a verification call, the root included). ``--heldout`` decodes the
held-out prompts of ``bench/draft_budget.py`` instead (chat questions after the demo's,
WikiText-2 *valid* openings; ``--chat``/``--text`` of them).

    python bench/oracle_ceiling.py [--chat 4] [--text 4] [--heldout] [--max-new-tokens 64] [--ks 1 2 4 8 16 32]
                                   [--nodes 8 16 24] [--weights int4] [--heads DIR] [--threads 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import torch

from _default_model import demo_set


@dataclasses.dataclass(frozen=True)
class HeldOutPrompt:
    ids: list[int]


def run_rows(b, prompts, max_new: int, make_drafter, references=None, step=None):
    """(DecodeStats summed over the prompts, outputs) of one drafter (on the lean ``step`` if given)."""
    from draftlattice.decode import Engine, RowStopper

    total, outputs = None, []
    for i, prompt in enumerate(prompts):
        ids = torch.tensor([prompt.ids])
        stopper = RowStopper(ids, max_new, {b.tokenizer.eos_token_id}, [], 0)
        drafter = make_drafter(list(prompt.ids) + references[i]) if references is not None else make_drafter()
        tokens, stats = Engine(b.model, b.heads, drafter, layout="tree", step=step).run(ids, stopper)
        outputs.append(tokens[0])
        total = stats if total is None else total + stats
    return total, outputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chat", type=int, default=4)
    parser.add_argument("--text", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--k", type=int, default=8, help="candidates per head of heads_tree and ngram_tree")
    parser.add_argument("--p", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.5)
    parser.add_argument("--ks", type=int, nargs="*", default=[1, 2, 4, 8, 16, 32], help="oracle lattice widths")
    parser.add_argument("--nodes", type=int, nargs="*", default=[], help="node budgets of best-prefix tree rows")
    parser.add_argument("--weights", choices=["int8", "int4"], help="run the lean step in this format (bf16)")
    parser.add_argument("--heads", type=Path, help="a DraftHeads folder (default: the shipped heads)")
    parser.add_argument("--lm", type=Path, help="an n-gram LM for the ngram rows (default: the shipped one)")
    parser.add_argument("--lookup", type=int, default=3, help="ngram_lookup_tree: longest context n-gram matched")
    parser.add_argument("--lookup-tokens", type=int, default=6, help="ngram_lookup_tree: longest copied draft")
    parser.add_argument(
        "--retrieval", type=int, default=0, help="ngram_lookup_tree: the datastore's draft beside the copy (tokens)"
    )
    parser.add_argument("--heldout", action="store_true", help="the held-out prompts of bench/draft_budget.py")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from draftlattice import NgramLM
    from draftlattice.decode import ContextLookup, LatticeDrafter, OracleDrafter
    from draftlattice.hf import DraftHeads
    from draftlattice.lean import LeanLlama

    b, prompts = demo_set(args.chat, args.text, torch.bfloat16 if args.weights else torch.float32, args.threads)
    if args.heldout:
        from tune_sample_alpha import calibration_prompts

        prompts = [HeldOutPrompt(ids) for ids in calibration_prompts(b, args.chat, args.text)]
    if args.heads is not None:
        heads = DraftHeads.from_pretrained(args.heads, b.model, strict_name=False)
        b = dataclasses.replace(b, heads=heads.to(b.model.dtype).eval())
    if args.lm is not None:
        b = dataclasses.replace(b, lm=NgramLM(args.lm))
    step = LeanLlama(b.model, args.weights) if args.weights else None
    run = lambda *a, **k: run_rows(b, prompts, args.max_new_tokens, *a, step=step, **k)  # noqa: E731
    _, reference = run(lambda: LatticeDrafter(k=1, p=1))
    rows = {
        "heads": lambda: LatticeDrafter(k=1, p=1),
        "heads_tree": lambda: LatticeDrafter(k=args.k, p=args.p),
        "ngram": lambda: LatticeDrafter(b.lm, k=args.k, p=1, alpha=args.alpha),
        "ngram_tree": lambda: LatticeDrafter(b.lm, k=args.k, p=args.p, alpha=args.alpha),
        "ngram_lookup_tree": lambda: ContextLookup(
            LatticeDrafter(b.lm, k=args.k, p=args.p, alpha=args.alpha),
            args.lookup,
            args.lookup_tokens,
            b.datastore,
            args.retrieval,
        ),
    }
    for n in args.nodes:
        rows[f"heads_tree nodes={n}"] = lambda n=n: LatticeDrafter(k=args.k, nodes=n)
        rows[f"ngram_tree nodes={n}"] = lambda n=n: LatticeDrafter(b.lm, k=args.k, alpha=args.alpha, nodes=n)
        rows[f"ngram_lookup_tree nodes={n}"] = lambda n=n: ContextLookup(
            LatticeDrafter(b.lm, k=args.k, alpha=args.alpha, nodes=n),
            args.lookup,
            args.lookup_tokens,
            b.datastore,
            args.retrieval,
        )
    results = {}
    h = b.heads.horizon
    print(f"{len(prompts)} prompts, h = {h} (at most {h} tokens per call), {args.weights or 'float32'}")
    for name, make in rows.items():
        stats, outputs = run(make)
        results[name] = {
            "block_efficiency": stats.block_efficiency,
            "nodes": stats.mean_nodes,
            "identical": outputs == reference,
        }
        print(
            f"{name:12s} block efficiency {stats.block_efficiency:.3f}  nodes {stats.mean_nodes:.1f}  "
            f"identical {outputs == reference}",
            flush=True,
        )
    for k in args.ks:
        stats, outputs = run(lambda ref, k=k: OracleDrafter([ref], k), references=reference)
        name = f"oracle k={k}"
        results[name] = {"block_efficiency": stats.block_efficiency, "identical": outputs == reference}
        print(f"{name:12s} block efficiency {stats.block_efficiency:.3f}  identical {outputs == reference}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"args": vars(args), "rows": results}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
