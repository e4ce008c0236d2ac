"""How well the sampling heads' laws match the target's at a temperature, per logit scale.

    python bench/heads_calibration.py --heldout WORK/heldout-t0.7 WORK/heldout-t1 \\
        --heads lm_models/smollm2/heads-sampled [--scales 0.6 0.7 0.8 1.0] [--stride 2] [--json F]

A sampled draft token of head j is accepted (speculative sampling, its prefix accepted) with
probability ``sum_x min(p_T(x), q(x))``, where ``p_T`` is the target's law at T for token
t + j and ``q`` the head's proposal ``softmax(s * logits / T)``; the drafter uses ``s = 1``.
Heads fitted to answers sampled at T0 have logits near the model's at T0, so dividing them by
T again sharpens them: ``s = T0`` would undo that. This measures, teacher forced on the model's
own answers sampled at T (each held-out corpus at the temperature it was sampled at, from its
meta.json), that acceptance and the realized token's negative log-likelihood under ``q`` for
every scale, all on the same positions (paired). The target's law is the model's full softmax
at the true prefix (the draft's earlier tokens accepted).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heads", type=Path, nargs="+", required=True, help="DraftHeads folders")
    p.add_argument("--heldout", type=Path, nargs="+", required=True, help="held-out corpora of sampled answers")
    p.add_argument("--scales", type=float, nargs="+", default=[0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2])
    p.add_argument("--stride", type=int, default=2, help="every stride-th continuation position")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", type=Path, help="also write the rows as JSON")
    return p.parse_args()


def records(corpus, max_len: int = 1024):
    """Per record: its tokens ``[1, T]`` and the first continuation position."""
    for r, prompt_len in enumerate(corpus.prompt_lens.tolist()):
        tokens = torch.from_numpy(corpus.record(r)[:max_len].astype("int64"))[None]
        if tokens.shape[1] > prompt_len + 1:
            yield tokens, prompt_len


@torch.no_grad()
def calibration(model, heads_sets, corpus, temperature: float, scales, stride: int):
    """``sums[h][j][s] = [acceptance sum, nll sum, positions]`` over the corpus' continuations."""
    from draftlattice.hf.heads import output_embeddings

    g = heads_sets[0].horizon - 1
    sums = [[[[0.0, 0.0, 0] for _ in scales] for _ in range(g)] for _ in heads_sets]
    for tokens, prompt_len in records(corpus):
        T = tokens.shape[1]
        z = model.base_model(input_ids=tokens).last_hidden_state[0]  # [T, d]
        target = torch.log_softmax(output_embeddings(model)(z).float() / temperature, dim=-1)  # law of token u + 1
        for j in range(2, g + 2):
            # head j at position t (t + 1 known) predicts token t + j, whose law is target[t + j - 1]
            ts = torch.arange(prompt_len - 1, T - j, stride)
            if ts.numel() == 0:
                continue
            p = target[ts + j - 1].exp()
            truth = tokens[0, ts + j]
            for h, heads in enumerate(heads_sets):
                logits = heads.logits(z[ts], model, tokens[0, ts + 1])[:, j - 2].float()
                for s, scale in enumerate(scales):
                    q = torch.log_softmax(logits * (scale / temperature), dim=-1)
                    row = sums[h][j - 2][s]
                    row[0] += float(torch.minimum(p, q.exp()).sum())
                    row[1] -= float(q.gather(1, truth[:, None]).clamp_min(-50.0).sum())
                    row[2] += int(ts.numel())
    return sums


def main() -> int:
    args = parse_args()
    torch.set_num_threads(args.threads)
    from draftlattice.default_model import load_default
    from draftlattice.distilled_corpus import DistilledCorpus
    from draftlattice.hf import DraftHeads

    model = load_default(torch.float32).model
    heads_sets = [DraftHeads.from_pretrained(h, model).float().eval() for h in args.heads]
    rows = []
    print("| held-out (T) | heads | head | " + " | ".join(f"s={s:g}" for s in args.scales) + " |")
    print("|---|---|---:|" + "---:|" * len(args.scales))
    for folder in args.heldout:
        corpus = DistilledCorpus.load(folder)
        temperature = float(corpus.meta["temperature"])
        sums = calibration(model, heads_sets, corpus, temperature, args.scales, args.stride)
        for h, path in enumerate(args.heads):
            for j, per_scale in enumerate(sums[h]):
                cells = [(a / max(n, 1), nll / max(n, 1)) for a, nll, n in per_scale]
                rows.append(
                    {
                        "heldout": str(folder),
                        "temperature": temperature,
                        "heads": str(path),
                        "head": j + 2,
                        "positions": per_scale[0][2],
                        "scales": args.scales,
                        "acceptance": [c[0] for c in cells],
                        "nll": [c[1] for c in cells],
                    }
                )
                best = max(range(len(cells)), key=lambda s: cells[s][0])
                text = [f"{a:.4f} / {nll:.2f}" for a, nll in cells]
                text[best] = f"**{cells[best][0]:.4f}** / {cells[best][1]:.2f}"
                print(f"| {folder.name} ({temperature:g}) | {path} | {j + 2} | " + " | ".join(text) + " |")
    print("\ncells: mean acceptance of one sampled draft token / NLL of the model's token under q (nats)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if all(math.isfinite(v) for r in rows for v in r["acceptance"]) else 1


if __name__ == "__main__":
    sys.exit(main())
