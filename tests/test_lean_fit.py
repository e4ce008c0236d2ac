"""Fitting drafts to the hardware (draftlattice.lean.fit): the cost curve's interpolation, the
choice of p and weight format by predicted tokens/s, the per-machine cache of measured curves."""

from __future__ import annotations

import json

import pytest
import torch

from _hf_models import llama
from draftlattice.lean import LeanLlama, fit
from draftlattice.lean.fit import (
    TIE,
    CostCurve,
    DraftOption,
    best_format_and_option,
    best_option,
    cached_cost_curve,
    fastest_of,
    load_options,
    measure_cost_curve,
    predicted_tokens_per_s,
)

pytestmark = pytest.mark.usefixtures("one_thread")

FLAT = CostCurve((1, 8, 16), (20.0, 21.0, 22.0))  # an AMX-like bf16 step
STEEP = CostCurve((1, 8, 16), (10.0, 20.0, 40.0))  # an int4-like step
OPTIONS = [DraftOption(1, 1.5, 4.0, 2.0), DraftOption(4, 2.2, 12.0, 2.0)]


def test_the_curve_interpolates_and_extends_its_last_slope():
    assert STEEP(1) == 10.0 and STEEP(4.5) == pytest.approx(15.0) and STEEP(12) == pytest.approx(30.0)
    assert STEEP(24) == pytest.approx(60.0) and STEEP(0.5) == 10.0
    with pytest.raises(ValueError, match="increasing node counts"):
        CostCurve((4, 1), (1.0, 2.0))


def test_the_choice_follows_the_hardware():
    # steep: 1.5 tokens / 16.3 ms (92/s) beats 2.2 / 32 ms (69/s); flat: 2.2 / 23.5 ms (94/s)
    # beats 1.5 / 22.4 ms (67/s); across formats the flat curve's p = 4 wins by a little
    assert best_option(STEEP, OPTIONS).p == 1
    assert best_option(FLAT, OPTIONS).p == 4
    name, option, predicted = best_format_and_option({"int4": STEEP, "dense": FLAT}, OPTIONS)
    assert (name, option.p) == ("dense", 4)
    assert predicted == pytest.approx(predicted_tokens_per_s(FLAT, OPTIONS[1])) == pytest.approx(1e3 * 2.2 / 23.5)
    slower = CostCurve((1, 8, 16), (30.0, 31.0, 32.0))
    assert best_format_and_option({"int4": STEEP, "dense": slower}, OPTIONS)[:2] == ("int4", OPTIONS[0])
    with pytest.raises(ValueError, match="no draft options"):
        best_option(FLAT, [])


def test_a_measured_curve_is_cached_per_machine_and_format(tmp_path, monkeypatch):
    model = llama(seed=1, hidden_size=64, intermediate_size=128).to(torch.bfloat16)
    cache = tmp_path / "costs.json"
    dense = LeanLlama(model, "dense")
    first = cached_cost_curve(dense, cache)
    assert first.nodes[0] == 1 and all(ms > 0 for ms in first.ms)
    assert cached_cost_curve(dense, cache) == first  # read back, not measured again
    cached_cost_curve(LeanLlama(model, "int4"), cache)
    assert len(json.loads(cache.read_text())) == 2  # one entry per format
    monkeypatch.setattr(fit, "_core_build", lambda: "another build of the kernels")
    cached_cost_curve(dense, cache)
    assert len(json.loads(cache.read_text())) == 3  # a rebuilt core may run faster: measured again
    cache.write_text("not json")
    assert cached_cost_curve(dense, cache).nodes == first.nodes  # a bad file is measured around
    assert len(measure_cost_curve(dense, nodes=(1, 2), repeats=1).ms) == 2


