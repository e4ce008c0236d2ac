"""One lossless sampling step of the blockwise decoder: draft, one target forward, verify.

Verifiers (``BlockwiseDecoder(verifier=...)``), all exact for the target's sampling law:

* ``"block"`` / ``"token"``: one draft sampled by the drafter (``drafter.sample``), block
  verification (Sun et al. 2024) or token verification (Leviathan et al. 2023).
* ``"multi"``: ``p = drafter.num_drafts`` drafts sampled independently (``drafter.sample(n=p)``),
  recursive rejection sampling over their prefix tree (``verify.multi_draft_verify`` with q).
* ``"multi-wor"``: up to p drafts whose first tokens are drawn without replacement
  (``drafter.sample(n=p, distinct_first=True)``; the rest of each draft follows the drafter
  given its first token), recursive rejection sampling without replacement.
* ``"tree-sample"``: the drafter's ``p`` deterministic drafts (``drafter.propose``, e.g. the p
  best paths of the rescored lattice), the tree rule (``verify.multi_draft_verify`` without q).

The p rows are verified as p batched rows of one forward (cache expanded to p rows, then the
chosen row kept), as the greedy "greedy" verifier does. The target's law at every row and
position applies the repetition penalty over the committed text plus that row's draft prefix.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .. import verify
from .drafters.base import Drafter, Drafts
from .sampling import SamplingConfig, sample_categorical

SAMPLING_VERIFIERS = ("token", "block", "multi", "multi-wor", "tree-sample")


def draft_for_sampling(
    drafter: Drafter, verifier: str, head_logits: torch.Tensor, context: list[int], sampling: SamplingConfig, generator
) -> Drafts:
    """The drafts a sampling verifier needs (see the module docstring), checked."""
    g, vocab = head_logits.shape
    if verifier == "tree-sample":
        drafts = drafter.propose(head_logits, context)
        drafts = Drafts(drafts.tokens)  # deterministic drafts: the tree rule needs no q
    elif verifier == "multi":
        drafts = drafter.sample(head_logits, context, sampling, generator, n=drafter.num_drafts)
    elif verifier == "multi-wor":
        drafts = drafter.sample(head_logits, context, sampling, generator, n=drafter.num_drafts, distinct_first=True)
    else:
        drafts = drafter.sample(head_logits, context, sampling, generator)
    tokens = drafts.tokens
    if tokens.dim() != 2 or tokens.shape[1] != g or tokens.shape[0] < 1:
        raise ValueError(f"drafter returned tokens of shape {tuple(tokens.shape)}, expected [p, {g}]")
    rows = tokens.shape[0]
    if verifier in ("token", "block") and rows != 1:
        raise ValueError(f"verifier {verifier!r} needs one draft with q [1, {g}, {vocab}], got {rows} drafts")
    if verifier != "tree-sample" and (drafts.q is None or drafts.q.shape != (rows, g, vocab)):
        shape = None if drafts.q is None else tuple(drafts.q.shape)
        raise ValueError(f"sampling mode needs q [{rows}, {g}, {vocab}] beside the sampled drafts, got q {shape}")
    return drafts


def sampling_step(
    forward: Callable, cache, context: list[int], drafts: Drafts, sampling: SamplingConfig, verifier: str, generator
):
    """Verifies the drafts after ``context`` (its last token is pending, not yet in the cache).

    ``forward(rows [p, g+1], cache)`` is the decoder's verification forward: it extends the cache
    and returns an object with ``head1() -> [p, g+1, V]`` and ``heads(row, position) -> [h, V]``.
    Returns (accepted draft tokens, next pending token, heads [h, V] for the next block)."""
    prefix = cache.length
    tokens = drafts.tokens
    if tokens.shape[1] == 0:  # nothing drafted: one row is enough
        tokens = tokens[:1]
    p, g = tokens.shape
    roots = torch.full((p, 1), context[-1], dtype=torch.int64, device=tokens.device)
    rows = torch.cat([roots, tokens], dim=1)  # [p, g+1]
    if p > 1:
        cache.expand(p)
    out = forward(rows, cache)
    logits = out.head1().float()  # [p, g+1, V]
    probs = sampling.distribution(logits, sampling.seen(context, logits.shape[-1], tokens, device=logits.device))
    if g == 0:
        best, a, next_token = 0, 0, int(sample_categorical(probs[0, 0], generator))
    elif verifier in ("token", "block"):
        verify_fn = verify.block_verify if verifier == "block" else verify.token_verify
        num_accepted, nxt = verify_fn(tokens, drafts.q, probs, generator)
        best, a, next_token = 0, int(num_accepted[0]), int(nxt[0])
    else:
        q = None if verifier == "tree-sample" else drafts.q[None]
        result = verify.multi_draft_verify(tokens[None], probs[None], generator, q, verifier == "multi-wor")
        best, a, next_token = int(result.best_draft[0]), int(result.num_accepted[0]), int(result.next_token[0])
    if p > 1:
        cache.batch_select([best])
    cache.crop(prefix + 1 + a)
    return tokens[best, :a].tolist(), next_token, out.heads(best, a)
