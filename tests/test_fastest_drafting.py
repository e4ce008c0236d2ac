"""The default model's fastest drafting (draftlattice.default_model.fastest): the choice follows
the step's cost (the copy alone where extra tokens cost arithmetic, the widest tree where they
are nearly free), its generate() arguments decode exactly, and bad input is refused clearly."""

from __future__ import annotations

import json

import pytest
import torch

from _engine_models import trained
from _hf_models import greedy, own_ngram
from draftlattice import Datastore
from draftlattice.default_model import DefaultModel
from draftlattice.default_model.fastest import COPY, TREE, fastest_drafting
from draftlattice.default_model.load import artifacts_dir
from draftlattice.lean import LeanLlama
from draftlattice.lean.fit import CostCurve

pytestmark = pytest.mark.usefixtures("one_thread")

SHIPPED = artifacts_dir() / "draft_budget.json"
# ms per step by nodes: int4 weights on 2 AVX-512 cores (every extra token adds arithmetic) and a
# step whose cost hardly grows (AMX, a GPU)
STEEP = CostCurve((1, 2, 4, 8, 16, 32), (4.1, 4.3, 6.2, 7.9, 14.1, 25.9))
FLAT = CostCurve((1, 8, 16, 32), (10.0, 10.2, 10.4, 10.8))
PROMPTS = [[3, 4, 5, 6, 3, 4], [7, 8, 9, 7, 8], [10, 20, 30, 40, 10, 20, 30]]


class _Bundle:
    step = object()  # never timed: every test passes its curve


def test_the_copy_alone_wins_where_extra_tokens_cost_and_the_widest_tree_where_they_do_not():
    steep = fastest_drafting(_Bundle(), SHIPPED, STEEP)
    assert steep.drafter == COPY and steep.p is None
    flat = fastest_drafting(_Bundle(), SHIPPED, FLAT)
    options = json.loads(SHIPPED.read_text())["options"]
    assert flat.drafter == TREE and flat.p >= 8  # wide trees (their host time grows a little with p)
    for choice in (steep, flat):
        assert choice.predicted == max(tokens for _, tokens in choice.candidates)
        assert len(choice.candidates) == len(options) + len(json.loads(SHIPPED.read_text())["copy_options"])
    assert steep.plain == pytest.approx(1e3 / 4.1)
    assert "fastest drafting here: lookup" in steep.describe()


def test_its_generate_arguments_decode_exactly(tmp_path):
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
        datastore=Datastore.from_records(records, min_ngram=1),
    )
    table = json.loads(SHIPPED.read_text())
    table["settings"] = {"k": 4, "alpha": 0.5, "lookup": 2, "copy_tokens": 5}
    path = tmp_path / "budget.json"
    path.write_text(json.dumps(table))
    for curve, drafter in ((STEEP, COPY), (FLAT, TREE)):
        choice = fastest_drafting(bundle, path, curve)
        assert choice.drafter == drafter
        kwargs = choice.generate_kwargs(bundle)
        assert kwargs["draft_step"] is bundle.step and kwargs["draft_datastore"] is bundle.datastore
        if drafter == TREE:
            assert kwargs["draft_heads"] is heads and kwargs["draft_lm"] is bundle.lm
            assert (kwargs["draft_p"], kwargs["draft_k"], kwargs["draft_lookup_tokens"]) == (choice.p, 4, 5)
        else:
            assert kwargs["draft_heads"] is None and kwargs["draft_lookup_tokens"] == choice.copy_tokens
        for prompt in PROMPTS:
            ids = torch.tensor([prompt])
            out = model.generate(ids, max_new_tokens=15, do_sample=False, return_dict_in_generate=True, **kwargs)
            assert out.sequences.tolist() == greedy(model, ids, max_new_tokens=15).tolist(), (drafter, prompt)
        assert out.draft_stats.mean_nodes > 1  # drafts were verified


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
                "copy_options": [],
            }
        )
    )
    with pytest.raises(ValueError, match="no draft options"):
        fastest_drafting(_Bundle(), empty, STEEP)
