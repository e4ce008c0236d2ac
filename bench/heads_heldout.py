"""Held-out accuracy of sets of draft heads for the default model, side by side.

    python bench/heads_heldout.py --heldout build/heads-cpu3/heldout-greedy \\
        --heads lm_models/smollm2/heads build/heads-next/greedy [--threads 1] [--json F]

Each ``--heads`` folder (any :class:`draftlattice.hf.DraftHeads`: plain or reading the next
token) is scored on each ``--heldout`` distilled corpus (the model's own answers to held-out
prompts) with :func:`draftlattice.training.head_accuracy`: teacher-forced top-1/4/8 of the
model's own token t + j for head j, full softmax, from each prompt's last position on, and
path-8: how often heads 2..j all hold their tokens in their top 8 (the k = 8 lattice's oracle
path reaching token t + j; 1 + their sum is its teacher-forced length, bonus token aside). All sets
are scored in one run on the same trunk forwards' inputs, so the figures compare directly.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heads", type=Path, nargs="+", required=True, help="DraftHeads folders")
    p.add_argument("--heldout", type=Path, nargs="+", required=True, help="distilled corpora of held-out prompts")
    p.add_argument("--horizon", type=int, default=4, help="score heads 2..h")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", type=Path, help="also write the rows as JSON")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    from draftlattice.default_model import load_default
    from draftlattice.distilled_corpus import DistilledCorpus
    from draftlattice.hf import DraftHeads
    from draftlattice.training import head_accuracy

    model = load_default().model
    rows = []
    print("| heads | reads t+1 | held-out | positions (head 2) | top-1 heads 2/3/4 | top-8 heads 2/3/4 | path-8 |")
    print("|---|---|---|---:|---|---|---|")
    for heldout in args.heldout:
        corpus = DistilledCorpus.load(heldout)
        for folder in args.heads:
            heads = DraftHeads.from_pretrained(folder, model, strict_name=False).truncated(args.horizon)
            scores = head_accuracy(model, heads, corpus, ks=(1, 4, 8))
            rows.append({"heads": str(folder), "heldout": str(heldout), "scores": scores})
            top1 = " / ".join(f"{s['top1']:.3f}" for s in scores)
            top8 = " / ".join(f"{s['top8']:.3f}" for s in scores)
            path8 = " / ".join(f"{s['path8']:.3f}" for s in scores)
            print(
                f"| {folder} | {'yes' if heads.reads_next_token else 'no'} | {heldout.name} | "
                f"{scores[0]['positions']:,} | {top1} | {top8} | {path8} |",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
