"""The default model's fastest drafting (draftlattice.default_model.fastest): the choice follows
the step's cost (the copy alone where extra tokens cost arithmetic, the widest tree where they
are nearly free, no drafts where even two tokens cost twice one), its generate() arguments decode
exactly, and bad input is refused clearly."""

from __future__ import annotations

import json

import pytest
import torch

from _engine_models import trained
from _hf_models import greedy, own_ngram
from draftlattice import Datastore
from draftlattice.default_model import DefaultModel
from draftlattice.default_model.fastest import COPY, PLAIN, TREE, fastest_drafting
from draftlattice.default_model.load import artifacts_dir
from draftlattice.lean import LeanLlama
from draftlattice.lean.fit import TIE, CostCurve

pytestmark = pytest.mark.usefixtures("one_thread")

SHIPPED = artifacts_dir() / "draft_budget.json"
# ms per step by nodes: int4 weights on 2 AVX-512 cores (every extra token adds arithmetic) and a
# step whose cost hardly grows (AMX, a GPU)
STEEP = CostCurve((1, 2, 4, 8, 16, 32), (4.1, 4.3, 6.2, 7.9, 14.1, 25.9))
FLAT = CostCurve((1, 8, 16, 32), (10.0, 10.2, 10.4, 10.8))
LINEAR = CostCurve((1, 2, 4, 8, 16, 32), (4.0, 8.0, 16.0, 32.0, 64.0, 128.0))  # every token costs one step's
CHEAP_FEW = CostCurve((1, 4, 8, 16, 32), (4.0, 4.1, 12.0, 24.0, 48.0))  # a few tokens cost one, then each a lot
PROMPTS = [[3, 4, 5, 6, 3, 4], [7, 8, 9, 7, 8], [10, 20, 30, 40, 10, 20, 30]]


class _Bundle:
    step = object()  # never timed: every test passes its curve


def test_the_copy_alone_wins_where_extra_tokens_cost_and_the_widest_tree_where_they_do_not():
    steep = fastest_drafting(_Bundle(), SHIPPED, STEEP)
    assert steep.drafter == COPY and steep.p is None
    flat = fastest_drafting(_Bundle(), SHIPPED, FLAT)
    table = json.loads(SHIPPED.read_text())
    # wide trees (their host time grows a little with their size): many best prefixes, or many drafts
    assert flat.drafter == TREE and ((flat.nodes or 0) >= 16 or (flat.p or 0) >= 8)
    assert (flat.p is None) != (flat.nodes is None)
    for choice in (steep, flat):
        assert choice.predicted >= (1 - TIE) * max(tokens for _, tokens in choice.candidates)  # a tie at most
        # every option of the table, and plain decoding
        kinds = ("options", "node_options", "copy_options")
        assert len(choice.candidates) == sum(len(table[kind]) for kind in kinds) + 1
    plain_host = json.loads(SHIPPED.read_text())["plain"]["host_ms"]
    assert steep.plain == pytest.approx(1e3 / (4.1 + plain_host))
    assert "fastest drafting here: lookup" in steep.describe()


def test_no_drafts_win_where_every_token_costs_a_step():
    choice = fastest_drafting(_Bundle(), SHIPPED, LINEAR)
    assert choice.drafter == PLAIN and choice.p is None
    assert choice.predicted == choice.plain == max(tokens for _, tokens in choice.candidates)
    assert "fastest drafting here: none (plain decoding on the lean step)" in choice.describe()


def _tiny_default(tmp_path, datastore: bool):
    """``(model, heads, bundle, table)``: a DefaultModel of the tiny model on a dense step, and the
    shipped gains table with settings that fit it."""
    model, heads = trained(next_token=True)
    records = [greedy(model, torch.tensor([p]), max_new_tokens=12)[0].tolist() for p in PROMPTS]
    bundle = DefaultModel(
        model=model,
        tokenizer=None,
        heads=heads,
        sampling_heads=None,
        lm=own_ngram(model, tmp_path, PROMPTS),
        folder=tmp_path,
        step=LeanLlama(model, "dense"),
        datastore=Datastore.from_records(records, min_ngram=1) if datastore else None,
    )
    table = json.loads(SHIPPED.read_text())
    table["settings"] = {"k": 4, "alpha": 0.5, "lookup": 2, "copy_tokens": 5}
    path = tmp_path / "budget.json"
    path.write_text(json.dumps(table))
    return model, heads, bundle, path


