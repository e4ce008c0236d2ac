"""The engine's loop for one greedy row on a lean step (draftlattice.decode.row_loop): one draft
a step (a chain) or several (a tree), the same outputs and statistics as the general loop, run on
the same step with the row loop switched off, and generate()'s output in float32."""

from __future__ import annotations

import functools

import pytest
import torch

import draftlattice.hf as dlhf
from _engine_models import trained
from _hf_models import greedy, left_padded, llama, own_ngram
from draftlattice import Datastore
from draftlattice.decode import Engine, LatticeDrafter, RowStopper, row_loop
from draftlattice.decode.drafters.lookup import ContextLookup
from draftlattice.lean import LeanLlama

pytestmark = pytest.mark.usefixtures("one_thread")

# Prompts that repeat themselves, so that copies are found (and some are right).
PROMPTS = [[3, 4, 5, 6, 3, 4], [7, 8, 9, 7, 8], [1, 2, 1, 2, 1], [10, 20, 30, 40, 10, 20, 30], [5, 6]]
QUANTIZABLE = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2)


def _run(model, step, prompt, new, monkeypatch, fast: bool, eos=(), datastore=None, length: int = 4, retrieval=0):
    monkeypatch.setattr(row_loop, "applies", _applies if fast else lambda *a: False)
    ids = torch.tensor([prompt])
    engine = Engine(model, None, ContextLookup(None, 2, length, datastore, retrieval), step=step)
    stopper = RowStopper(ids, new, set(eos), [], 0)
    tokens, stats = engine.run(ids, stopper, max_length=len(prompt) + new)
    return tokens, stats


_applies = row_loop.applies
_TAKEN = []


@pytest.fixture
def counted(monkeypatch):
    """Records each call the row loop takes."""
    decode = row_loop.decode

    def counting(*args):
        _TAKEN.append(1)
        return decode(*args)

    _TAKEN.clear()
    monkeypatch.setattr(row_loop, "decode", counting)
    return _TAKEN


@pytest.mark.parametrize("weights", ["dense", "int4"])
def test_the_row_loop_equals_the_general_loop(monkeypatch, counted, weights):
    model = llama(seed=4, **QUANTIZABLE) if weights == "int4" else llama(seed=4)
    step = LeanLlama(model, weights)
    records = [greedy(model, torch.tensor([p]), max_new_tokens=12)[0].tolist() for p in PROMPTS]
    store = Datastore.from_records(records, min_ngram=1)
    for prompt in PROMPTS:
        for new, eos, datastore, length, retrieval in (
            (1, (), None, 4, 0),
            (17, (), None, 4, 0),
            (17, (7,), store, 3, 0),
            (23, (), store, 6, 0),
            (23, (), store, 6, 3),  # the datastore's draft beside the copy: two branches
        ):
            general = _run(model, step, prompt, new, monkeypatch, False, eos, datastore, length, retrieval)
            taken = len(counted)
            fast = _run(model, step, prompt, new, monkeypatch, True, eos, datastore, length, retrieval)
            assert len(counted) == taken + 1  # the row loop ran
            assert fast[0] == general[0], (prompt, new, eos)
            a = fast[1]
            assert _counters(a) == _counters(general[1]), (prompt, new)
            assert 0 < a.forward_seconds <= a.verification_seconds or a.steps == 0


def test_the_row_loop_decodes_generates_output_through_the_plugin(counted):
    model = llama(seed=4)
    step = LeanLlama(model, "dense")
    for prompt in PROMPTS:
        ids = torch.tensor([prompt])
        out = _copying_generate(model, ids, step, 19, return_dict_in_generate=True)
        assert out.sequences.tolist() == greedy(model, ids, max_new_tokens=19).tolist(), prompt
    assert len(counted) == len(PROMPTS)
    assert out.draft_stats.tokens_per_call > 1.0  # copies were accepted


def test_the_general_loop_runs_where_the_row_loop_does_not_apply(counted):
    model = llama(seed=4)
    step = LeanLlama(model, "dense")
    ids, mask = left_padded(PROMPTS[:2])
    for extra in ({"attention_mask": mask}, {"draft_streamer": _Streamer()}):
        batch = ids if "attention_mask" in extra else ids[:1]
        out = _copying_generate(model, batch, step, 9, **extra)
        assert out.tolist() == greedy(model, batch, extra.get("attention_mask"), max_new_tokens=9).tolist()
    assert not counted


