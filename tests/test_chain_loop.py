"""The engine's chain loop for one row and one draft a step on a lean step
(draftlattice.decode.chain_loop): the same outputs and statistics as the general loop, run on the
same step with the chain loop switched off, and generate()'s output in float32."""

from __future__ import annotations

import pytest
import torch

import draftlattice.hf as dlhf
from _engine_models import trained
from _hf_models import greedy, left_padded, llama, own_ngram
from draftlattice import Datastore
from draftlattice.decode import Engine, LatticeDrafter, RowStopper, chain_loop
from draftlattice.decode.drafters.lookup import ContextLookup
from draftlattice.lean import LeanLlama

pytestmark = pytest.mark.usefixtures("one_thread")

# Prompts that repeat themselves, so that copies are found (and some are right).
PROMPTS = [[3, 4, 5, 6, 3, 4], [7, 8, 9, 7, 8], [1, 2, 1, 2, 1], [10, 20, 30, 40, 10, 20, 30], [5, 6]]
QUANTIZABLE = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2)


def _run(model, step, prompt, new, monkeypatch, chain: bool, eos=(), datastore=None, length: int = 4):
    monkeypatch.setattr(chain_loop, "applies", _applies if chain else lambda *a: False)
    ids = torch.tensor([prompt])
    engine = Engine(model, None, ContextLookup(None, 2, length, datastore), step=step)
    stopper = RowStopper(ids, new, set(eos), [], 0)
    tokens, stats = engine.run(ids, stopper, max_length=len(prompt) + new)
    return tokens, stats


_applies = chain_loop.applies
_TAKEN = []


@pytest.fixture
def counted(monkeypatch):
    """Records each call the chain loop takes."""
    decode = chain_loop.decode

    def counting(*args):
        _TAKEN.append(1)
        return decode(*args)

    _TAKEN.clear()
    monkeypatch.setattr(chain_loop, "decode", counting)
    return _TAKEN


@pytest.mark.parametrize("weights", ["dense", "int4"])
def test_the_chain_loop_equals_the_general_loop(monkeypatch, counted, weights):
    model = llama(seed=4, **QUANTIZABLE) if weights == "int4" else llama(seed=4)
    step = LeanLlama(model, weights)
    records = [greedy(model, torch.tensor([p]), max_new_tokens=12)[0].tolist() for p in PROMPTS]
    store = Datastore.from_records(records, min_ngram=1)
    for prompt in PROMPTS:
        for new, eos, datastore, length in (
            (1, (), None, 4),
            (17, (), None, 4),
            (17, (7,), store, 3),
            (23, (), store, 6),
        ):
            general = _run(model, step, prompt, new, monkeypatch, False, eos, datastore, length)
            taken = len(counted)
            chained = _run(model, step, prompt, new, monkeypatch, True, eos, datastore, length)
            assert len(counted) == taken + 1  # the chain loop ran
            assert chained[0] == general[0], (prompt, new, eos)
            a = chained[1]
            assert _counters(a) == _counters(general[1]), (prompt, new)
            assert 0 < a.forward_seconds <= a.verification_seconds or a.steps == 0


def test_the_chain_loop_decodes_generates_output_through_the_plugin(counted):
    model = llama(seed=4)
    step = LeanLlama(model, "dense")
    for prompt in PROMPTS:
        ids = torch.tensor([prompt])
        out = _copying_generate(model, ids, step, 19, return_dict_in_generate=True)
        assert out.sequences.tolist() == greedy(model, ids, max_new_tokens=19).tolist(), prompt
    assert len(counted) == len(PROMPTS)
    assert out.draft_stats.tokens_per_call > 1.0  # copies were accepted


def test_the_general_loop_runs_where_the_chain_loop_does_not_apply(counted):
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
            for chain in (False, True):
                monkeypatch.setattr(chain_loop, "applies", _applies if chain else lambda *a: False)
                ids = torch.tensor([prompt])
                engine = Engine(model, heads, LatticeDrafter(drafter_lm, k=4, p=1), step=step)
                runs.append(engine.run(ids, RowStopper(ids, 21, set(), [], 0), max_length=len(prompt) + 21))
            (tokens_a, a), (tokens_b, b) = runs
            assert tokens_a == tokens_b == [greedy(model, ids, max_new_tokens=21)[0, len(prompt) :].tolist()]
            assert _counters(a) == _counters(b), (prompt, drafter_lm)
    assert len(counted) == 2 * len(PROMPTS)
    assert b.tokens_per_call > 1.0  # drafts were accepted


def _counters(stats) -> tuple:
    """What a run counted (its timings aside)."""
    return stats.target_calls, stats.prefill_calls, stats.accepted, stats.nodes, stats.new_tokens
