"""N-gram lattice rescoring drafts (Kim et al. 2024, with exact p-best and exact sampling).

The heads' top-k candidates form a sausage lattice of k**g drafts; each draft d is scored
    total(d) = sum_i log p_head(d_i) + alpha * ln p_LM(d | committed text)
by a backoff n-gram LM over the model's tokenizer (C++ core, ``draftlattice.rescore``). Greedy
mode proposes the p best drafts (exactly, without enumerating them); sampling mode draws drafts
from P(d) proportional to exp(total(d)) with its own LM weight ``sample_alpha``, over the heads'
distributions processed like the target's (``SamplingConfig.distribution``), by default with
full support (an "other" arc per position for the head's mass outside the top-k), and hands the
verifier the exact conditional distribution of every drawn token over the whole vocabulary
(``draftlattice.sample.sample_from_heads``, forward-backward).

Both modes keep the LM state of the committed text (:class:`CommittedLmState`) and advance it by
the tokens accepted since the last step, so a step costs O(accepted tokens), not O(history).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from ... import _core
from ..._arrays import to_numpy
from ..._core import LmState
from ...lattice import Lattice
from ...sample import sample_from_heads
from ..sampling import SamplingConfig, draw_distinct
from .base import Drafts, check_head_logits


class LatticeDrafter:
    """Top-k lattice rescored by an n-gram LM.

    Args:
        lm: ``draftlattice.NgramLM`` whose token ids are the model's (same tokenizer).
        k: candidates per head (>= 1; capped at the vocabulary size).
        p: drafts per step in greedy mode (verified together as rows or as a tree).
        alpha: weight of the LM log-probability (>= 0; 0 = lattice scores only) in greedy mode.
        bos: the committed text starts a sentence/line (``<s>`` before the context).
        sample_alpha: the LM weight in sampling mode (>= 0; 0 = the heads' own law).
        full_support: sampled drafts can take any token the head allows (an "other" arc per
            position); off, only the heads' top-k.
    """

    name = "ngram"

    def __init__(
        self,
        lm,
        k: int = 4,
        p: int = 1,
        alpha: float = 0.5,
        bos: bool = True,
        sample_alpha: float = 0.2,
        full_support: bool = True,
    ) -> None:
        if k < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        _core.check_rescore_options(p, alpha)  # the core's checks, at construction
        if not sample_alpha >= 0:
            raise ValueError(f"sample_alpha must be >= 0, got {sample_alpha}")
        self.lm, self.k, self.num_drafts, self.alpha, self.bos = lm, k, p, float(alpha), bos
        self.sample_alpha, self.full_support = float(sample_alpha), bool(full_support)
        self.committed = CommittedLmState(lm, bos)
        # Each step's lattice continues the text the last one drafted, so the search asks the LM
        # mostly what earlier steps asked: the answers are kept across steps (csrc/lm_memo.h; the
        # drafts do not depend on it, only the time to find them).
        self.memo = _core.LmMemo()

    def lattice(self, head_logits: torch.Tensor, temperature: float = 1.0) -> Lattice:
        """The top-k lattice [g, k] of head_logits [g, V] (exact log-softmax scores)."""
        check_head_logits(head_logits)
        logits = head_logits.detach().float().cpu().numpy()
        return Lattice.from_logits(logits, min(self.k, logits.shape[1]), temperature)

    def propose(self, head_logits: torch.Tensor, context: Sequence[int]) -> Drafts:
        # One core call advances the committed state, builds the lattice and rescores it: equal to
        # rescore(self.lattice(head_logits), ..., self.committed.after(context)) up to drafts whose
        # totals tie within float rounding (csrc/lattice.h), with fewer crossings (each costs tens
        # of microseconds right after the target's forward pass).
        check_head_logits(head_logits)
        k = min(self.k, head_logits.shape[1])
        state, new = self.committed.pending(context)
        if head_logits.device.type == "cpu":
            # The usual float32 logits without grad are viewed directly (to_numpy's general path
            # costs a few microseconds more right after the target's forward pass).
            plain = head_logits.dtype is torch.float32 and not head_logits.requires_grad
            logits = head_logits.numpy() if plain else to_numpy(head_logits, "head_logits")
            tokens, after = _core.draft_from_logits(
                logits, k, 1.0, self.lm, state, new, self.num_drafts, self.alpha, self.memo
            )
        else:
            ids, logprobs = device_topk(head_logits, k)
            tokens, after = _core.draft_from_topk(
                ids, logprobs, self.lm, state, new, self.num_drafts, self.alpha, self.memo
            )
        self.committed.commit(context, after)
        return Drafts(torch.from_numpy(tokens))

    def sample(
        self,
        head_logits: torch.Tensor,
        context: Sequence[int],
        sampling: SamplingConfig,
        generator: torch.Generator | None,
        n: int = 1,
        distinct_first: bool = False,
    ) -> Drafts:
        """n drafts [n, g] with their exact conditionals q [n, g, V] (float32): i.i.d. samples, or
        with ``distinct_first`` min(n, support) drafts whose first tokens are drawn without
        replacement from the first position's law and whose rest follows the lattice given that
        first token (q[:, 0] is then that law itself, before any removal)."""
        check_head_logits(head_logits)
        vocab = head_logits.shape[1]
        probs = sampling.distribution(
            head_logits.detach().double(), sampling.seen(context, vocab, device=head_logits.device)
        )
        logp = probs.log().cpu().numpy()
        state = self.committed.after(context)
        drawn = sample_from_heads(
            logp,
            self.k,
            self.lm,
            1 if distinct_first else n,
            self.sample_alpha,
            state,
            False,
            generator,
            self.full_support,
        )
        if not distinct_first:
            return Drafts(torch.from_numpy(drawn.tokens), torch.from_numpy(drawn.q).float())
        q0 = torch.from_numpy(drawn.q[0, 0])
        firsts = draw_distinct(q0, n, generator).tolist()
        tokens, q = [], []
        for c in firsts:
            row, law = [c], [drawn.q[0, 0]]
            if logp.shape[0] > 1:  # the rest given c: the lattice of heads 2.. after c's LM state
                known = c in drawn.lattice.tokens[0]  # else an "other" token: the LM restarts
                after = self.lm.advance(state, [c]) if known else self.lm.start([], False)
                rest = sample_from_heads(
                    logp[1:], drawn.lattice.k, self.lm, 1, self.sample_alpha, after, False, generator, self.full_support
                )
                row += rest.tokens[0].tolist()
                law += list(rest.q[0])
            tokens.append(row)
            q.append(np.stack(law))
        return Drafts(torch.from_numpy(np.asarray(tokens, dtype=np.int64)), torch.from_numpy(np.stack(q)).float())


def device_topk(head_logits: torch.Tensor, k: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids int32 [g, k], log-softmax values float32 [g, k]) of each head's k best tokens,
    computed where the logits live: on an accelerator only these cross to the host, not the
    [g, V] logits (V = 32k-150k for current models). Ties at the k-th place may pick another
    token than the host path (torch.topk does not order ties by token id).

    Raises:
        ValueError: a NaN or +inf logit, or a head with fewer than k logits above -inf.
    """
    logits = head_logits.detach().float()
    values, ids = torch.topk(logits, k, dim=-1)
    logprobs = (values - torch.logsumexp(logits, dim=-1, keepdim=True)).clamp(max=0.0)
    logprobs = logprobs.cpu().numpy()
    if not np.isfinite(logprobs).all():
        raise ValueError(
            "head logits must be finite or -inf, with at least k logits above -inf per head "
            f"(k={k}): got a NaN or +inf logit, or a head masked below k"
        )
    return ids.to(torch.int32).cpu().numpy(), logprobs


class CommittedLmState:
    """The LM state after a growing context, advanced by the tokens added since the last call.

    ``after(context)`` equals ``lm.start(context, bos)``. When ``context`` extends the previous
    one it only scores the new tokens: it checks that the last ``order - 1`` tokens before them
    are unchanged, which is all the state depends on (the whole previous context while it is
    shorter than that, since ``<s>`` then still counts). Any other context (a new sequence, a
    rollback) starts over from its last ``order - 1`` tokens. Cost per call: O(order + new tokens).
    """

    def __init__(self, lm, bos: bool) -> None:
        self.lm, self.bos = lm, bool(bos)
        self.window = max(int(lm.order) - 1, 0)
        self.length = -1  # no context yet
        self.tail: tuple[int, ...] = ()
        self.state = None

    def after(self, context: Sequence[int]) -> LmState:
        state, new = self.pending(context)
        return self.commit(context, self.lm.advance(state, new) if len(new) else state)

    def pending(self, context: Sequence[int]) -> tuple[LmState, Sequence[int]]:
        """(a state, the tokens to advance it by) whose result is ``lm.start(context, bos)``:
        the kept state and the tokens added since, or a fresh start and the last order-1 tokens."""
        n, m, w = len(context), self.length, self.window
        if 0 <= m <= n and tuple(context[max(0, m - w) : m]) == self.tail:
            return self.state, context[m:n]
        return self.lm.start((), self.bos), context[max(0, n - w) : n]

    def commit(self, context: Sequence[int], state: LmState) -> LmState:
        """Keeps ``state``, the state after ``context`` (from :meth:`pending`), and returns it."""
        n, w = len(context), self.window
        self.state, self.length, self.tail = state, n, tuple(context[max(0, n - w) : n])
        return state