def _copying_generate(model, ids, step, new: int, **extra):
    """The plug-in's greedy generate() with the copy alone on ``step``."""
    kwargs = dict(custom_generate=dlhf.generate, draft_heads=None, draft_lookup=2, draft_step=step)
    return model.generate(ids, max_new_tokens=new, do_sample=False, **kwargs, **extra)


class _Streamer:
    def put(self, value) -> None:
        pass

    def end(self) -> None:
        pass


@pytest.mark.parametrize("next_token", [False, True])
def test_one_lattice_draft_a_step_equals_the_general_loop(monkeypatch, counted, tmp_path, next_token):
    """The heads' 1-best and the LM-rescored best path (p = 1), heads fused into the target's
    projection (plain heads) or run after it (heads that read the next token)."""
    model, heads = trained(next_token=next_token)
    step = LeanLlama(model, "dense")
    lm = own_ngram(model, tmp_path, PROMPTS)
    for drafter_lm in (None, lm):
        for prompt in PROMPTS:
            runs = []
            for fast in (False, True):
                monkeypatch.setattr(row_loop, "applies", _applies if fast else lambda *a: False)
                ids = torch.tensor([prompt])
                engine = Engine(model, heads, LatticeDrafter(drafter_lm, k=4, p=1), step=step)
                runs.append(engine.run(ids, RowStopper(ids, 21, set(), [], 0), max_length=len(prompt) + 21))
            (tokens_a, a), (tokens_b, b) = runs
            assert tokens_a == tokens_b == [greedy(model, ids, max_new_tokens=21)[0, len(prompt) :].tolist()]
            assert _counters(a) == _counters(b), (prompt, drafter_lm)
    assert len(counted) == 2 * len(PROMPTS)
    assert b.tokens_per_call > 1.0  # drafts were accepted


@pytest.mark.parametrize("weights", ["dense", "int4"])
def test_a_tree_of_drafts_a_step_equals_the_general_loop(monkeypatch, counted, tmp_path, weights):
    """The lattice's p best paths, alone or with the context's copy (else the datastore's), with
    and without the LM: trees whose accepted path often leaves their first branch, so that the
    cache moves its slots (counted)."""
    model, heads = trained(next_token=True, **(QUANTIZABLE if weights == "int4" else {}))
    step = LeanLlama(model, weights)
    lm = own_ngram(model, tmp_path, PROMPTS)
    records = [greedy(model, torch.tensor([p]), max_new_tokens=12)[0].tolist() for p in PROMPTS]
    store = Datastore.from_records(records, min_ngram=1)
    moved = _count_moves(monkeypatch, step)
    drafters = [
        lambda: LatticeDrafter(None, k=3, p=3),
        lambda: LatticeDrafter(lm, k=4, p=4),
        lambda: ContextLookup(LatticeDrafter(lm, k=4, p=2), 2, 5, store),
    ]
    for make in drafters:
        for prompt in PROMPTS:
            runs = []
            for fast in (False, True):
                monkeypatch.setattr(row_loop, "applies", _applies if fast else lambda *a: False)
                ids = torch.tensor([prompt])
                engine = Engine(model, heads, make(), step=step)
                runs.append(engine.run(ids, RowStopper(ids, 19, {9}, [], 0), max_length=len(prompt) + 19))
            (tokens_a, a), (tokens_b, b) = runs
            assert tokens_a == tokens_b, (prompt, make)
            assert _counters(a) == _counters(b), (prompt, make)
            if weights == "dense":
                expected = greedy(model, ids, max_new_tokens=19, eos_token_id=9)[0, len(prompt) :].tolist()
                assert tokens_b[0] == expected, prompt
    assert len(counted) == len(drafters) * len(PROMPTS)
    assert moved and b.nodes > 2 * b.target_calls  # trees, some paths off their first branch


def _count_moves(monkeypatch, step) -> list:
    """Records each time a cache made by ``step`` moves a block's slots (a path off the first branch)."""
    moves, new_cache = [], step.new_cache

    def counting_cache(*args, **kwargs):
        cache = new_cache(*args, **kwargs)
        keep = cache.keep_block

        def counting_keep(past, rows, index):
            if index.shape[1] and index[0, -1] != index.shape[1] - 1:
                moves.append(1)
            return keep(past, rows, index)

        cache.keep_block = counting_keep
        return cache

    monkeypatch.setattr(step, "new_cache", counting_cache)
    return moves