def test_its_generate_arguments_decode_exactly(tmp_path):
    model, heads, bundle, path = _tiny_default(tmp_path, datastore=True)
    for curve, drafter in ((STEEP, COPY), (FLAT, TREE), (LINEAR, PLAIN)):
        choice = fastest_drafting(bundle, path, curve)
        assert choice.drafter == drafter
        kwargs = choice.generate_kwargs(bundle)
        assert kwargs["draft_step"] is bundle.step
        assert kwargs.get("draft_datastore") is (None if drafter == PLAIN else bundle.datastore)
        if drafter == PLAIN:
            assert kwargs["draft_heads"] is None and "draft_lookup" not in kwargs
        elif drafter == TREE:
            assert kwargs["draft_heads"] is heads and kwargs["draft_lm"] is bundle.lm
            assert (kwargs.get("draft_p"), kwargs.get("draft_nodes")) == (choice.p, choice.nodes)
            assert kwargs["draft_k"] == 4 and kwargs["draft_lookup_tokens"] == choice.copy_tokens
        else:
            assert kwargs["draft_heads"] is None and kwargs["draft_lookup_tokens"] == choice.copy_tokens
        for prompt in PROMPTS:
            ids = torch.tensor([prompt])
            out = model.generate(ids, max_new_tokens=15, do_sample=False, return_dict_in_generate=True, **kwargs)
            assert out.sequences.tolist() == greedy(model, ids, max_new_tokens=15).tolist(), (drafter, prompt)
        # drafts were verified, or (plain) one token a step
        assert out.draft_stats.mean_nodes > 1 if drafter != PLAIN else out.draft_stats.mean_nodes == 1


def test_a_tree_option_drafts_beside_the_copy_it_was_measured_with(tmp_path):
    """Each tree option names the copy beside it (the fit weighs the same tree beside a short
    and a long copy); an option that names none takes the table's settings' copy."""
    table = json.loads(SHIPPED.read_text())
    tree = {"tokens_per_call": 3.0, "nodes": 4.0, "host_ms": 0.1}
    table.update(options=[], copy_options=[], node_options=[{"node_budget": 3, "copy_tokens": 2, **tree}])
    table["settings"] = {**table["settings"], "copy_tokens": 5}
    path = tmp_path / "budget.json"
    path.write_text(json.dumps(table))
    choice = fastest_drafting(_Bundle(), path, STEEP)
    assert (choice.drafter, choice.nodes, choice.copy_tokens) == (TREE, 3, 2)
    assert "ngram_lookup_tree nodes=3 copy<=2" in dict(choice.candidates)
    del table["node_options"][0]["copy_tokens"]
    path.write_text(json.dumps(table))
    assert fastest_drafting(_Bundle(), path, STEEP).copy_tokens == 5


def test_bad_input_is_refused_with_a_line_that_names_it(tmp_path):
    class NoStep:
        step = None

    with pytest.raises(ValueError, match="load_default\\(weights="):
        fastest_drafting(NoStep(), SHIPPED, STEEP)
    table = json.loads(SHIPPED.read_text())
    del table["settings"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(table))
    with pytest.raises(ValueError, match="old.json: no drafter settings"):
        fastest_drafting(_Bundle(), old, STEEP)
    empty = tmp_path / "empty.json"
    empty.write_text(
        json.dumps(
            {
                **table,
                "settings": {"k": 8, "alpha": 0.5, "lookup": 3, "copy_tokens": 6},
                "options": [],
                "node_options": [],
                "copy_options": [],
            }
        )
    )
    with pytest.raises(ValueError, match="no draft options"):
        fastest_drafting(_Bundle(), empty, STEEP)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({**json.loads(SHIPPED.read_text()), "plain": {"step_ms": 4.0}}))
    with pytest.raises(ValueError, match="broken.json: plain decoding's entry has no host_ms"):
        fastest_drafting(_Bundle(), broken, STEEP)


