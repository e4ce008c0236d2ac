"""The default model's fastest exact drafting on this machine: the context's copy alone, the
lattice's tree (its p best drafts, or its best prefixes under a node budget) with the copy, or
no drafts at all, chosen from the lean step's cost measured here.

Why: which drafter pays depends on the CPU. Where verifying 16 tokens costs about one (AMX, a GPU)
the tree of many drafts wins; where every extra token adds arithmetic (AVX-512 or AVX2 with int4
weights, bench/RESULTS.md) the copy's one short draft a step does, and the tree at any p decodes
more slowly than it; where even two tokens cost much more than one, plain decoding on the same
step does. Every choice is exact (greedy decoding equals the step's own), so the choice changes
only speed: the one of the most predicted tokens/s, from the drafters' gains and host times
measured once on held-out prompts (``draft_budget.json``, ``bench/draft_budget.py``; plain
decoding's host time too) and the step's cost against nodes measured once per machine
(:func:`draftlattice.lean.fit.cached_cost_curve`). For sampling, the same choice between the
lattice's trees under the tree rule (lossless), the copy alone under it, and plain sampling on the
step, from gains measured at a few temperatures and interpolated to the one asked for (the table's
``sampled`` entries, :mod:`draftlattice.lean.sampled_gains`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

BUDGET_TABLE = "draft_budget.json"  #: the drafters' gains, beside the shipped heads (bench/draft_budget.py)
COPY, TREE = "lookup", "ngram_lookup_tree"  #: the drafters chosen between (the demo's row names)
PLAIN = "plain"  #: no drafts: plain greedy decoding on the lean step (the demo's ``lean`` row)
#: A drafting is chosen over plain decoding only if predicted this much faster: its tokens a call
#: vary with the text (the copy drafts 9% fewer on the demo's prompts than on the table's held-out
#: ones, bench/RESULTS.md), plain decoding's do not.
DRAFTS_MARGIN = 1.1


@dataclass(frozen=True)
class Drafting:
    """A drafting of the default model (greedy, or sampled by the tree rule) and its predicted
    speed on this machine."""

    drafter: str  #: :data:`COPY` (the copy alone), :data:`TREE` (the lattice's tree and the copy) or :data:`PLAIN`
    p: int | None  #: the lattice's drafts a step (None for the copy alone, or a tree of ``nodes``)
    copy_tokens: int  #: the copied draft's longest
    predicted: float  #: tokens/s predicted (held-out prompts' tokens a call over this step's cost)
    plain: float  #: plain decoding's predicted tokens/s on the same step
    candidates: tuple[tuple[str, float], ...]  #: every setting weighed and its predicted tokens/s
    settings: dict  #: the table's drafter settings: k, alpha, lookup (the longest n-gram matched)
    nodes: int | None = None  #: the tree of the lattice's best prefixes, this many (None: the p best)
    retrieval: int = 0  #: the copy alone: the datastore's draft beside the copy, up to this many tokens
    #: for sampling: the temperature the gains are for (the tree rule, lossless); None: greedy
    sampled_at: float | None = None
    gains: str = ""  #: for sampling: where the gains come from (measured, interpolated)

    def generate_kwargs(self, bundle) -> dict:
        """Arguments of ``bundle.model.generate(ids, max_new_tokens=..., do_sample=False, **these)``
        (for a sampled drafting, ``do_sample=True`` with the temperature)."""
        from ..hf import generate

        if self.drafter == PLAIN:
            return dict(custom_generate=generate, draft_step=bundle.step, draft_heads=None)
        kwargs = dict(
            custom_generate=generate,
            draft_step=bundle.step,
            draft_lookup=self.settings["lookup"],
            draft_lookup_tokens=self.copy_tokens,
            draft_datastore=bundle.datastore,
        )
        sample = {} if self.sampled_at is None else {"draft_sample": "tree"}
        if self.drafter == COPY:
            return {**kwargs, **sample, "draft_heads": None, "draft_retrieval": self.retrieval}
        tree = {"draft_p": self.p} if self.nodes is None else {"draft_nodes": self.nodes}
        heads = dict(draft_heads=bundle.heads, draft_lm=bundle.lm, **tree)
        return {**kwargs, **heads, **sample, "draft_k": self.settings["k"], "draft_alpha": self.settings["alpha"]}

    def describe(self) -> str:
        """One line: the choice, its prediction and the others'."""
        others = ", ".join(f"{label} {tokens:.0f}" for label, tokens in self.candidates)
        sampled = self.sampled_at is not None
        if sampled:
            others += f" ({self.gains})"
        head = "fastest sampling here" if sampled else "fastest drafting here"
        if self.drafter == PLAIN:
            return (
                f"{head}: none (plain {'sampling' if sampled else 'decoding'} on the lean step), predicted "
                f"{self.predicted:.0f} tokens/s; weighed: {others}"
            )
        if self.drafter == COPY:
            chosen = f"{self.drafter} (copies of <= {self.copy_tokens}{retrieval_label(self.retrieval)})"
        else:
            chosen = f"{self.drafter} " + (f"p={self.p}" if self.nodes is None else f"nodes={self.nodes}")
        return (
            f"{head}: {chosen}, predicted {self.predicted:.0f} tokens/s against plain "
            f"{'sampling' if sampled else 'decoding'}'s {self.plain:.0f}; weighed: {others}"
        )