def test_a_budget_table_is_read_or_refused(tmp_path):
    table = tmp_path / "budget.json"
    table.write_text(json.dumps({"options": [{"p": 2, "tokens_per_call": 2.1, "nodes": 8.0, "host_ms": 3.0}]}))
    assert load_options(table) == [DraftOption(2, 2.1, 8.0, 3.0)]
    assert load_options(table, "copy_options") == []  # a table from before the copy's options
    copies = [{"copy_tokens": 3, "tokens_per_call": 1.4, "nodes": 2.5, "host_ms": 0.5}]
    table.write_text(json.dumps({"options": [], "copy_options": copies}))
    assert load_options(table, "copy_options") == [DraftOption(1, 1.4, 2.5, 0.5, copy_tokens=3)]
    assert load_options(table, "node_options") == []  # a table from before the node budgets
    budgets = [{"node_budget": 8, "tokens_per_call": 2.6, "nodes": 12.6, "host_ms": 1.7}]
    table.write_text(json.dumps({"options": [], "node_options": budgets}))
    (option,) = load_options(table, "node_options")
    assert option == DraftOption(1, 2.6, 12.6, 1.7, node_budget=8) and option.tree == "nodes=8"
    # a tree option that names the copy beside it (older tables: their settings' copy)
    table.write_text(json.dumps({"options": [{**budgets[0], "p": 3, "copy_tokens": 2}], "node_options": []}))
    (option,) = load_options(table)
    assert option == DraftOption(3, 2.6, 12.6, 1.7, tree_copy_tokens=2) and option.tree == "p=3 copy<=2"
    assert option.copy_tokens is None  # the copy alone's field stays the copy alone's
    table.write_text(json.dumps({"rows": []}))
    with pytest.raises(ValueError, match="not a draft budget table"):
        load_options(table)
    table.write_text(json.dumps({"copy_options": [{"copy_tokens": 3}]}))
    with pytest.raises(ValueError, match="not a draft budget table"):
        load_options(table, "copy_options")
    table.write_text(json.dumps({"node_options": [{"tokens_per_call": 2.6, "nodes": 12.6, "host_ms": 1.7}]}))
    with pytest.raises(ValueError, match="not a draft budget table"):
        load_options(table, "node_options")


def test_a_tie_goes_to_the_option_that_accepts_more_tokens_a_call():
    """Host times carry the machine's noise, tokens and nodes a call are exact: an option
    predicted within TIE of the fastest, verifying no more nodes and accepting more tokens a call
    wins; beyond TIE, or for more nodes, the fastest does."""
    curve = CostCurve((1, 8), (4.0, 4.0))
    chain = DraftOption(1, 2.15, 5.8, 1.64)  # the faster prediction by a hair (a lower host time)
    tree = DraftOption(1, 2.20, 5.7, 1.87, node_budget=3)
    assert predicted_tokens_per_s(curve, chain) > predicted_tokens_per_s(curve, tree)
    assert best_option(curve, [chain, tree]) is tree
    assert best_format_and_option({"int4": curve}, [chain, tree])[1] is tree
    slow_tree = DraftOption(1, 2.20, 5.7, 2.5, node_budget=3)
    assert predicted_tokens_per_s(curve, slow_tree) < (1 - TIE) * predicted_tokens_per_s(curve, chain)
    assert best_option(curve, [chain, slow_tree]) is chain
    assert fastest_of([(100.0, chain), (99.0, tree), (50.0, slow_tree)]) == 1
    wider = DraftOption(1, 2.30, 6.5, 1.87, node_budget=4)  # more tokens, but for more nodes
    assert fastest_of([(100.0, chain), (99.0, wider)]) == 0


def test_the_copys_length_is_the_one_of_the_highest_predicted_rate():
    """Longer copies gain tokens but every step that offers one pays for its nodes: on a steep
    curve a short copy wins, on a flat one the longest."""
    copies = [DraftOption(1, 1.30, 2.0, 0.5, 2), DraftOption(1, 1.40, 3.0, 0.5, 4), DraftOption(1, 1.45, 5.0, 0.5, 8)]
    steep = CostCurve((1, 2, 4, 8), (4.0, 5.0, 8.0, 16.0))
    flat = CostCurve((1, 2, 4, 8), (4.0, 4.0, 4.1, 4.2))
    assert best_option(steep, copies).copy_tokens == 2
    assert best_option(flat, copies).copy_tokens == 8
