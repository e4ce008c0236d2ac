"""The report's input: a JSON-able description of one decoding run, and its validation.

:func:`validate_run` checks a run against the TypedDicts below and returns a normalised copy
(histogram keys as ints, JSON's string keys accepted). Every error is a ``ValueError`` naming
the offending place, e.g. ``run.prompts[1].runs['ngram'].steps[3].chosen: 4 is out of range``.
Unknown keys are errors too, so a misspelt field is not silently ignored.
"""

from __future__ import annotations

import json
import math
import numbers
from typing import Any, TypedDict


class Agreement(TypedDict):
    """How far a row's outputs agree with the reference decode's (the demo: plain ``generate()``)."""

    outputs: tuple[int, int]  # [outputs equal to the reference's, outputs compared]
    tokens: tuple[int, int]  # [tokens before each output's first difference, the reference's tokens]


class _RowRequired(TypedDict):
    name: str
    block_efficiency: float  # generated tokens per serial call of the target
    tokens_per_s: float | None
    identical: bool | None  # output identical to plain greedy decoding; None: not checked
    accepted_histogram: dict[int, int]  # accepted draft length -> number of steps


class Row(_RowRequired, total=False):
    """One drafter row of the summary (the demo's table row)."""

    agreement: Agreement | None  # shown instead of a bare "no" when the outputs are not identical


class Step(TypedDict):
    """One decoding step: one serial call of the target.

    ``committed`` holds the tokens the step commits, in order: first the target's own tokens (the
    decoder's pending token, decided by the previous verification or the prefill), then the
    ``accepted`` tokens of the accepted draft, so ``committed[len(committed) - accepted:]`` is
    the accepted prefix. ``lattice`` holds heads 2..h: h-1 columns of k ``[token, probability]``
    candidates, best first. ``drafts_before`` are the p best drafts by the heads alone,
    ``drafts_after`` the drafts verified where they are not those (the p best after n-gram
    rescoring, or the paths of a tree of the lattice's best prefixes). ``chosen`` is the index in
    ``drafts_after`` (in ``drafts_before`` when ``drafts_after`` is null: a drafter that verifies
    the heads' own p best) of the draft whose prefix was accepted; that draft must start with the
    accepted tokens. Null fields: not recorded for this step (e.g. the prefill's first token).
    """

    committed: list[str]
    accepted: int
    lattice: list[list[tuple[str, float]]] | None
    drafts_before: list[list[str]] | None
    drafts_after: list[list[str]] | None
    chosen: int | None


class RowRun(TypedDict):
    steps: list[Step]


class Prompt(TypedDict):
    prompt: str  # the prompt text as the tokenizer decodes it
    runs: dict[str, RowRun]  # keyed by Row name; a row may be missing for a prompt


class Curves(TypedDict, total=False):
    oracle_topk: list[tuple[float, float]]  # [k, block efficiency of the oracle draft at top-k]
    pbest: list[tuple[float, float]]  # [p, block efficiency of the p best drafts]


class _RunRequired(TypedDict):
    title: str
    model: str
    settings: dict[str, Any]  # JSON-able values, shown as a table
    rows: list[Row]
    prompts: list[Prompt]


class Run(_RunRequired, total=False):
    curves: Curves | None  # eval reports: the oracle top-k and p-best curves
    notes: list[str]  # plain sentences under the summary table (e.g. why outputs can differ)


