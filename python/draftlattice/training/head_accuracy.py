"""How often draft heads put the model's own next tokens in their top k (teacher-forced).

On a distilled corpus of held-out prompts, head j at a position of the model's continuation is
right when token t + j is among its k best. This is what greedy acceptance depends on: a head's
top-1 accuracy bounds the chance that its draft token is accepted, its top-k accuracy the
chance that a k-candidate lattice holds the token. ``path{k}`` of head j counts the positions
where heads 2..j all hold their tokens in their top k: how often the top-k lattice's oracle path
reaches token t + j (the oracle's expected length is 1 + the sum over heads, plus the bonus token).
"""

from __future__ import annotations

import torch

from ..distilled_corpus import DistilledCorpus
from ..hf.heads import DraftHeads, input_embeddings, output_embeddings
from .batches import RecordBatches
from .head_loss import chunked_linear_ce
from .prefix_gate import drop_missed


@torch.no_grad()
def head_accuracy(
    model,
    heads: DraftHeads,
    corpus: DistilledCorpus,
    ks: tuple[int, ...] = (1, 4, 8),
    batch_tokens: int = 8192,
    max_len: int = 1024,
) -> list[dict]:
    """Per head (2..h): ``{"head": j, "positions": n, "loss": CE, "top1": ..., "top4": ...,
    "path1": ..., "path4": ...}`` (see the module docstring)."""
    device = output_embeddings(model).weight.device
    batches = RecordBatches(corpus, batch_tokens, max_len, seed=0)
    n_batches = len(batches.order)
    keys = [f"top{k}" for k in ks] + [f"path{k}" for k in ks]
    sums = [{"positions": 0, "loss": 0.0, **dict.fromkeys(keys, 0.0)} for _ in heads.heads]
    weight = output_embeddings(model).weight
    embed = input_embeddings(model) if heads.reads_next_token else None
    with torch.autocast(device.type, dtype=torch.bfloat16):
        for _ in range(n_batches):
            tokens, valid = batches.next()
            tokens, valid = tokens.to(device), valid.to(device)
            z = model.base_model(input_ids=tokens).last_hidden_state
            T = tokens.shape[1]
            alive = torch.ones((len(ks), *tokens.shape), device=device)  # the top-k lattices' paths still in
            for i, head in enumerate(heads.heads):
                j = i + 2
                if T <= j:
                    continue
                keep = valid[:, j:] & valid[:, 1 : T - j + 1]
                n = int(keep.sum())
                if n == 0:
                    continue
                next_embeds = None if embed is None else embed(tokens[:, 1 : T - j + 1][keep])
                states = head(z[:, : T - j][keep], next_embeds)
                ranks: list = []
                loss, hits = chunked_linear_ce(states, weight, tokens[:, j:][keep], ks=ks, ranks=ranks)
                rank = torch.cat(ranks)
                sums[i]["positions"] += n
                sums[i]["loss"] += float(loss) * n
                for m, (k, hit) in enumerate(zip(ks, hits)):
                    sums[i][f"top{k}"] += hit * n
                    drop_missed(alive[m], keep, rank, k)
                    sums[i][f"path{k}"] += float(alive[m, :, : T - j][keep].sum())
    results = []
    for i, s in enumerate(sums):
        n = max(1, s["positions"])
        results.append(
            {
                "head": i + 2,
                "positions": s["positions"],
                **{key: value / n for key, value in s.items() if key != "positions"},
            }
        )
    return results
