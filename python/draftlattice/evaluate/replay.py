"""Exact replay of greedy blockwise decoding from a trace (no model needed).

Mirrors the greedy decoding of :class:`draftlattice.decode.Engine` step for step: the prefill
commits y[0] (1 target call); at a step whose root is y[n] the drafter proposes drafts of
g = h - 1 tokens from the heads at position n, greedy verification accepts a = the longest prefix
of y[n+1 ..] (as far as the trace goes) matched by any draft, and the step commits the a accepted
tokens and the target's next one (1 target call, ``DecodeStats.record_step([a])``); the run
stops once T tokens are committed. So

    block efficiency = decoded tokens / target calls (prefill included; plain greedy = 1.0),

identical to ``DecodeStats.block_efficiency`` of the live engine on the same prompts.

All prompts advance together: each round drafts one step of every unfinished prompt in one
batch (one ``rescore_batch`` call per distinct p, C++ threads, GIL released).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from ..decode.stats import DecodeStats
from .drafting import TraceView, accepted_length
from .trace import Trace

logger = logging.getLogger(__name__)


@dataclass
class ReplayResult:
    """Statistics of one drafter replayed over (a subset of) a trace's prompts.

    Attributes:
        drafter: the drafter's name.
        stats: DecodeStats summed over prompts (serial calls, tokens, block-size histogram).
        per_prompt: one DecodeStats per replayed prompt, in order.
        drafts_verified: total draft rows verified over all steps (verification cost).
    """

    drafter: str
    stats: DecodeStats
    per_prompt: list[DecodeStats] = field(default_factory=list)
    drafts_verified: int = 0

    @property
    def block_efficiency(self) -> float:
        return self.stats.block_efficiency

    @property
    def drafts_per_call(self) -> float:
        """Mean draft rows verified per decoding step (steps with g = 0 verify none)."""
        return self.drafts_verified / self.stats.steps if self.stats.steps else 0.0


def replay(
    trace: Trace | TraceView,
    drafter,
    prompts: Sequence[int] | None = None,
    num_threads: int | None = None,
    progress: bool = True,
) -> ReplayResult:
    """Block efficiency of ``drafter`` (a spec from :mod:`.drafting`) on the trace's prompts.

    Args:
        prompts: indices of the prompts to replay (default: all).
        num_threads: rescoring threads (default: all hardware threads).
    """
    view = trace if isinstance(trace, TraceView) else TraceView(trace)
    order = list(range(len(view.trace))) if prompts is None else [int(i) for i in prompts]
    lengths = [len(view.trace.tokens[i]) for i in order]
    stats = [DecodeStats(target_calls=1, prefill_calls=1, new_tokens=m) for m in lengths]
    pos = [0] * len(order)
    verified = 0
    bar = tqdm(
        total=sum(lengths), desc=f"replay {drafter.name}", unit="tok", disable=None if progress else True, leave=False
    )
    bar.update(len(order))
    while True:
        active = [s for s in range(len(order)) if pos[s] + 1 < lengths[s]]
        if not active:
            break
        steps = [(order[s], pos[s], view.h - 1) for s in active]
        drafting = [t for t, step in enumerate(steps) if step[2] > 0]
        drafts = drafter.draft(view, [steps[t] for t in drafting], num_threads) if drafting else []
        accepted = [0] * len(steps)
        for t, rows in zip(drafting, drafts):
            i, n, g = steps[t]
            accepted[t] = accepted_length(np.asarray(rows), view.reference(i, n, g))
            verified += len(rows)
        for s, a in zip(active, accepted):
            stats[s].record_step([a])
            pos[s] += 1 + a
        bar.update(sum(1 + a for a in accepted))
    bar.close()
    total = sum(stats, DecodeStats())
    logger.info("replay %s: %s", drafter.name, total.summary())
    return ReplayResult(drafter.name, total, stats, verified)
