"""How often draft heads put the model's own next tokens in their top k (teacher-forced).

On a distilled corpus of held-out prompts, head j at a position of the model's continuation is
right when token t + j is among its k best. This is what greedy acceptance depends on: a head's
top-1 accuracy bounds the chance that its draft token is accepted, its top-k accuracy the
chance that a k-candidate lattice holds the token.
"""

from __future__ import annotations

import torch

from ..distilled_corpus import DistilledCorpus
from ..hf.heads import DraftHeads, input_embeddings, output_embeddings
from .batches import RecordBatches
from .head_loss import chunked_linear_ce


@torch.no_grad()
def head_accuracy(
    model,
    heads: DraftHeads,
    corpus: DistilledCorpus,
    ks: tuple[int, ...] = (1, 4, 8),
    batch_tokens: int = 8192,
    max_len: int = 1024,
) -> list[dict]:
    """Per head (2..h): ``{"head": j, "positions": n, "loss": CE, "top1": ..., "top4": ...}``."""
    device = output_embeddings(model).weight.device
    batches = RecordBatches(corpus, batch_tokens, max_len, seed=0)
    n_batches = len(batches.order)
    sums = [{"positions": 0, "loss": 0.0, **{f"top{k}": 0.0 for k in ks}} for _ in heads.heads]
    weight = output_embeddings(model).weight
    embed = input_embeddings(model) if heads.reads_next_token else None
    with torch.autocast(device.type, dtype=torch.bfloat16):
        for _ in range(n_batches):
            tokens, valid = batches.next()
            tokens, valid = tokens.to(device), valid.to(device)
            z = model.base_model(input_ids=tokens).last_hidden_state
            T = tokens.shape[1]
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
                loss, hits = chunked_linear_ce(states, weight, tokens[:, j:][keep], ks=ks)
                sums[i]["positions"] += n
                sums[i]["loss"] += float(loss) * n
                for k, hit in zip(ks, hits):
                    sums[i][f"top{k}"] += hit * n
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
