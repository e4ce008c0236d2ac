"""Lay a distilled corpus saved as one file (``tokens``, ``offsets``, ``prompt_lens``: how a GPU
session brings it back) out again as the shards of a distill folder, so ``distill`` resumes after
them (the same prompt file and shard size give the same shard boundaries).

    python lm_models/recipe/corpus_shards.py corpus.npz FOLDER --model NAME [--shard 1024] [--mode greedy]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from draftlattice.distilled_corpus import FORMAT, META, VERSION


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("corpus", type=Path)
    p.add_argument("folder", type=Path)
    p.add_argument("--model", required=True, help="the model name recorded in meta.json")
    p.add_argument("--shard", type=int, default=1024, help="records per shard (distill's shard_size)")
    p.add_argument("--mode", choices=["greedy", "sampled"], default="greedy")
    p.add_argument("--max-new-tokens", type=int, default=192)
    args = p.parse_args()
    data = np.load(args.corpus)
    tokens, offsets, prompt_lens = data["tokens"].astype(np.int32), data["offsets"], data["prompt_lens"]
    args.folder.mkdir(parents=True, exist_ok=True)
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "model": args.model,
        "mode": args.mode,
        "temperature": 0.0 if args.mode == "greedy" else 1.0,
        "top_p": 1.0,
        "max_new_tokens": args.max_new_tokens,
        "dtype": "bfloat16",
    }
    (args.folder / META).write_text(json.dumps(meta, indent=2) + "\n")
    for s in range(len(prompt_lens) // args.shard):  # whole shards only: distill redoes a partial one
        a, b = s * args.shard, (s + 1) * args.shard
        np.savez(
            args.folder / f"shard-{s:05d}.npz",
            tokens=tokens[offsets[a] : offsets[b]],
            offsets=offsets[a : b + 1] - offsets[a],
            prompt_lens=prompt_lens[a:b],
        )
    print(f"{args.folder}: {len(prompt_lens) // args.shard} shards of {args.shard} records")


if __name__ == "__main__":
    main()
