"""The tree rule's gains at a temperature (draftlattice.lean.sampled_gains): measured ones as
measured, between two measured temperatures linearly, below the coolest toward the table's greedy
gains (with sampling's host time), above the hottest the hottest's (said to be optimistic); a
table of one entry as written before several temperatures; bad tables and temperatures refused."""

from __future__ import annotations

import json

import pytest

from draftlattice.default_model.load import artifacts_dir
from draftlattice.lean.sampled_gains import gains_at, sampled_entries


def _option(tokens: float, nodes: float, host: float, **key) -> dict:
    return {**key, "tokens_per_call": tokens, "nodes": nodes, "host_ms": host}


def _entry(temperature: float, tokens: float, plain_host: float) -> dict:
    """A sampled entry whose options accept ``tokens`` a call (the copy a third fewer)."""
    return {
        "temperature": temperature,
        "node_options": [_option(tokens, 8.0, 2.0, node_budget=3), _option(tokens + 0.2, 12.0, 3.0, node_budget=8)],
        "copy_options": [_option(tokens - 0.5, 3.0, 0.8, copy_tokens=3)],
        "plain": {"host_ms": plain_host},
    }


GREEDY = {
    "node_options": [_option(2.4, 7.0, 1.6, node_budget=3), _option(2.7, 11.0, 2.6, node_budget=8)],
    "copy_options": [
        _option(1.8, 2.8, 0.3, copy_tokens=3, retrieval=0),
        _option(1.95, 4.0, 0.5, copy_tokens=3, retrieval=3),  # no sampled counterpart: not an anchor
    ],
}


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "draft_budget.json"
    path.write_text(json.dumps({**GREEDY, "sampled": [_entry(1.0, 1.4, 0.5), _entry(0.5, 1.8, 0.4)]}))
    return path


def _by_key(options):
    return {(o.node_budget, o.copy_tokens): (o.tokens_per_call, o.nodes, o.host_ms) for o in options}


def test_a_measured_temperature_gives_its_own_gains(table):
    gains = gains_at(table, 0.5)
    assert gains.basis == (0.5,) and gains.plain_host_ms == 0.4
    assert _by_key(gains.node_options) == {(3, None): (1.8, 8.0, 2.0), (8, None): (2.0, 12.0, 3.0)}
    assert _by_key(gains.copy_options) == {(None, 3): (1.3, 3.0, 0.8)}
    assert gains.describe() == "the tree rule's gains measured at T = 0.5"


def test_between_two_measured_temperatures_every_figure_is_interpolated(table):
    gains = gains_at(table, 0.625)  # a quarter of the way from 0.5 to 1.0
    assert gains.basis == (0.5, 1.0)
    assert gains.plain_host_ms == pytest.approx(0.425)
    tokens, nodes, host = _by_key(gains.node_options)[(3, None)]
    assert (tokens, nodes, host) == pytest.approx((1.7, 8.0, 2.0))
    assert _by_key(gains.copy_options)[(None, 3)] == pytest.approx((1.2, 3.0, 0.8))
    assert "between T = 0.5's and T = 1's" in gains.describe()


def test_below_the_coolest_the_gains_lead_to_greedy_ones_with_sampled_host_time(table):
    gains = gains_at(table, 0.25)  # half way from greedy (T -> 0) to 0.5
    assert gains.basis == (0.0, 0.5)
    assert gains.plain_host_ms == 0.4  # every sampled step draws: not greedy's host time
    assert _by_key(gains.node_options)[(3, None)] == pytest.approx((2.1, 7.5, 2.0))
    assert _by_key(gains.node_options)[(8, None)] == pytest.approx((2.35, 11.5, 3.0))
    # the greedy copy without a retrieval branch is the sampled copy's anchor
    copies = _by_key(gains.copy_options)
    assert list(copies) == [(None, 3)] and copies[(None, 3)] == pytest.approx((1.55, 2.9, 0.8))
    assert "between greedy's and T = 0.5's" in gains.describe()


