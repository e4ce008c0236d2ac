"""Would a tree sized per call beat a fixed node budget? (One-off: its figure is in RESULTS.md,
"Trees of the best prefixes"; the script is deleted once recorded.)

``ngram_tree`` verifies the rescored lattice's n best prefixes with n fixed for the run (fitted to
the CPU). EAGLE-2 and Sequoia size trees by confidence instead. This decodes the held-out prompts
greedily through the lean step with a large tree (``--record`` prefixes), keeps every call's tree
(its prefixes' scores, best first) and the tokens the target committed, then replays the same
calls under each policy: the first n prefixes (fixed n), or the prefixes whose score is at least
tau (per call; none: a plain step). A kept prefix is accepted when the recorded call accepted it
(prefixes never score above their parents, so a policy keeps a prefix of the accepted path). Cost
of a call: the step's measured cost curve at its nodes plus the host time measured in the run
(the plain step's host time for a call with no tree). Greedy outputs do not depend on the drafts,
so both policies decode the same tokens; the replay keeps the recorded call boundaries (an
approximation for any tree smaller than the recorded one, the same for both policies).

    PYTHONPATH=python:bench python bench/tree_size_policy.py [--record 24] [--chat 6] [--text 6]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

import draftlattice.decode.drafters.lattice as lattice_drafter
import draftlattice.hf as dlhf
from draftlattice.default_model import load_default
from draftlattice.lean.fit import measure_cost_curve
from tune_sample_alpha import calibration_prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--record", type=int, default=24, help="prefixes of the recorded trees")
    parser.add_argument("--chat", type=int, default=6)
    parser.add_argument("--text", type=int, default=6)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bundle = load_default(weights="int4")
    prompts = calibration_prompts(bundle, args.chat, args.text)
    curve = measure_cost_curve(bundle.step)
    calls, tree_host_ms = record_calls(bundle, prompts, args)
    plain_host_ms = host_ms(decode(bundle, prompts, args, draft_heads=None, draft_lookup=0))
    print(f"cost curve (ms by nodes): {dict(zip(curve.nodes, [round(ms, 2) for ms in curve.ms]))}")
    print(f"host ms a call: tree {tree_host_ms:.2f}, plain {plain_host_ms:.2f}; {len(calls)} calls")

    def replay(keep) -> str:
        tokens = ms = nodes = 0
        for scores, path in calls:
            n = keep(scores)
            tokens += 1 + sum(1 for node in path if node < n)
            ms += curve(n + 1) + (tree_host_ms if n else plain_host_ms)
            nodes += n
        return f"tokens a call {tokens / len(calls):.3f}, prefixes {nodes / len(calls):5.2f}, tokens/s {1e3 * tokens / ms:6.1f}"

    print(f"plain step: tokens/s {1e3 / (curve(1) + plain_host_ms):6.1f}")
    for n in (1, 2, 3, 4, 5, 6, 8, 12, 16, args.record):
        print(f"fixed {n:2d} prefixes:       {replay(lambda scores, n=n: min(n, len(scores)))}")
    for tau in (-1.0, -2.0, -2.5, -3.0, -3.5, -4.0, -5.0, -6.0):
        print(f"score >= {tau:4.1f} (per call): {replay(lambda scores, t=tau: int((scores >= t).sum()))}")
    oracle_tokens = sum(len(path) + 1 for _, path in calls)
    oracle_ms = sum(curve(len(path) + 1) + (tree_host_ms if path else plain_host_ms) for _, path in calls)
    print(f"the accepted path alone (an oracle's size): tokens/s {1e3 * oracle_tokens / oracle_ms:6.1f}")


def decode(bundle, prompts, args, **drafting):
    """Greedy decoding of every prompt on the lean step; the first prompt once more before, uncounted."""
    total, outputs = None, []
    for i, prompt in enumerate([prompts[0], *prompts]):
        ids = torch.tensor([prompt])
        out = bundle.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=args.max_new_tokens,
            do_sample=False,
            custom_generate=dlhf.generate,
            return_dict_in_generate=True,
            draft_step=bundle.step,
            **drafting,
        )
        if i:
            total = out.draft_stats if total is None else total + out.draft_stats
            outputs.append((out.sequences[0, len(prompt) :].tolist(), [a[0] for a in out.draft_stats.accepted]))
    return total, outputs


def host_ms(decoded) -> float:
    stats = decoded[0]
    return 1e3 * (stats.drafting_seconds + stats.verification_seconds - stats.forward_seconds) / stats.steps


def record_calls(bundle, prompts, args):
    """``[(scores best first, the accepted path's node indices)]`` for every call, and the host ms a call."""
    trees = []
    search = lattice_drafter.best_nodes_batch

    def recording(*a, **k):
        found = search(*a, **k)
        trees.append(found[0])
        return found

    lattice_drafter.best_nodes_batch = recording
    try:
        decoded = decode(
            bundle,
            prompts,
            args,
            draft_heads=bundle.heads,
            draft_lm=bundle.lm,
            draft_k=8,
            draft_alpha=0.5,
            draft_lookup=0,
            draft_nodes=args.record,
        )
    finally:
        lattice_drafter.best_nodes_batch = search
    calls_per_prompt = [len(accepted) for _, accepted in decoded[1]]
    trees = trees[len(trees) - sum(calls_per_prompt) :]  # the uncounted warm-up prompt's first
    calls, at = [], 0
    for tokens, accepted in decoded[1]:
        start = 1  # the prefill commits the first token; each call its accepted drafts and one more
        for a in accepted:
            tree = trees[at]
            at += 1
            calls.append((np.asarray(tree.scores), accepted_path(tree, tokens[start : start + a])))
            start += a + 1
    return calls, host_ms(decoded)


def accepted_path(tree, tokens: list[int]) -> list[int]:
    path, parent = [], -1
    for token in tokens:
        parent = next(i for i in range(len(tree)) if tree.parents[i] == parent and tree.tokens[i] == token)
        path.append(parent)
    return path


if __name__ == "__main__":
    main()