def test_no_drafts_on_the_step_decode_its_greedy_output_in_batches_too():
    """draft_step alone (draft_heads=None, no draft_lookup): plain greedy decoding on the step,
    one token a call, left-padded batches through the general loop (plain sampling on it:
    tests/test_plain_loop.py)."""
    from _hf_models import left_padded
    from draftlattice.hf import generate

    model, _ = trained(next_token=True)
    step = LeanLlama(model, "dense")
    ids, mask = left_padded(PROMPTS)
    kwargs = dict(custom_generate=generate, draft_step=step, draft_heads=None, return_dict_in_generate=True)
    out = model.generate(ids, attention_mask=mask, max_new_tokens=10, do_sample=False, pad_token_id=0, **kwargs)
    expected = greedy(model, ids, mask, max_new_tokens=10)
    assert out.sequences.tolist() == expected.tolist()
    stats = out.draft_stats
    assert (stats.mean_nodes, stats.tokens_per_call, stats.target_calls) == (1.0, 1.0, 10)  # a token a call


def test_a_drafting_within_the_margin_of_plain_decoding_is_not_chosen():
    """Drafts whose predicted gain is within DRAFTS_MARGIN of plain decoding lose to it: their
    tokens a call vary with the text, plain decoding's do not."""
    from draftlattice.default_model.fastest import DRAFTS_MARGIN

    ratios = []
    for slope in (0.2, 1.0, 1.6, 2.2, 2.8, 3.4, 4.0):
        curve = CostCurve((1, 2, 4, 8, 16, 32), tuple(4.0 + slope * (n - 1) for n in (1, 2, 4, 8, 16, 32)))
        choice = fastest_drafting(_Bundle(), SHIPPED, curve)
        best_drafted = max(tokens for label, tokens in choice.candidates if label != PLAIN)
        ratios.append(best_drafted / choice.plain)
        assert (choice.drafter == PLAIN) == (best_drafted < DRAFTS_MARGIN * choice.plain), slope
    assert min(ratios) < DRAFTS_MARGIN < max(ratios)  # both sides of the margin were seen


def test_the_retrieval_branch_is_chosen_where_its_extra_nodes_are_nearly_free(tmp_path):
    """Copy options with and without the datastore's branch beside the copy (more tokens a call,
    more nodes): the flat step takes the branch, the one whose nodes cost takes none; the
    chosen arguments pass it to generate()."""
    table = json.loads(SHIPPED.read_text())
    table["options"], table["node_options"] = [], []
    table["copy_options"] = [
        {"copy_tokens": 6, "retrieval": 0, "tokens_per_call": 1.77, "nodes": 5.6, "host_ms": 0.26},
        {"copy_tokens": 6, "retrieval": 3, "tokens_per_call": 1.86, "nodes": 6.34, "host_ms": 0.37},
    ]
    path = tmp_path / "budget.json"
    path.write_text(json.dumps(table))
    costly = CostCurve((1, 4, 8, 16), (4.0, 4.2, 8.0, 16.0))
    for curve, retrieval in ((FLAT, 3), (costly, 0)):
        choice = fastest_drafting(_Bundle(), path, curve)
        assert (choice.drafter, choice.retrieval) == (COPY, retrieval)
        bundle = _Bundle()
        bundle.datastore = object()
        assert choice.generate_kwargs(bundle)["draft_retrieval"] == retrieval
    assert "lookup <= 6 + the datastore's <= 3" in choice.describe()