def fastest_drafting(
    bundle,
    table: str | os.PathLike[str] | None = None,
    curve=None,
    sampling: bool = False,
    temperature: float = 1.0,
) -> Drafting:
    """The drafting of the most predicted tokens/s (a tie, :data:`~draftlattice.lean.fit.TIE`,
    going to more tokens a call for no more nodes) for ``bundle`` (a :class:`DefaultModel` loaded
    with ``weights=``: its lean step is what is timed) on this machine; plain decoding unless a
    drafting predicts :data:`DRAFTS_MARGIN` times its tokens/s.

    ``table``: the drafters' gains (default: the shipped ``draft_budget.json``); ``curve``: the
    step's :class:`~draftlattice.lean.fit.CostCurve` (default: measured once per machine, a few
    seconds, then cached); ``sampling``: for ``do_sample=True`` at ``temperature`` (generate()'s
    default 1.0): the lattice's tree of best prefixes with the copy, or the copy alone, under the
    tree rule, or plain sampling, from the table's ``sampled`` gains at that temperature
    (acceptance falls as it rises; :func:`draftlattice.lean.sampled_gains.gains_at`)."""
    from ..lean.fit import DraftOption, cached_cost_curve, fastest_of, load_options, predicted_tokens_per_s
    from ..lean.sampled_gains import gains_at
    from .artifacts import artifacts_dir

    if bundle.step is None:
        raise ValueError("fastest_drafting times the lean step: load_default(weights='int4') (or 'int8', 'dense')")
    path = Path(table) if table is not None else artifacts_dir() / BUDGET_TABLE
    settings = table_settings(path)
    curve = curve if curve is not None else cached_cost_curve(bundle.step)
    if sampling:
        gains = gains_at(path, temperature)
        sampled_at, plain_host, copies = temperature, gains.plain_host_ms, gains.copy_options
        weighed = [(f"{TREE} {o.tree}", TREE, o) for o in gains.node_options]
    else:
        sampled_at, plain_host, copies = None, _plain_host_ms(path), load_options(path, "copy_options")
        weighed = [(f"{TREE} {o.tree}", TREE, o) for o in load_options(path) + load_options(path, "node_options")]
    weighed += [(f"{COPY} <= {o.copy_tokens}{retrieval_label(o.retrieval)}", COPY, o) for o in copies]
    if not weighed:
        raise ValueError(f"{path}: no draft options to choose from")
    plain = DraftOption(1, 1.0, 1.0, plain_host)
    weighed.append((PLAIN, PLAIN, plain))
    predictions = [
        (label, drafter, option, predicted_tokens_per_s(curve, option)) for label, drafter, option in weighed
    ]
    _, drafter, option, predicted = predictions[fastest_of([(row[3], row[2]) for row in predictions])]
    if drafter != PLAIN and predicted < DRAFTS_MARGIN * predictions[-1][3]:
        _, drafter, option, predicted = predictions[-1]  # plain decoding: too close to call
    return Drafting(
        drafter=drafter,
        p=option.p if drafter == TREE and option.node_budget is None else None,
        copy_tokens=option.copy_tokens if drafter == COPY else option.tree_copy_tokens or settings["copy_tokens"],
        predicted=predicted,
        plain=predicted_tokens_per_s(curve, plain),
        candidates=tuple((label, tokens) for label, _, _, tokens in predictions),
        settings=settings,
        nodes=option.node_budget if drafter == TREE else None,
        retrieval=option.retrieval if drafter == COPY else 0,
        sampled_at=sampled_at,
        gains=gains.describe() if sampling else "",
    )


