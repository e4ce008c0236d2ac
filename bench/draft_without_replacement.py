"""Drafting without replacement at the root, against i.i.d. drafts, for the sampling heads alone
(heads_multi's drafter: independent heads, so a draft's later tokens do not depend on its first):
at each of bench/tune_sample_alpha.py's held-out positions (8 chat + 8 WikiText-2 valid prompts,
64 sampled tokens, every 4th position), p = 4 i.i.d. drafts against 4 drafts whose first tokens
are drawn without replacement (the rest i.i.d.), verified by recursive rejection with and without
replacement; expected accepted draft tokens per step, exact from the rule's law. The two draft
sets are drawn independently (not paired), so the gap carries the draws' noise.

    python bench/draft_without_replacement.py TEMPERATURE
"""

import math
import sys

import torch

from _heldout import heldout_positions, target_laws
from draftlattice import verify
from draftlattice.decode import Sampling
from draftlattice.default_model import load_default

T = float(sys.argv[1])
P = 4
torch.set_num_threads(1)
b = load_default(torch.bfloat16)
model = b.model
samp = Sampling(temperature=T)
H = b.sampling_heads
vals = {"iid": [], "wor": []}
dup = []
with torch.inference_mode():
    for i, t, context, prefix, head_logits in heldout_positions(b, H, samp):
        laws = verify.sampling_distribution(head_logits.float(), T)  # [g, V]
        g = laws.shape[0]
        gen = torch.Generator().manual_seed(i * 100_003 + t)
        iid = torch.stack(
            [torch.multinomial(laws[j], P, replacement=True, generator=gen) for j in range(g)], 1
        )  # [P, g]
        first = torch.multinomial(laws[0], P, replacement=False, generator=gen)  # sequential WOR draws
        rest = torch.stack([torch.multinomial(laws[j], P, replacement=True, generator=gen) for j in range(1, g)], 1)
        wor = torch.cat([first[:, None], rest], 1)
        dup.append(P - len(set(iid[:, 0].tolist())))
        q = laws[None].expand(P, g, -1)
        tokens = torch.cat([iid, wor])
        probs = target_laws(model, context, prefix, tokens, T)
        for name, sl, w in (("iid", slice(0, P), False), ("wor", slice(P, 2 * P), True)):
            law = verify.multi_draft_verify_distribution(tokens[None, sl], probs[None, sl], q[None], w)[0].sum((0, 2))
            vals[name].append(float((law * torch.arange(g + 1)).sum()))
n = len(vals["iid"])
gap = [a - c for a, c in zip(vals["wor"], vals["iid"])]
gm = sum(gap) / n
se = math.sqrt(sum((x - gm) ** 2 for x in gap) / (n - 1) / n)
print(
    f"T={T} positions {n}: heads, p={P}: iid {sum(vals['iid']) / n:.4f}  wor-at-root {sum(vals['wor']) / n:.4f}  gap {gm:+.4f} (s.e. {se:.4f}); duplicated first tokens per step (iid) {sum(dup) / n:.2f}"
)