def test_sampling_weighs_the_tree_rules_trees_against_plain_sampling(tmp_path):
    """sampling=True: the table's sampled gains at the temperature asked for (the tree of best
    prefixes with the copy, and the copy alone, under the tree rule) against plain sampling on
    the step; plain where every token costs a step, a tree where tokens are nearly free, the copy
    alone where a few cost little more than one; a table without them is refused with a line that
    says how to measure them."""
    table = json.loads(SHIPPED.read_text())
    sampled = next(entry for entry in table["sampled"] if entry["temperature"] == 0.7)
    steep = fastest_drafting(_Bundle(), SHIPPED, LINEAR, sampling=True, temperature=0.7)
    assert steep.drafter == PLAIN and steep.sampled_at == 0.7
    assert "fastest sampling here: none (plain sampling on the lean step)" in steep.describe()
    flat = fastest_drafting(_Bundle(), SHIPPED, FLAT, sampling=True, temperature=0.7)
    assert flat.drafter == TREE and flat.nodes is not None and flat.p is None
    assert len(flat.candidates) == len(sampled["node_options"]) + len(sampled["copy_options"]) + 1  # and plain
    assert "the tree rule's gains measured at T = 0.7" in flat.describe()
    assert flat.plain == pytest.approx(1e3 / (FLAT(1) + sampled["plain"]["host_ms"]))
    few = fastest_drafting(_Bundle(), SHIPPED, CHEAP_FEW, sampling=True, temperature=0.7)
    assert few.drafter == COPY and "fastest sampling here: lookup" in few.describe()
    del table["sampled"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(table))
    with pytest.raises(ValueError, match="old.json: no sampled gains: measure them with bench/draft_budget.py"):
        fastest_drafting(_Bundle(), old, FLAT, sampling=True)
    old.write_text(json.dumps({**table, "sampled": {"temperature": 0.7, "node_options": []}}))
    with pytest.raises(ValueError, match="no temperature or plain host_ms"):
        fastest_drafting(_Bundle(), old, FLAT, sampling=True)


def test_sampling_is_fitted_to_its_temperature():
    """A cooler law accepts more drafts: on a flat step the fastest drafting predicts more
    tokens/s at T = 0.3 than at generate()'s default 1.0, an interpolated temperature lies between
    its two measured ones, and the line says where the gains came from."""
    cool, mid, hot = (fastest_drafting(_Bundle(), SHIPPED, FLAT, sampling=True, temperature=t) for t in (0.3, 0.6, 1.0))
    assert cool.predicted > mid.predicted > hot.predicted
    assert fastest_drafting(_Bundle(), SHIPPED, FLAT, sampling=True).sampled_at == 1.0
    assert "between T = 0.5's and T = 0.7's" in mid.describe()
    hotter = fastest_drafting(_Bundle(), SHIPPED, FLAT, sampling=True, temperature=1.5)
    assert hotter.predicted == hot.predicted and "optimistic at T = 1.5" in hotter.describe()


def test_its_sampling_arguments_run_the_tree_rule_or_plain_sampling(tmp_path):
    model, _, bundle, path = _tiny_default(tmp_path, datastore=True)
    for curve, drafter in ((FLAT, TREE), (CHEAP_FEW, COPY), (LINEAR, PLAIN)):
        choice = fastest_drafting(bundle, path, curve, sampling=True, temperature=0.7)
        kwargs = choice.generate_kwargs(bundle)
        assert choice.drafter == drafter and kwargs.get("draft_sample") == (None if drafter == PLAIN else "tree")
        for seed, prompt in enumerate(PROMPTS):
            torch.manual_seed(seed)
            ids = torch.tensor([prompt])
            out = model.generate(
                ids, max_new_tokens=15, do_sample=True, temperature=0.7, return_dict_in_generate=True, **kwargs
            )
            assert out.sequences.shape == (1, len(prompt) + 15)
        stats = out.draft_stats
        assert stats.mean_nodes > 1 if drafter != PLAIN else stats.mean_nodes == 1
