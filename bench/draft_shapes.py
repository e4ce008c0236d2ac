"""Draft shapes for lossless sampling on the default model, compared on the same draws: at every
held-out position of bench/tune_sample_alpha.py (8 chat + 8 WikiText-2 valid prompts, 64 sampled
tokens, every 4th position), 8 drafts of 3 tokens are drawn once from the ``ngram_multi``
drafter; each shape (p drafts of g tokens) reads the first p rows and their first g tokens, and
its expected accepted draft tokens per step under recursive rejection are computed exactly from
the rule's output law. A shape's gap to p = 4, g = 3 (the demo's) is paired, position by position.
(Truncating a draft to g tokens keeps the law of its first g tokens up to the LM's look-ahead
through the dropped tokens, which sample_alpha 0.1 makes small.)

    python bench/draft_shapes.py TEMPERATURE [SAMPLE_ALPHA=0.1] [STRIDE=4]
"""

import math
import sys

import torch

from _heldout import heldout_positions, target_laws
from draftlattice import verify
from draftlattice.apps import tune_sampling as ts
from draftlattice.decode import LatticeDrafter, Sampling
from draftlattice.default_model import load_default

T = float(sys.argv[1])
alpha = float(sys.argv[2]) if len(sys.argv) > 2 else 0.1
stride = int(sys.argv[3]) if len(sys.argv) > 3 else 4
torch.set_num_threads(2)
b = load_default(torch.bfloat16)
model = b.model
samp = Sampling(temperature=T)
H = b.sampling_heads
shapes = [(4, 3), (4, 2), (5, 2), (6, 2), (8, 2), (6, 3), (3, 3), (2, 3), (1, 3)]
vals = {s: [] for s in shapes}
d = LatticeDrafter(b.lm, k=8, p=8, sample_alpha=alpha)
with torch.inference_mode():
    for i, t, context, prefix, head_logits in heldout_positions(b, H, samp, stride):
        dr = ts._sampled_drafts(d, head_logits, context, samp, i * 100_003 + t)
        tokens = dr.tokens[0]
        probs = target_laws(model, context, prefix, tokens, T)
        q = dr.q[0].to(probs)
        for p, gg in shapes:
            law = verify.multi_draft_verify_distribution(
                tokens[None, :p, :gg], probs[None, :p, : gg + 1], q[None, :p, :gg]
            )[0].sum((0, 2))
            vals[(p, gg)].append(float((law * torch.arange(gg + 1)).sum()))
base = vals[(4, 3)]
for s, v in vals.items():
    n = len(v)
    m = sum(v) / n
    gap = [a - c for a, c in zip(v, base)]
    gm = sum(gap) / n
    se = math.sqrt(sum((x - gm) ** 2 for x in gap) / (n - 1) / n)
    print(f"p={s[0]} g={s[1]} nodes<={1 + s[0] * s[1]}: E accepted {m:.4f}  vs p=4 g=3: {gm:+.4f} (s.e. {se:.4f})")