def validate_run(run: Any) -> Run:
    """``run`` checked against :class:`Run` and normalised; ``ValueError`` naming the place otherwise."""
    _keys(run, "run", required={"title", "model", "settings", "rows", "prompts"}, optional={"curves", "notes"})
    settings = _mapping(run["settings"], "run.settings")
    for key, value in settings.items():
        _text(key, f"run.settings key {key!r}")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ValueError(f"run.settings[{key!r}]: not JSON-able ({e})") from None
    rows = [_row(r, f"run.rows[{i}]") for i, r in enumerate(_list(run["rows"], "run.rows"))]
    if not rows:
        raise ValueError("run.rows: at least one row is needed")
    names = [r["name"] for r in rows]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"run.rows: the name {name!r} is used twice")
    prompts = [_prompt(p, f"run.prompts[{i}]", names) for i, p in enumerate(_list(run["prompts"], "run.prompts"))]
    out: Run = {
        "title": _text(run["title"], "run.title"),
        "model": _text(run["model"], "run.model"),
        "settings": dict(settings),
        "rows": rows,
        "prompts": prompts,
    }
    if run.get("curves") is not None:
        out["curves"] = _curves(run["curves"], "run.curves")
    if "notes" in run:
        out["notes"] = [_text(n, f"run.notes[{i}]") for i, n in enumerate(_list(run["notes"], "run.notes"))]
    return out


def _row(row: Any, where: str) -> Row:
    _keys(row, where, required=set(_RowRequired.__annotations__), optional={"agreement"})
    histogram = {}
    for key, count in _mapping(row["accepted_histogram"], f"{where}.accepted_histogram").items():
        length = _int(int(key) if isinstance(key, str) and key.isdecimal() else key, f"{where}.accepted_histogram key")
        histogram[length] = _int(count, f"{where}.accepted_histogram[{length}]")
    if row["identical"] is not None and not isinstance(row["identical"], bool):
        raise ValueError(f"{where}.identical: expected true, false or null, got {row['identical']!r}")
    out: Row = {
        "name": _text(row["name"], f"{where}.name", nonempty=True),
        "block_efficiency": _number(row["block_efficiency"], f"{where}.block_efficiency"),
        # None: not timed (a trace replay measures block efficiency only)
        "tokens_per_s": None if row["tokens_per_s"] is None else _number(row["tokens_per_s"], f"{where}.tokens_per_s"),
        "identical": row["identical"],
        "accepted_histogram": dict(sorted(histogram.items())),
    }
    if row.get("agreement") is not None:
        out["agreement"] = _agreement(row["agreement"], f"{where}.agreement")
    return out


def _agreement(value: Any, where: str) -> Agreement:
    _keys(value, where, required=set(Agreement.__annotations__))
    out = {}
    for key in ("outputs", "tokens"):
        pair = _list(value[key], f"{where}.{key}")
        if len(pair) != 2:
            raise ValueError(f"{where}.{key}: expected [agreeing, compared], got {pair!r}")
        agreeing, compared = (_int(x, f"{where}.{key}") for x in pair)
        if agreeing > compared:
            raise ValueError(f"{where}.{key}: {agreeing} agreeing of {compared} compared")
        out[key] = (agreeing, compared)
    return out  # type: ignore[return-value]


def _prompt(prompt: Any, where: str, names: list[str]) -> Prompt:
    _keys(prompt, where, required={"prompt", "runs"})
    runs = {}
    for name, row_run in _mapping(prompt["runs"], f"{where}.runs").items():
        if name not in names:
            raise ValueError(f"{where}.runs: {name!r} is not one of the rows {names}")
        here = f"{where}.runs[{name!r}]"
        _keys(row_run, here, required={"steps"})
        runs[name] = {
            "steps": [_step(s, f"{here}.steps[{j}]") for j, s in enumerate(_list(row_run["steps"], f"{here}.steps"))]
        }
    return {"prompt": _text(prompt["prompt"], f"{where}.prompt"), "runs": runs}


