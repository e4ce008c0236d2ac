"""The lossless sampling rules of a decoding step, over ``p`` chains per sequence.

``rule`` names the rule (``draft_sample`` of :func:`draftlattice.hf.generate`):

* ``"block"`` / ``"token"``: one sampled draft, block verification (Sun et al. 2024, optimal for
  one draft) or token-by-token speculative sampling (Leviathan et al. 2023; Chen et al. 2023);
* ``"multi"``: several sampled drafts with their laws q, recursive rejection sampling over
  their prefix tree (one draft: block verification accepts at least as much);
* ``"tree"``: deterministic drafts (e.g. the p best paths), the exact tree rule (no q).
"""

from __future__ import annotations

import torch
from torch import Tensor

from .multi_draft import multi_draft_verify
from .sampling import block_verify, token_verify

SAMPLE_RULES = ("multi", "tree", "block", "token")


def verify_sampled(
    rule: str, drafts: Tensor, probs: Tensor, q: Tensor | None, nodes: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor | None]:
    """``(num [B], next [B], best [B] or None)`` of ``rule``.

    ``drafts [B, p, g]``; ``probs [B, p, g+1, V]``: the target's law after every draft prefix
    (or, with ``nodes [B, p, g+1]``, ``[B, N, V]``: the law at every node of the drafts' token
    tree, ``nodes[b, i, j]`` the node of draft i's first j tokens); ``q [B, p, g, V]``: the laws
    the drafts were sampled from (None for ``"tree"``). Randomness comes from torch's global
    generator, like ``generate()``'s own draws.
    """
    if rule not in SAMPLE_RULES:
        raise ValueError(f"sampling rule must be one of {SAMPLE_RULES}, got {rule!r}")
    if rule in ("block", "token") or (rule == "multi" and drafts.shape[1] == 1):
        if nodes is not None:
            probs = probs[torch.arange(probs.shape[0], device=probs.device).view(-1, 1, 1), nodes]
        single = block_verify if rule != "token" else token_verify
        num, nxt = single(drafts[:, 0], q[:, 0], probs[:, 0])
        return num, nxt, None
    drafts = drafts.to(probs.device, non_blocking=True)
    result = multi_draft_verify(drafts, probs, None, q if rule == "multi" else None, nodes=nodes)
    return result.num_accepted, result.next_token, result.best_draft
