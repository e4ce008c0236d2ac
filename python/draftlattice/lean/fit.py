"""Fitting the drafts to the hardware: how many drafts a step should verify on this machine.

A step's cost against the tokens it verifies depends on the CPU: on one with AMX, sixteen tokens
cost about 1.2x one in bf16; on AVX2/AVX512 machines weight-only int4 makes one token cheap but
every extra token adds compute. The drafts gain tokens per call with diminishing returns as p
grows. So the best p is ``argmax_p tokens_per_call(p) / (cost(nodes(p)) + host_ms(p))``
(Sequoia's hardware-aware choice, over the drafter's p): ``tokens_per_call`` and ``nodes`` come
from a table measured once per drafter on held-out prompts (they do not depend on the machine),
the cost curve is measured here in a few seconds and cached per machine, step and thread count.
The same choice fits the context copy's longest draft when it drafts alone (``copy_options``:
one per length; a step without a copy verifies one token) and beside the tree (each tree option
names the copy it was measured with: a long copy adds nodes that cost where nodes cost).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch

logger = logging.getLogger(__name__)

CURVE_NODES = (1, 2, 4, 8, 12, 16, 24, 32)
CURVE_CONTEXT = 64  #: cached tokens behind the measured steps (a typical prompt)
CURVE_REPEATS = 5
#: How the curve is measured (part of its cache key: a curve measured another way is measured again)
CURVE_METHOD = "median of steps right after one of the same size"
CACHE_NAME = "step-costs.json"


@dataclass(frozen=True)
class CostCurve:
    """Milliseconds per step against the tokens it verifies (``ms[i]`` at ``nodes[i]``)."""

    nodes: tuple[int, ...]
    ms: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.nodes) != len(self.ms) or len(self.nodes) < 2 or list(self.nodes) != sorted(set(self.nodes)):
            raise ValueError(f"a cost curve needs >= 2 increasing node counts with a time each, got {self.nodes}")

    def __call__(self, nodes: float) -> float:
        """Linear interpolation; past the last point, the last segment's slope."""
        xs, ys = self.nodes, self.ms
        i = 1
        while i < len(xs) - 1 and nodes > xs[i]:
            i += 1
        slope = (ys[i] - ys[i - 1]) / (xs[i] - xs[i - 1])
        return ys[i - 1] + slope * (max(nodes, xs[0]) - xs[i - 1])


@dataclass(frozen=True)
class DraftOption:
    """One drafter setting, measured on held-out prompts: tokens per target call, tokens
    verified per call, and the host's drafting time per call (ms)."""

    p: int
    tokens_per_call: float
    nodes: float
    host_ms: float = 0.0
    copy_tokens: int | None = None  #: the copy's longest draft, for the copy drafting alone
    #: the tree of the lattice's best prefixes (draft_nodes) instead of its p best drafts
    node_budget: int | None = None
    #: the copy alone: the datastore's draft beside the context's copy, up to this many tokens
    retrieval: int = 0
    #: the lattice's tree: the longest draft copied beside it (None: the table's settings say)
    tree_copy_tokens: int | None = None

    @property
    def tree(self) -> str:
        """How the lattice's tree is chosen: ``"p=P"`` or ``"nodes=N"``, and the copy beside it
        where the option names one (``" copy<=C"``)."""
        tree = f"p={self.p}" if self.node_budget is None else f"nodes={self.node_budget}"
        return tree if self.tree_copy_tokens is None else f"{tree} copy<={self.tree_copy_tokens}"


def predicted_tokens_per_s(curve: CostCurve, option: DraftOption) -> float:
    return 1e3 * option.tokens_per_call / (curve(option.nodes) + option.host_ms)


#: Predictions within this fraction of the best are a tie, which an option verifying no more
#: nodes (within the same fraction) and accepting more tokens a call wins: tokens and nodes a call
#: are counted exactly, host times carry the machine's noise (the same option's host time moved
#: by 0.2 ms between two runs of bench/draft_budget.py). More nodes stay the prediction's call:
#: on a CPU each costs arithmetic that the cost curve may underrate.
TIE = 0.02


