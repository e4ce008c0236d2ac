"""What drafts gain under lossless sampling at a given temperature, from a draft budget table.

Why: the tree rule keeps a drafted token with the target's probability of it, so drafts are
accepted less often the hotter the law, and the fastest drafting at T = 0.3 is not the fastest at
T = 1.0. ``bench/draft_budget.py --temperature T ...`` measures the gains (tokens a call, nodes a
call, host time a call) at a few temperatures; between two of them they are interpolated linearly.
Below the coolest, the other end is greedy decoding (T -> 0, where the tree rule accepts exactly
the greedy path), taken from the same table's greedy entries (host time stays the sampled one's:
every sampled step draws). Above the hottest the hottest's gains are used, and said to be
optimistic. ``top_p`` and ``top_k`` narrow the law, which raises acceptance: the gains of the whole
law are a conservative estimate for them.
"""

from __future__ import annotations

import bisect
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path

from .fit import DraftOption, options_from

GREEDY = 0.0  #: the temperature of the greedy anchor


@dataclass(frozen=True)
class SampledGains:
    """The drafts' gains at ``temperature``: the tree of best prefixes by node budget, the copy
    alone by length, plain sampling's host time a token, and where they came from."""

    temperature: float
    node_options: list[DraftOption]
    copy_options: list[DraftOption]
    plain_host_ms: float
    #: the measured temperatures the gains come from (one, or the two around ``temperature``;
    #: 0.0 for the table's greedy entries)
    basis: tuple[float, ...]

    def describe(self) -> str:
        """Where the gains come from, for a line of output."""
        if len(self.basis) == 2:
            cool = "greedy's" if self.basis[0] == GREEDY else f"T = {self.basis[0]:g}'s"
            return f"the tree rule's gains at T = {self.temperature:g}, between {cool} and T = {self.basis[1]:g}'s"
        if self.temperature > self.basis[0]:
            return (
                f"the tree rule's gains at T = {self.basis[0]:g}, the hottest measured (optimistic at "
                f"T = {self.temperature:g}: fewer drafts are accepted as T rises)"
            )
        return f"the tree rule's gains measured at T = {self.temperature:g}"


def sampled_entries(path: str | os.PathLike[str]) -> list[dict]:
    """The table's sampled entries, coolest first (a table written before several temperatures
    has one entry as a dict)."""
    path = Path(path)
    entries = json.loads(path.read_text()).get("sampled")
    if entries is None:
        raise ValueError(
            f"{path}: no sampled gains: measure them with bench/draft_budget.py --temperature 0.3 0.5 0.7 1.0"
        )
    entries = [entries] if isinstance(entries, dict) else entries
    try:
        for entry in entries:
            float(entry["temperature"]), float(entry["plain"]["host_ms"])
    except (TypeError, KeyError, ValueError):
        raise ValueError(f"{path}: a sampled entry has no temperature or plain host_ms number") from None
    if not entries:
        raise ValueError(f"{path}: its sampled entries are empty")
    return sorted(entries, key=lambda entry: float(entry["temperature"]))


def gains_at(path: str | os.PathLike[str], temperature: float) -> SampledGains:
    """The tree rule's gains at ``temperature`` from the table at ``path`` (see the module's
    docstring for how they are interpolated)."""
    if not temperature > 0:
        raise ValueError(f"sampling needs a temperature > 0, got {temperature}")
    entries = sampled_entries(path)
    temperatures = [float(entry["temperature"]) for entry in entries]
    i = bisect.bisect_left(temperatures, temperature)
    if i == len(entries) or temperatures[i] == temperature:  # measured here, or hotter than all
        entry = entries[min(i, len(entries) - 1)]
        return SampledGains(
            temperature,
            _options(path, entry, "node_options"),
            _options(path, entry, "copy_options"),
            float(entry["plain"]["host_ms"]),
            (temperatures[min(i, len(entries) - 1)],),
        )
    hot = entries[i]
    hot_host = i == 0  # cooler than any measured: toward greedy's gains, with sampling's host time
    if hot_host:
        cool, t_cool = json.loads(Path(path).read_text()), GREEDY
        cool_copies = [o for o in _options(path, cool, "copy_options") if o.retrieval == 0]
    else:
        cool, t_cool = entries[i - 1], temperatures[i - 1]
        cool_copies = _options(path, cool, "copy_options")
    weight = (temperature - t_cool) / (temperatures[i] - t_cool)
    plain_hot = float(hot["plain"]["host_ms"])
    return SampledGains(
        temperature,
        _between(_options(path, cool, "node_options"), _options(path, hot, "node_options"), weight, hot_host),
        _between(cool_copies, _options(path, hot, "copy_options"), weight, hot_host),
        plain_hot if hot_host else _mix(float(cool["plain"]["host_ms"]), plain_hot, weight),
        (t_cool, temperatures[i]),
    )


def _options(path, table: dict, kind: str) -> list[DraftOption]:
    try:
        return options_from(table, kind)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise ValueError(f"{path}: not a draft budget table ({error})") from None


def _key(option: DraftOption) -> tuple:
    return (option.node_budget, option.copy_tokens, option.tree_copy_tokens)


def _between(cool: list[DraftOption], hot: list[DraftOption], weight: float, hot_host: bool) -> list[DraftOption]:
    """Options measured at both ends, each figure ``weight`` of the way from cool to hot."""
    cool_by_key = {_key(option): option for option in cool}
    mixed = []
    for option in hot:
        other = cool_by_key.get(_key(option))
        if other is None:
            continue
        mixed.append(
            replace(
                option,
                tokens_per_call=_mix(other.tokens_per_call, option.tokens_per_call, weight),
                nodes=_mix(other.nodes, option.nodes, weight),
                host_ms=option.host_ms if hot_host else _mix(other.host_ms, option.host_ms, weight),
            )
        )
    return mixed


def _mix(cool: float, hot: float, weight: float) -> float:
    return cool + weight * (hot - cool)
