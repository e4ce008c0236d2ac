"""Replay equals live blockwise decoding on the shipped default model and 4-gram LM.

The hand-made and small-model checks are in test_replay.py; this file runs the same identity on
the real artifacts in lm_models/ and WikiText-2 test prompts, so a difference that appears only
at the shipped model's vocabulary and head count is caught too.
"""

from __future__ import annotations

import pytest

from draftlattice import NgramLM
from draftlattice.assets import WIKITEXT_TEST, data_file, model_asset
from draftlattice.decode import BlockwiseDecoder, LatticeDrafter, OracleDrafter, VanillaDrafter
from draftlattice.evaluate import drafting as D
from draftlattice.evaluate.prompts import paragraph_prompts
from draftlattice.evaluate.record import record_trace
from draftlattice.evaluate.replay import replay
from draftlattice.model import BlockwiseLM
from draftlattice.tokenizer import load_tokenizer

NEW_TOKENS = 24
TOP_K = 8


@pytest.fixture(scope="module")
def shipped(one_thread):
    model = BlockwiseLM.from_pretrained(model_asset("default"))
    tokenizer = load_tokenizer(model_asset("tokenizer.json"))
    prompts = paragraph_prompts(data_file(WIKITEXT_TEST), tokenizer, count=3, length=24)
    trace = record_trace(model, prompts, NEW_TOKENS, top_k=TOP_K, progress=False)
    return model, prompts, trace, NgramLM(model_asset("katz4.dlm"))


def live_stats(model, prompts, trace, make_drafter):
    stats = []
    for i, prompt in enumerate(prompts):
        result = BlockwiseDecoder(model, make_drafter(i)).generate(prompt, NEW_TOKENS)
        assert result.tokens == trace.tokens[i].tolist()  # greedy output = the trace's decode
        stats.append(result.stats)
    return stats


def assert_same(replayed, stats):
    assert [s.block_sizes for s in replayed.per_prompt] == [s.block_sizes for s in stats]
    assert replayed.block_efficiency == sum(stats[1:], stats[0]).block_efficiency


def test_vanilla_replay_equals_live(shipped):
    model, prompts, trace, _ = shipped
    assert_same(
        replay(trace, D.Vanilla(), progress=False), live_stats(model, prompts, trace, lambda i: VanillaDrafter())
    )


@pytest.mark.parametrize("k,p,alpha", [(8, 1, 0.5), (4, 4, 1.0)])
def test_ngram_replay_equals_live(shipped, k, p, alpha):
    model, prompts, trace, lm = shipped
    replayed = replay(trace, D.NgramRescore(lm, k, p, alpha, False), progress=False)
    assert_same(replayed, live_stats(model, prompts, trace, lambda i: LatticeDrafter(lm, k, p, alpha, False)))


def test_oracle_replay_equals_live(shipped):
    model, prompts, trace, _ = shipped
    refs = [list(p) + t.tolist() for p, t in zip(prompts, trace.tokens)]
    replayed = replay(trace, D.Oracle(TOP_K), progress=False)
    assert_same(replayed, live_stats(model, prompts, trace, lambda i: OracleDrafter(refs[i], TOP_K)))
    assert replayed.block_efficiency > 1.0