def fastest_of(rated: list[tuple[float, DraftOption]]) -> int:
    """The index in ``rated`` (``(predicted tokens/s, option)`` pairs) of the fastest, ties
    (:data:`TIE`) going to more tokens a call for no more nodes."""
    best = max(range(len(rated)), key=lambda i: rated[i][0])
    rate, option = rated[best]
    tied = [
        i
        for i, (other_rate, other) in enumerate(rated)
        if other_rate >= (1 - TIE) * rate and other.nodes <= (1 + TIE) * option.nodes
    ]
    return max(tied, key=lambda i: (rated[i][1].tokens_per_call, rated[i][0]))


def best_option(curve: CostCurve, options: list[DraftOption]) -> DraftOption:
    """The option of the highest predicted tokens/s on ``curve`` (:func:`fastest_of`)."""
    if not options:
        raise ValueError("no draft options to choose from")
    return options[fastest_of([(predicted_tokens_per_s(curve, o), o) for o in options])]


def best_format_and_option(curves: dict[str, CostCurve], options: list[DraftOption]) -> tuple[str, DraftOption, float]:
    """The (weight format, option) pair of the highest predicted tokens/s (:func:`fastest_of`),
    and that prediction: the format changes the cost curve (int4 is cheap for one token and steep;
    bf16 on a CPU with AMX is dear for one token and flat), the option the tokens a call gains."""
    if not curves or not options:
        raise ValueError("no weight formats or no draft options to choose from")
    pairs = [(name, option) for name in curves for option in options]
    rated = [(predicted_tokens_per_s(curves[name], option), option) for name, option in pairs]
    best = fastest_of(rated)
    return pairs[best][0], pairs[best][1], rated[best][0]


def measure_cost_curve(step, nodes=CURVE_NODES, repeats: int = CURVE_REPEATS) -> CostCurve:
    """The lean ``step``'s cost against nodes here: one verification forward of n tokens after
    :data:`CURVE_CONTEXT` cached ones, logits included; the median of ``repeats`` after a pass of
    warm-up (the curve is cached for the machine, so a busy moment must not become its cost)."""
    generator = torch.Generator().manual_seed(0)
    cache = step.new_cache(1, CURVE_CONTEXT + max(nodes))
    context = torch.randint(0, step.vocab_size, (1, CURVE_CONTEXT), generator=generator).to(step.device)
    with torch.inference_mode():
        step.hidden(context, torch.arange(CURVE_CONTEXT, device=step.device).unsqueeze(0), None, cache)
        _curve_pass(step, cache, nodes, 1, generator)  # untimed: the first shapes pay allocations and caches
        ms = _curve_pass(step, cache, nodes, repeats, generator)
    return CostCurve(tuple(nodes), tuple(ms))


def _curve_pass(step, cache, nodes, repeats: int, generator) -> list[float]:
    """Milliseconds of a verification forward of each node count: the median of ``repeats``,
    each timed forward right after an untimed one of the same count (decoding runs its steps back
    to back: on the Zen 4 VM 4 tokens cost 1.28x one that way and 1.10x right after other counts'
    steps, and the engine's calls ran 1.30x; bench/RESULTS.md), the node counts taken in turn
    within each repeat (another job's load on the machine is not the step's cost, and a slow
    stretch of a few seconds then costs every count one repeat instead of costing one count all
    of them)."""
    inputs = []
    for n in nodes:
        tokens = torch.randint(0, step.vocab_size, (1, n), generator=generator).to(step.device)
        positions = torch.arange(CURVE_CONTEXT, CURVE_CONTEXT + n, device=step.device).unsqueeze(0)
        mask = torch.zeros(1, 1, n, CURVE_CONTEXT + n, dtype=step.dtype, device=step.device)
        inputs.append((tokens, positions, mask))
    seconds: list[list[float]] = [[] for _ in nodes]
    for _ in range(repeats):
        for i, (tokens, positions, mask) in enumerate(inputs):
            for timed in (False, True):
                cache.length = CURVE_CONTEXT
                start = time.perf_counter()
                step.logits(step.hidden(tokens, positions, mask, cache))
                if timed:
                    seconds[i].append(time.perf_counter() - start)
    return [1e3 * statistics.median(times) for times in seconds]