def fastest_same_bits_step(bundle, build, table: str | os.PathLike[str] | None = None):
    """``bundle.step``, or the same step on another kernel that gives its bits
    (:func:`draftlattice.lean.lowbit.same_bits_kernels`: the AMX kernel beside the VNNI one)
    where this machine's fastest drafting (:func:`fastest_drafting`; plain decoding's cost where
    there is no ``table``) is predicted faster on it. ``build(kernel)`` makes the step on
    ``kernel``. Each step's cost is measured once per machine and cached.

    Why measured, not ranked: the AMX kernel's tiles multiply 16 rows for the price of a few, but
    each group's sums come back through a tile store into the VNNI kernel's float terms, so
    whether it beats the VNNI kernel, and at how many nodes, is the CPU's to say; outputs are the
    same either way."""
    from ..lean.fit import cached_cost_curve
    from ..lean.lowbit import same_bits_kernels

    step = bundle.step
    if step is None or step.weights == "dense" or len(kernels := same_bits_kernels(step.kernel)) == 1:
        return step

    def rate(candidate) -> float:
        try:
            return fastest_drafting(dataclasses.replace(bundle, step=candidate), table).predicted
        except (OSError, ValueError):  # no gains table: plain decoding's cost decides
            return 1e3 / cached_cost_curve(candidate)(1)

    rated = [(rate(step), step)]
    rated += [(rate(other), other) for other in map(build, kernels[1:])]
    _, best = max(rated, key=lambda pair: pair[0])
    logger.info(
        "lean step on the %s kernel: predicted %s tokens/s (kernels giving the same bits)",
        best.kernel,
        ", ".join(f"{candidate.kernel} {tokens:.0f}" for tokens, candidate in rated),
    )
    return best


def retrieval_label(retrieval: int) -> str:
    """What a copy option's retrieval branch adds to its label ("" for none)."""
    return f" + the datastore's <= {retrieval}" if retrieval else ""


def _plain_host_ms(path: Path) -> float:
    """Plain decoding's host time a token in the table (0 in a table from before it was measured:
    the plain step's own loop costs little beside a drafted one's)."""
    entry = json.loads(path.read_text()).get("plain")
    if entry is None:
        return 0.0
    try:
        return float(entry["host_ms"])
    except (TypeError, KeyError, ValueError):
        raise ValueError(f"{path}: plain decoding's entry has no host_ms number: {entry!r}") from None


def table_settings(path: Path) -> dict:
    """The drafter settings the table was measured with."""
    try:
        settings = json.loads(path.read_text())["settings"]
        return {
            "k": int(settings["k"]),
            "alpha": float(settings["alpha"]),
            "lookup": int(settings["lookup"]),
            "copy_tokens": int(settings["copy_tokens"]),
        }
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"{path}: no drafter settings (k, alpha, lookup, copy_tokens) in this draft budget table ({error}); "
            "bench/draft_budget.py writes them"
        ) from None