def _step(step: Any, where: str) -> Step:
    _keys(step, where, required=set(Step.__annotations__))
    committed = _tokens(step["committed"], f"{where}.committed")
    if not committed:
        raise ValueError(f"{where}.committed: a step commits at least one token")
    accepted = _int(step["accepted"], f"{where}.accepted")
    if accepted > len(committed):
        raise ValueError(f"{where}.accepted: {accepted} exceeds the {len(committed)} committed tokens")
    lattice = None
    if step["lattice"] is not None:
        lattice = [
            _column(c, f"{where}.lattice[{i}]") for i, c in enumerate(_list(step["lattice"], f"{where}.lattice"))
        ]
    before, after = (_drafts(step[key], f"{where}.{key}") for key in ("drafts_before", "drafts_after"))
    chosen = step["chosen"]
    if chosen is not None:
        chosen = _int(chosen, f"{where}.chosen")
        pool, key = (after, "drafts_after") if after is not None else (before, "drafts_before")
        if pool is None or chosen >= len(pool):
            size = "null" if pool is None else f"{len(pool)} drafts"
            raise ValueError(f"{where}.chosen: {chosen} is out of range ({key} is {size})")
        prefix = committed[len(committed) - accepted :]
        if pool[chosen][:accepted] != prefix:
            raise ValueError(
                f"{where}.chosen: {key}[{chosen}] = {pool[chosen]!r} does not start with the accepted tokens "
                f"{prefix!r} (the last {accepted} of committed)"
            )
    return {
        "committed": committed,
        "accepted": accepted,
        "lattice": lattice,
        "drafts_before": before,
        "drafts_after": after,
        "chosen": chosen,
    }


def _column(column: Any, where: str) -> list[tuple[str, float]]:
    out = []
    for r, cell in enumerate(_list(column, where)):
        if not isinstance(cell, (list, tuple)) or len(cell) != 2:
            raise ValueError(f"{where}[{r}]: expected [token, probability], got {cell!r}")
        prob = _number(cell[1], f"{where}[{r}] probability")
        if prob > 1.0 + 1e-6:
            raise ValueError(f"{where}[{r}] probability: {prob} exceeds 1")
        out.append((_text(cell[0], f"{where}[{r}] token"), min(prob, 1.0)))
    if not out:
        raise ValueError(f"{where}: a lattice column needs at least one candidate")
    return out


def _drafts(drafts: Any, where: str) -> list[list[str]] | None:
    if drafts is None:
        return None
    return [_tokens(d, f"{where}[{i}]") for i, d in enumerate(_list(drafts, where))]


def _curves(curves: Any, where: str) -> Curves:
    _keys(curves, where, required=set(), optional=set(Curves.__annotations__))
    out: Curves = {}
    for key in ("oracle_topk", "pbest"):
        if curves.get(key) is None:
            continue
        points = []
        for i, point in enumerate(_list(curves[key], f"{where}.{key}")):
            if not isinstance(point, (list, tuple)) or len(point) != 2:
                raise ValueError(f"{where}.{key}[{i}]: expected [x, value], got {point!r}")
            points.append((_number(point[0], f"{where}.{key}[{i}][0]"), _number(point[1], f"{where}.{key}[{i}][1]")))
        if not points:
            raise ValueError(f"{where}.{key}: a curve needs at least one point")
        out[key] = sorted(points)
    return out


def _keys(value: Any, where: str, *, required: set[str], optional: set[str] = frozenset()) -> None:
    _mapping(value, where)
    missing = sorted(required - value.keys())
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    unknown = sorted(str(k) for k in value.keys() - required - optional)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)} (expected {sorted(required | optional)})")


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected an object (dict), got {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list:
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"{where}: expected a list, got {type(value).__name__}")
    return list(value)


def _tokens(value: Any, where: str) -> list[str]:
    return [_text(t, f"{where}[{i}]") for i, t in enumerate(_list(value, where))]


def _text(value: Any, where: str, *, nonempty: bool = False) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{where}: expected a string, got {type(value).__name__} {value!r}")
    if nonempty and not value:
        raise ValueError(f"{where}: must not be empty")
    return value


def _int(value: Any, where: str) -> int:
    """A non-negative int (numpy integers accepted, returned as int)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise ValueError(f"{where}: expected a non-negative integer, got {value!r}")
    return int(value)


def _number(value: Any, where: str) -> float:
    """A finite non-negative float (ints and numpy scalars accepted)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where}: expected a finite non-negative number, got {value!r}")
    return float(value)
