"""Compare drafters on the same prompts: block efficiency, timing, and greedy exactness.

Used by ``draftlattice demo`` and bench scripts. Every configuration decodes every prompt; its
output is checked against plain greedy decoding of the target (computed first, which also gives
the oracle its reference).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from ..decode import BlockwiseDecoder, BlockwiseTarget, DecodeStats, Drafter, Drafts, greedy_decode

logger = logging.getLogger(__name__)


@dataclass
class DrafterSpec:
    """One configuration of the comparison.

    Attributes:
        label: row name, e.g. "ngram p=4".
        settings: human-readable settings, e.g. "k=4 alpha=0.5".
        make: builds the drafter for one prompt from the reference sequence (prompt + the target's
            greedy continuation; only the oracle uses it).
        verifier: "greedy" or "tree".
    """

    label: str
    settings: str
    make: Callable[[list[int]], Drafter]
    verifier: str = "greedy"


@dataclass
class ComparisonRow:
    """Aggregated result of one configuration over all prompts."""

    label: str
    settings: str
    verifier: str
    stats: DecodeStats
    identical: bool  # every output equal to plain greedy decoding
    seconds: float

    @property
    def tokens_per_second(self) -> float:
        """Generated tokens per wall-clock second of the whole row (drafting, verification, prefill)."""
        return self.stats.new_tokens / self.seconds if self.seconds > 0 else 0.0


@dataclass
class Comparison:
    """Outputs of :func:`compare_drafters`."""

    references: list[list[int]]  # per prompt, the target's greedy continuation
    greedy: ComparisonRow  # plain greedy decoding (the baseline, block efficiency 1)
    rows: list[ComparisonRow] = field(default_factory=list)


def compare_drafters(
    model: BlockwiseTarget,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    specs: Sequence[DrafterSpec],
    progress: Callable | None = None,
) -> Comparison:
    """Decodes every prompt with plain greedy decoding, then with every spec.

    Args:
        model: the target (``BlockwiseLM`` or any ``BlockwiseTarget``).
        prompts: token-id prompts.
        max_new_tokens: tokens generated per prompt.
        specs: configurations to compare.
        progress: optional wrapper of an iterable (e.g. tqdm) for long runs.
    Returns:
        A Comparison; ``identical`` is False for any configuration whose output differed.
    """
    wrap = progress or (lambda items, **_: items)
    references, greedy_stats, start = [], DecodeStats(), time.perf_counter()
    for prompt in wrap(prompts, desc="greedy reference"):
        references.append(greedy_decode(model, list(prompt), max_new_tokens))
        n = len(references[-1])  # one serial call per token: the prefill, then one step each
        greedy_stats += DecodeStats(serial_calls=n, prefill_calls=1, new_tokens=n, block_sizes=[0, n - 1])
    greedy_seconds = time.perf_counter() - start
    greedy_stats.verification_seconds = greedy_seconds
    result = Comparison(references, ComparisonRow("greedy", "head 1 only", "-", greedy_stats, True, greedy_seconds))
    for spec in specs:
        stats, identical, start = DecodeStats(), True, time.perf_counter()
        for prompt, reference in wrap(list(zip(prompts, references)), desc=spec.label):
            drafter = spec.make(list(prompt) + reference)
            out = BlockwiseDecoder(model, drafter, spec.verifier).generate(list(prompt), max_new_tokens)
            stats += out.stats
            if out.tokens != reference:
                identical = False
                logger.error("%s: output differs from greedy decoding on prompt %s", spec.label, list(prompt)[:8])
        seconds = time.perf_counter() - start
        result.rows.append(ComparisonRow(spec.label, spec.settings, spec.verifier, stats, identical, seconds))
        logger.info("%s: %s", spec.label, stats.summary())
    return result


@dataclass
class DraftExample:
    """One step where rescoring changed the draft: both drafts and the target's continuation."""

    context: list[int]  # committed tokens including the known next token
    vanilla: list[int]  # heads' argmax draft
    rescored: list[int]  # the drafter's first draft
    target: list[int]  # the target's greedy tokens at the same positions

    def accepted(self, draft: list[int]) -> int:
        """Leading draft tokens equal to the target's (what greedy verification accepts)."""
        count = 0
        for d, t in zip(draft, self.target):
            if d != t:
                break
            count += 1
        return count


class ExampleRecorder:
    """Wraps a drafter; records steps where its first draft differs from the vanilla draft."""

    def __init__(self, drafter: Drafter, reference: Sequence[int], limit: int = 20) -> None:
        self.drafter, self.reference, self.limit = drafter, list(reference), limit
        self.name, self.num_drafts = drafter.name, drafter.num_drafts
        self.examples: list[DraftExample] = []

    def propose(self, head_logits: torch.Tensor, context: Sequence[int]) -> Drafts:
        drafts = self.drafter.propose(head_logits, context)
        vanilla = head_logits.argmax(-1).tolist()
        first = drafts.tokens[0].tolist()
        if first != vanilla and len(self.examples) < self.limit:
            n = len(context)
            self.examples.append(DraftExample(list(context), vanilla, first, self.reference[n : n + len(first)]))
        return drafts

    def sample(self, head_logits, context, sampling, generator) -> Drafts:
        return self.drafter.sample(head_logits, context, sampling, generator)
