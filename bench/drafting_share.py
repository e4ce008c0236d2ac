"""Drafting's share of a greedy decoding step on the default model, from the engine's own stats.

Decodes WikiText-2 test paragraph openings with the default model (SmolLM2-135M-Instruct,
vocabulary 49,152, fetched on first use), its shipped heads (h = 4) and 4-gram, and prints per
drafter the seconds spent drafting (top-k / p-best on the device, LM rescoring on the host) and
verifying (the target's forward, whose output projection also gives the heads' logits,
acceptance, the transfer, cache rollback), per step, and drafting's share of a step (prefills
excluded), with ``DecodeStats``' ``drafting_seconds`` and ``verification_seconds``.

    python bench/drafting_share.py [--prompts 8] [--max-new-tokens 64] [--dtype bfloat16] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from draftlattice.assets import WIKITEXT_TEST, data_file
from draftlattice.decode import Engine, LatticeDrafter, RowStopper
from draftlattice.default_model import load_default
from draftlattice.evaluate.prompts import paragraph_prompts
from draftlattice.tokenizer import load_tokenizer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    bundle = load_default(getattr(torch, args.dtype))
    tokenizer = load_tokenizer(bundle.folder / "tokenizer.json")
    prompts = paragraph_prompts(data_file(WIKITEXT_TEST), tokenizer, args.prompts, args.prompt_tokens)
    lm = bundle.lm
    drafters = [
        ("heads top-1", lambda: LatticeDrafter(k=1, p=1), "batch"),
        ("heads 4-best tree, k=8", lambda: LatticeDrafter(k=8, p=4), "tree"),
        ("ngram 1-best, k=8", lambda: LatticeDrafter(lm, k=8, p=1, alpha=0.5), "batch"),
        ("ngram 1-best, k=16", lambda: LatticeDrafter(lm, k=16, p=1, alpha=0.5), "batch"),
        ("ngram 4-best tree, k=8", lambda: LatticeDrafter(lm, k=8, p=4, alpha=0.5), "tree"),
        ("ngram 4-best tree, k=16", lambda: LatticeDrafter(lm, k=16, p=4, alpha=0.5), "tree"),
    ]
    print(
        f"default model ({args.dtype}, {args.threads} torch threads), h={bundle.heads.horizon}, "
        f"{len(prompts)} prompts x {args.max_new_tokens} tokens"
    )
    print("| drafter | block efficiency | steps | drafting ms/step | verification ms/step | drafting share |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    rows = []
    for name, make, layout in drafters:
        total = None
        for i, prompt in enumerate([prompts[0], *prompts]):  # the first run is a warm-up
            ids = torch.tensor([prompt])
            engine = Engine(bundle.model, bundle.heads, make(), layout=layout)
            stopper = RowStopper(ids, args.max_new_tokens, set(), [], 0)
            _, stats = engine.run(ids, stopper, max_length=len(prompt) + args.max_new_tokens)
            if i:
                total = stats if total is None else total + stats
        steps = total.steps
        step = total.drafting_seconds + total.verification_seconds
        share = total.drafting_seconds / step
        rows.append(
            {
                "drafter": name,
                "block_efficiency": total.block_efficiency,
                "steps": steps,
                "drafting_ms": 1e3 * total.drafting_seconds / steps,
                "verification_ms": 1e3 * total.verification_seconds / steps,
                "share": share,
            }
        )
        print(
            f"| {name} | {total.block_efficiency:.3f} | {steps} | {1e3 * total.drafting_seconds / steps:.3f} | "
            f"{1e3 * total.verification_seconds / steps:.3f} | {100 * share:.2f}% |",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