def test_above_the_hottest_its_gains_are_used_and_called_optimistic(table):
    gains = gains_at(table, 1.5)
    assert gains.basis == (1.0,) and _by_key(gains.node_options)[(3, None)] == (1.4, 8.0, 2.0)
    assert "the hottest measured (optimistic at T = 1.5" in gains.describe()


def test_an_option_measured_at_one_end_only_is_left_out(tmp_path):
    cool, hot = _entry(0.5, 1.8, 0.4), _entry(1.0, 1.4, 0.5)
    hot["node_options"] = hot["node_options"][:1]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({**GREEDY, "sampled": [cool, hot]}))
    assert [o.node_budget for o in gains_at(path, 0.7).node_options] == [3]


def test_the_same_tree_beside_two_copies_is_two_options(tmp_path):
    """A node budget measured beside a short and a long copy: each is interpolated with its own
    counterpart (greedy's too, below the coolest), never with the other copy's."""

    def beside(entry: dict) -> dict:
        short, long = [{**o, "copy_tokens": 2} for o in entry["node_options"]], entry["node_options"]
        return {**entry, "node_options": short + [{**o, "copy_tokens": 6, "tokens_per_call": 9.0} for o in long]}

    path = tmp_path / "t.json"
    path.write_text(json.dumps({**beside(GREEDY), "sampled": [beside(_entry(0.5, 1.8, 0.4))]}))
    by_copy = {(o.node_budget, o.tree_copy_tokens): o.tokens_per_call for o in gains_at(path, 0.25).node_options}
    assert by_copy == {(3, 2): pytest.approx(2.1), (8, 2): pytest.approx(2.35), (3, 6): 9.0, (8, 6): 9.0}


def test_a_table_of_one_sampled_entry_as_written_before(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({**GREEDY, "sampled": _entry(0.7, 1.7, 0.38)}))
    assert [e["temperature"] for e in sampled_entries(path)] == [0.7]
    assert gains_at(path, 0.7).basis == (0.7,) and gains_at(path, 0.35).basis == (0.0, 0.7)


def test_the_shipped_table_accepts_fewer_drafts_as_the_temperature_rises():
    """The shipped entries' measured gains: the tree of 3 best prefixes (the copy joined) accepts
    fewer tokens a call the hotter the law, and greedy the most."""
    path = artifacts_dir() / "draft_budget.json"
    entries = sampled_entries(path)
    assert len(entries) >= 3
    greedy = json.loads(path.read_text())["node_options"]
    tokens = [next(o["tokens_per_call"] for o in greedy if o["node_budget"] == 3)]
    tokens += [next(o["tokens_per_call"] for o in e["node_options"] if o["node_budget"] == 3) for e in entries]
    assert tokens == sorted(tokens, reverse=True)


@pytest.mark.parametrize(
    "sampled, temperature, message",
    [
        (None, 0.7, "no sampled gains: measure them with bench/draft_budget.py --temperature"),
        ([], 0.7, "its sampled entries are empty"),
        ([{"node_options": []}], 0.7, "a sampled entry has no temperature or plain host_ms number"),
        ([{"temperature": 0.7, "plain": {}}], 0.7, "a sampled entry has no temperature or plain host_ms number"),
        ([{"temperature": 0.7, "plain": {"host_ms": 0.4}, "node_options": [{}]}], 0.7, "not a draft budget table"),
        ([_entry(0.7, 1.7, 0.4)], 0.0, "sampling needs a temperature > 0, got 0.0"),
        ([_entry(0.7, 1.7, 0.4)], float("nan"), "sampling needs a temperature > 0, got nan"),
    ],
)
def test_bad_tables_and_temperatures_are_refused(tmp_path, sampled, temperature, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(GREEDY if sampled is None else {**GREEDY, "sampled": sampled}))
    with pytest.raises(ValueError, match=message):
        gains_at(path, temperature)
