"""Issue 23's float32 criterion, prompt by prompt: the plug-in equals plain greedy generate(), and how
many new tokens each target call gives.

Loads the default model as the README does, ``draftlattice.default_model.load_default(torch.float32)``
(fetched on first use like a user would), and decodes the demo's prompt set (chat questions through
the chat template, WikiText-2 raw test openings) with plain greedy ``generate()`` and with
``custom_generate=draftlattice.hf.generate``, ``draft_heads=b.heads, draft_lm=b.lm, draft_p=P``
(and, with ``--lookup N``, the same plus a draft copied from the context). Per prompt: whether the
output equals ``generate()``'s token for token, and new tokens per target call (block efficiency:
new tokens / serial forwards, prefill included, as the demo reports it). No wall-clock figures:
this measures identity and acceptance, so it may run on a loaded machine.

    python bench/default_fp32_identity.py [--chat 8] [--text 8] [--max-new-tokens 64] [--p 4]
                                          [--lookup 3] [--threads 2] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

from _default_model import demo_set


def decode(model, ids: list[int], max_new: int, kwargs: dict) -> tuple[list[int], int]:
    """(new tokens, serial forwards of the base model, prefill included)."""
    calls = []
    handle = model.base_model.register_forward_hook(lambda *a: calls.append(1))
    try:
        out = model.generate(
            torch.tensor([ids]), max_new_tokens=max_new, do_sample=False, eos_token_id=None, pad_token_id=0, **kwargs
        )
    finally:
        handle.remove()
    sequence = out.sequences if hasattr(out, "sequences") else out
    return sequence[0, len(ids) :].tolist(), len(calls)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chat", type=int, default=8, help="chat questions (at most 12)")
    parser.add_argument("--text", type=int, default=8, help="WikiText-2 raw test openings")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--k", type=int, default=8)
    parser.add_argument("--p", type=int, default=4)
    parser.add_argument("--lookup", type=int, default=0, help="also run with draft_lookup=N (0: not)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import draftlattice.hf as dlhf

    b, prompts = demo_set(args.chat, args.text, torch.float32, args.threads)
    drafted = {"custom_generate": dlhf.generate, "draft_heads": b.heads, "draft_lm": b.lm, "draft_p": args.p}
    methods = {f"heads+lm p={args.p}": dict(drafted, draft_k=args.k)}
    if args.lookup:
        methods[f"heads+lm p={args.p} + lookup {args.lookup}"] = dict(drafted, draft_k=args.k, draft_lookup=args.lookup)
    rows = []
    for i, prompt in enumerate(prompts):
        reference, _ = decode(b.model, prompt.ids, args.max_new_tokens, {})
        row = {"kind": prompt.kind, "prompt": prompt.text}
        for name, kwargs in methods.items():
            tokens, calls = decode(b.model, prompt.ids, args.max_new_tokens, kwargs)
            row[name] = {"identical": tokens == reference, "tokens_per_call": len(tokens) / calls}
        rows.append(row)
        cells = "  ".join(
            f"{row[n]['tokens_per_call']:.2f}{'' if row[n]['identical'] else ' DIFFERS'}" for n in methods
        )
        print(f"[{i + 1}/{len(prompts)}] {prompt.kind:4s} {cells}  {prompt.text[:50]!r}", flush=True)

    print(f"\n{'method':34s} identical  tokens/call: min  median  max   (>= 2.0)")
    summary = {}
    for name in methods:
        rates = [r[name]["tokens_per_call"] for r in rows]
        same = sum(r[name]["identical"] for r in rows)
        summary[name] = {"identical": same, "prompts": len(rows), "min": min(rates), "median": statistics.median(rates)}
        print(
            f"{name:34s} {same:3d}/{len(rows):<3d}  {min(rates):15.2f} {statistics.median(rates):7.2f} "
            f"{max(rates):5.2f}   {sum(r >= 2.0 for r in rates)}/{len(rates)}"
        )
    if args.json:
        args.json.write_text(
            json.dumps({"args": vars(args) | {"json": str(args.json)}, "rows": rows, "summary": summary}, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
