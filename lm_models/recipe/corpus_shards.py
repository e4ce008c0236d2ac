"""Lay a distilled corpus saved as one file (``tokens``, ``offsets``, ``prompt_lens``: how a GPU
session brings it back) out again as the shards of a distill folder, so ``distill`` resumes after
them (the same prompt file and shard size give the same shard boundaries).

    python lm_models/recipe/corpus_shards.py corpus.npz FOLDER --model NAME [--shard 1024] [--temperature T]
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
    p.add_argument("--temperature", type=float, default=0.0, help="the corpus' sampling temperature (0: greedy)")
    p.add_argument(
        "--complete", action="store_true", help="the corpus answers its whole prompt list: keep its last, shorter shard"
    )
    p.add_argument("--max-new-tokens", type=int, default=192)
    args = p.parse_args()
    data = np.load(args.corpus)
    tokens, offsets, prompt_lens = data["tokens"].astype(np.int32), data["offsets"], data["prompt_lens"]
    args.folder.mkdir(parents=True, exist_ok=True)
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "model": args.model,
        "mode": "greedy" if args.temperature == 0 else "sampled",
        "temperature": args.temperature,
        "top_p": 1.0,
        "max_new_tokens": args.max_new_tokens,
        "dtype": "bfloat16",
    }
    (args.folder / META).write_text(json.dumps(meta, indent=2) + "\n")
    records = len(prompt_lens)
    # whole shards only, unless the corpus is complete: distill redoes a partial shard
    shards = -(-records // args.shard) if args.complete else records // args.shard
    for s in range(shards):
        a, b = s * args.shard, min(records, (s + 1) * args.shard)
        np.savez(
            args.folder / f"shard-{s:05d}.npz",
            tokens=tokens[offsets[a] : offsets[b]],
            offsets=offsets[a : b + 1] - offsets[a],
            prompt_lens=prompt_lens[a:b],
        )
    print(f"{args.folder}: {shards} shards of at most {args.shard} records")


if __name__ == "__main__":
    main()
