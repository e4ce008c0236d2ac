"""Replay equals live blockwise decoding; hand-made traces with known block efficiencies."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from _decode_models import markov_corpus, prompts, trained_model  # noqa: F401
from draftlattice import NgramLM
from draftlattice.decode import BlockwiseDecoder, LatticeDrafter, NeuralDrafter, OracleDrafter, VanillaDrafter
from draftlattice.evaluate import drafting as D
from draftlattice.evaluate.record import record_trace
from draftlattice.evaluate.replay import replay
from draftlattice.evaluate.trace import Trace
from draftlattice.ngram.build import build_lm

NEW_TOKENS = 30


@pytest.fixture(scope="module")
def setup(tmp_path_factory, one_thread):
    model = trained_model(4)
    ps = prompts(5, 0)
    trace = record_trace(model, ps, NEW_TOKENS, top_k=8, progress=False)
    corpus = markov_corpus(6000, 0).tolist()  # the model's own chain: a helpful LM
    text = tmp_path_factory.mktemp("lm") / "chain.txt"
    text.write_text("\n".join(" ".join(map(str, corpus[i : i + 30])) for i in range(0, len(corpus), 30)) + "\n")
    arpa = text.with_suffix(".arpa")
    build_lm(text, 3, out_path=arpa)
    return model, ps, trace, NgramLM(arpa)


def live(model, ps, make, trace):
    stats = []
    for i, prompt in enumerate(ps):
        result = BlockwiseDecoder(model, make(i, prompt)).generate(prompt, NEW_TOKENS)
        assert result.tokens == trace.tokens[i].tolist()  # greedy decoding = the trace's decode
        stats.append(result.stats)
    return stats


def assert_identical(replayed, live_stats):
    assert [s.block_sizes for s in replayed.per_prompt] == [s.block_sizes for s in live_stats]
    assert [s.serial_calls for s in replayed.per_prompt] == [s.serial_calls for s in live_stats]
    assert [s.new_tokens for s in replayed.per_prompt] == [s.new_tokens for s in live_stats]
    total = sum(live_stats[1:], live_stats[0])
    assert replayed.block_efficiency == total.block_efficiency


def test_recorded_tokens_are_the_greedy_decode(setup):
    from draftlattice.decode import greedy_decode

    model, ps, trace, _ = setup
    for i, prompt in enumerate(ps):
        assert greedy_decode(model, prompt, NEW_TOKENS) == trace.tokens[i].tolist()


@pytest.mark.parametrize("k,p,alpha,bos", [(4, 1, 0.5, True), (4, 4, 2.0, False), (8, 3, 1.0, True), (3, 2, 0.0, True)])
def test_ngram_replay_equals_live(setup, k, p, alpha, bos):
    model, ps, trace, lm = setup
    replayed = replay(trace, D.NgramRescore(lm, k, p, alpha, bos), progress=False)
    assert_identical(replayed, live(model, ps, lambda i, _: LatticeDrafter(lm, k, p, alpha, bos), trace))


def test_vanilla_and_oracle_replay_equal_live(setup):
    model, ps, trace, _ = setup
    vanilla = replay(trace, D.Vanilla(), progress=False)
    assert_identical(vanilla, live(model, ps, lambda i, _: VanillaDrafter(), trace))
    for k in (1, 3, 8):
        refs = [list(p) + t.tolist() for p, t in zip(ps, trace.tokens)]
        oracle = replay(trace, D.Oracle(k), progress=False)
        assert_identical(oracle, live(model, ps, lambda i, _, refs=refs, k=k: OracleDrafter(refs[i], k), trace))
    assert replay(trace, D.Oracle(1), progress=False).block_efficiency == vanilla.block_efficiency
    assert oracle.block_efficiency > vanilla.block_efficiency > 1.0  # decoding is non-trivial


def test_live_drafter_wrapper_replays_neural_rescoring(setup):
    model, ps, trace, _ = setup
    lm_model = trained_model(2, seed=0)  # a small neural LM over the same vocabulary
    make = lambda i, _: NeuralDrafter(lm_model, k=4, alpha=0.7)  # noqa: E731
    replayed = replay(trace, D.LiveDrafter(make(0, None)), progress=False)
    assert_identical(replayed, live(model, ps, make, trace))


def test_adaptive_replay_equals_live_switching_drafter(setup):
    """Adaptive (k, p) per step = a live drafter that reads the entropies of its head logits."""
    model, ps, trace, lm = setup
    policy = lambda ent: (4, 3) if float(np.mean(ent)) > 0.5 else (2, 1)  # noqa: E731

    class Switching:
        name, num_drafts = "switching", 3

        def propose(self, head_logits, context):
            logp = torch.log_softmax(head_logits.float(), -1)
            k, p = policy((-(logp.exp() * logp).sum(-1)).numpy())
            return LatticeDrafter(lm, k, p, 1.0, False).propose(head_logits, context)

    replayed = replay(trace, D.Adaptive(lm, policy, 1.0, False), progress=False)
    assert_identical(replayed, live(model, ps, lambda i, _: Switching(), trace))
    assert 1.0 < replayed.drafts_per_call < 3.0  # both branches were taken


def hand_trace(heads_top1: list[list[int]], greedy: list[int], vocab: int = 10) -> Trace:
    """One prompt [9]; position t's head j top-1 = heads_top1[t][j] (head 1 = greedy[t]);
    second candidates are the next free ids."""
    t, h = len(greedy), len(heads_top1[0]) + 1
    ids = np.zeros((t, h, 2), np.int32)
    for n in range(t):
        row = [greedy[n]] + heads_top1[n]
        for j, tok in enumerate(row):
            ids[n, j] = [tok, (tok + 1) % vocab]
    lps = np.tile(np.array([-0.1, -2.0], np.float32), (t, h, 1))
    return Trace(
        [np.array([9], np.int32)], [np.array(greedy, np.int32)], [ids], [lps], [np.ones((t, h), np.float32)], vocab
    )


def test_hand_made_trace_block_efficiency():
    # y = 0 1 2 3 4 5 6 (T = 7), h = 3. At n = 0 heads 2, 3 propose (1, 2): both right -> commit 3
    # (y0 y1 y2), pending y3. At n = 3 they propose (4, 0): one right -> commit 2, pending y5.
    # n = 5: g = min(2, 7 - 5 - 2) = 0 -> commit y5 alone; then y6 is committed without a call.
    greedy = [0, 1, 2, 3, 4, 5, 6]
    heads = [[1, 2], [7, 7], [7, 7], [4, 0], [7, 7], [7, 7], [7, 7]]
    result = replay(hand_trace(heads, greedy), D.Vanilla(), progress=False)
    assert result.stats.block_sizes == [0, 1, 1, 1]
    assert result.stats.serial_calls == 4  # prefill + 3 steps
    assert result.block_efficiency == 7 / 4
    # oracle k=2: at n = 3 head 3's second candidate is 1 (not 5): still 2; n = 0 unchanged.
    assert replay(hand_trace(heads, greedy), D.Oracle(2), progress=False).block_efficiency == 7 / 4
    heads[3] = [4, 4]  # second candidate of head 3 is now 5 = y5: the oracle takes it
    oracle = replay(hand_trace(heads, greedy), D.Oracle(2), progress=False)
    assert oracle.stats.block_sizes == [0, 0, 0, 2] and oracle.block_efficiency == 7 / 3


def test_bad_k_is_refused(setup):
    _, _, trace, lm = setup
    with pytest.raises(ValueError, match="top_k"):
        replay(trace, D.NgramRescore(lm, 9, 1, 1.0), progress=False)