def machine_key(step) -> str:
    """What a cost curve depends on: CPU model and flags, torch, the build of draftlattice's
    kernels (a rebuilt core may run faster), threads, the step's format, kernel, fusion and shape, and
    how the curve is measured (:data:`CURVE_METHOD`)."""
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "flags")):
                    flags += line
                if line.startswith("flags"):
                    break
    except OSError:
        flags = platform.processor()
    parts = [flags, torch.__version__, _core_build(), str(torch.get_num_threads()), str(step.device), step.weights]
    parts += [str(step.dtype)]
    parts += [str(len(step.layers)), str(step.hidden_size), str(step.vocab_size)]
    parts += [str(getattr(step, "kernel", "")), str(getattr(step, "fused", False))]
    parts += [CURVE_METHOD]
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


@functools.cache
def _core_build() -> str:
    """A hash of the compiled core's file (its kernels time the step)."""
    from .. import _core

    try:
        return hashlib.sha256(Path(_core.__file__).read_bytes()).hexdigest()[:16]
    except (OSError, TypeError):
        return "unknown"


def cached_cost_curve(step, cache_file: str | os.PathLike[str] | None = None) -> CostCurve:
    """:func:`measure_cost_curve` once per machine key, kept in ``cache_file`` (default: the
    user cache's ``step-costs.json``; a file that cannot be read or written is measured around)."""
    if cache_file is None:
        from ..user_cache import cache_dir

        cache_file = cache_dir() / CACHE_NAME
    path, key = Path(cache_file), machine_key(step)
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    entry = known.get(key) if isinstance(known, dict) else None
    if isinstance(entry, dict):
        try:
            return CostCurve(tuple(entry["nodes"]), tuple(entry["ms"]))
        except (KeyError, TypeError, ValueError):
            pass
    start = time.perf_counter()
    curve = measure_cost_curve(step)
    logger.info(
        "step cost measured in %.1f s (%s weights): %s",
        time.perf_counter() - start,
        step.weights,
        ", ".join(f"{n}: {ms:.1f} ms" for n, ms in zip(curve.nodes, curve.ms)),
    )
    known = known if isinstance(known, dict) else {}
    known[key] = {"nodes": list(curve.nodes), "ms": list(curve.ms)}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(known, indent=1) + "\n")
        os.replace(tmp, path)
    except OSError as error:
        logger.warning("could not cache the step's cost curve in %s: %s", path, error)
    return curve


def load_options(path: str | os.PathLike[str], kind: str = "options") -> list[DraftOption]:
    """Draft options of a budget table (``bench/draft_budget.py`` writes them): the lattice
    drafter's by p (``kind="options"``), by the tree's node budget (``kind="node_options"``:
    its best prefixes), or the context copy's alone by its longest draft and its retrieval branch
    (``kind="copy_options"``; the last two none in an older table, nor a retrieval branch). A tree
    option may name the copy beside it (``copy_tokens``; older tables: their settings' one).
    Sampling's, by temperature: :func:`draftlattice.lean.sampled_gains.gains_at`."""
    try:
        return options_from(json.loads(Path(path).read_text()), kind)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{path}: not a draft budget table ({error})") from None


def options_from(table: dict, kind: str) -> list[DraftOption]:
    """:func:`load_options` of a table already read (or of one of its sampled entries)."""
    if kind in ("copy_options", "node_options") and kind not in table:
        return []
    return [
        DraftOption(
            int(o.get("p", 1)),
            float(o["tokens_per_call"]),
            float(o["nodes"]),
            float(o["host_ms"]),
            int(o["copy_tokens"]) if kind == "copy_options" else None,
            int(o["node_budget"]) if kind == "node_options" else None,
            int(o.get("retrieval", 0)) if kind == "copy_options" else 0,
            int(o["copy_tokens"]) if kind != "copy_options" and "copy_tokens" in o else None,
        )
        for o in table[kind]
    ]