def _counters(stats) -> tuple:
    """What a run counted (its timings aside)."""
    return stats.target_calls, stats.prefill_calls, stats.accepted, stats.nodes, stats.new_tokens


@pytest.mark.parametrize("weights", ["dense", "int4"])
def test_sampling_by_the_tree_rule_equals_the_general_loop(monkeypatch, counted, tmp_path, weights):
    """One row sampled by the tree rule (the p best paths, the best prefixes, the copy joined, the
    copy alone),
    temperature and top-k applied at every node: the same seed gives the general loop's tokens,
    acceptances and calls (the same laws, walked with the same draws)."""
    model, heads = trained(next_token=True, **(QUANTIZABLE if weights == "int4" else {}))
    step = LeanLlama(model, weights)
    lm = own_ngram(model, tmp_path, PROMPTS)
    records = [greedy(model, torch.tensor([p]), max_new_tokens=12)[0].tolist() for p in PROMPTS]
    store = Datastore.from_records(records, min_ngram=1)
    drafters = [
        lambda: LatticeDrafter(lm, k=4, p=3),
        lambda: LatticeDrafter(lm, k=4, nodes=4),
        lambda: ContextLookup(LatticeDrafter(lm, k=4, p=2), 2, 5, store),
        lambda: ContextLookup(None, 2, 3, store, retrieval=2),  # the copy alone (no heads run)
    ]
    accepted = 0
    for make in drafters:
        accepted += _sampled_on_both_loops(monkeypatch, model, heads, make, "tree", step)
    assert len(counted) == len(drafters) * len(PROMPTS)
    assert accepted > 15  # drafts were accepted: the walk went down the trees


@pytest.mark.parametrize("weights", ["dense", "int4"])
@pytest.mark.parametrize("rule, p", [("block", 1), ("token", 1), ("multi", 4), ("multi", 1)])
def test_drafts_sampled_with_their_laws_equal_the_general_loop(monkeypatch, counted, tmp_path, weights, rule, p):
    """One row, drafts sampled from the heads' lattice (their own law, or rescored by an LM):
    one verified by block verification or token by token, or p by recursive rejection over
    their trie; temperature and top-k applied at every node: the same seed gives the general
    loop's tokens, acceptances and calls."""
    model, heads = trained(next_token=True, **(QUANTIZABLE if weights == "int4" else {}))
    step = LeanLlama(model, weights)
    lm = own_ngram(model, tmp_path, PROMPTS)
    accepted = 0
    for drafter_lm in (None, lm):
        make = functools.partial(LatticeDrafter, drafter_lm, k=4, p=p, sample_alpha=0.2)
        accepted += _sampled_on_both_loops(monkeypatch, model, heads, make, rule, step)
    assert len(counted) == 2 * len(PROMPTS)
    assert accepted > 5, accepted  # drafts were accepted


def _sampled_on_both_loops(monkeypatch, model, heads, make_drafter, rule: str, step) -> int:
    """Each prompt sampled by ``rule`` (temperature and top-k at every node) on the general loop
    and on the row loop from the same seed: the same tokens, acceptances and calls. Returns the
    draft tokens the row loop accepted."""
    from draftlattice.decode import Sampling

    sampling, accepted = Sampling(temperature=0.6, top_k=6), 0
    for seed, prompt in enumerate(PROMPTS):
        runs = []
        for fast in (False, True):
            monkeypatch.setattr(row_loop, "applies", _applies if fast else lambda *a: False)
            ids = torch.tensor([prompt])
            engine = Engine(
                model,
                heads,
                make_drafter(),
                sample_rule=rule,
                sampling=sampling,
                processors=sampling.processors(),
                step=step,
            )
            torch.manual_seed(seed)
            runs.append(engine.run(ids, RowStopper(ids, 17, {9}, [], 0), max_length=len(prompt) + 17))
        (tokens_a, a), (tokens_b, b) = runs
        assert tokens_a == tokens_b, (prompt, rule)
        assert _counters(a) == _counters(b), (prompt, rule)
        accepted += sum(map(sum, b.accepted))
    return accepted
