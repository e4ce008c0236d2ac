"""Replay equals live decoding through the engine; hand-made traces with known block efficiencies.

The live side is :class:`draftlattice.decode.Engine` on a tiny random Llama with heads distilled
on its own greedy output (drafts often, not always, accepted); the replay side reads the trace
recorded through the same engine. Equal per-step acceptance, target calls and tokens, for every
drafter that has a replay twin.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from _hf_models import greedy, llama, ngram_over
from _tiny_target import distilled_heads
from draftlattice.decode import Engine, LatticeDrafter, OracleDrafter, RowStopper
from draftlattice.evaluate import drafting as D
from draftlattice.evaluate.record import record_trace
from draftlattice.evaluate.replay import replay
from draftlattice.evaluate.trace import Trace

NEW_TOKENS = 30
HORIZON = 4


@pytest.fixture(scope="module")
def setup(tmp_path_factory, one_thread):
    model = llama()
    heads = distilled_heads(model, HORIZON)
    gen = torch.Generator().manual_seed(5)
    ps = [torch.randint(0, model.config.vocab_size, (6,), generator=gen).tolist() for _ in range(5)]
    trace = record_trace(model, heads, ps, NEW_TOKENS, top_k=8, progress=False)
    # An LM over the model's own greedy continuations of other prompts: a helpful LM.
    others = torch.randint(0, model.config.vocab_size, (20, 4), generator=gen)
    continuations = greedy(model, others, torch.ones_like(others), max_new_tokens=40).tolist()
    return model, heads, ps, trace, ngram_over(tmp_path_factory.mktemp("lm"), continuations)


def live(setup, make):
    """Each prompt decoded alone by the engine with drafter ``make(i, prompt)``; its stats."""
    model, heads, ps, trace, _ = setup
    stats = []
    for i, prompt in enumerate(ps):
        ids = torch.tensor([prompt])
        engine = Engine(model, heads, make(i, prompt))
        stopper = RowStopper(ids, NEW_TOKENS, set(), [], 0)
        tokens, run = engine.run(ids, stopper, max_length=len(prompt) + NEW_TOKENS)
        assert tokens[0] == trace.tokens[i].tolist()  # greedy decoding = the trace's decode
        stats.append(run)
    return stats


def assert_identical(replayed, live_stats):
    assert len(replayed.per_prompt) == len(live_stats)
    for rep, run in zip(replayed.per_prompt, live_stats):
        assert (rep.target_calls, rep.prefill_calls, rep.new_tokens) == (run.target_calls, 1, NEW_TOKENS)
        assert run.prefill_calls == 1 and run.new_tokens == NEW_TOKENS
        assert rep.accepted == run.accepted  # every step's kept draft tokens, the last one's too
    total = sum(live_stats[1:], live_stats[0])
    assert replayed.block_efficiency == total.block_efficiency


def test_recorded_tokens_are_the_greedy_decode(setup):
    model, _, ps, trace, _ = setup
    for i, prompt in enumerate(ps):
        ids = torch.tensor([prompt])
        out = greedy(model, ids, torch.ones_like(ids), max_new_tokens=NEW_TOKENS)
        assert out[0, len(prompt) :].tolist() == trace.tokens[i].tolist()
    assert trace.num_heads == HORIZON and trace.top_k == 8


@pytest.mark.parametrize("k,p,alpha", [(4, 1, 0.5), (4, 4, 2.0), (8, 3, 1.0), (3, 2, 0.0)])
def test_ngram_replay_equals_live(setup, k, p, alpha):
    _, _, _, trace, lm = setup
    replayed = replay(trace, D.NgramRescore(lm, k, p, alpha), progress=False)
    assert_identical(replayed, live(setup, lambda i, _: LatticeDrafter(lm, k, p, alpha)))


@pytest.mark.parametrize("k,nodes,alpha,with_lm", [(4, 5, 0.5, True), (8, 12, 1.0, True), (3, 4, 0.0, False)])
def test_best_prefix_replay_equals_live(setup, k, nodes, alpha, with_lm):
    _, _, _, trace, lm = setup
    lm = lm if with_lm else None
    replayed = replay(trace, D.BestPrefixes(lm, k, nodes, alpha), progress=False)
    assert_identical(replayed, live(setup, lambda i, _: LatticeDrafter(lm, k, alpha=alpha, nodes=nodes)))


def test_vanilla_and_oracle_replay_equal_live(setup):
    _, _, ps, trace, _ = setup
    vanilla = replay(trace, D.Vanilla(), progress=False)
    assert_identical(vanilla, live(setup, lambda i, _: LatticeDrafter(k=1, p=1)))
    refs = [list(p) + t.tolist() for p, t in zip(ps, trace.tokens)]
    for k in (1, 3, 8):
        oracle = replay(trace, D.Oracle(k), progress=False)
        assert_identical(oracle, live(setup, lambda i, _, k=k: OracleDrafter([refs[i]], k)))
    assert replay(trace, D.Oracle(1), progress=False).block_efficiency == vanilla.block_efficiency
    assert oracle.block_efficiency > vanilla.block_efficiency > 1.0  # decoding is non-trivial


@pytest.mark.parametrize("lm_weight", [None, 0.7])
def test_live_drafter_wrapper_replays_engine_drafters(setup, lm_weight):
    """Any engine drafter replays on the trace's pseudo-logits: the heads alone (p-best on the
    device) and n-gram rescoring (the C++ core on the host)."""
    lm = setup[4] if lm_weight is not None else None
    make = lambda i, _: LatticeDrafter(lm, k=4, p=3, alpha=lm_weight or 0.0)  # noqa: E731
    replayed = replay(setup[3], D.LiveDrafter(make(0, None)), progress=False)
    assert_identical(replayed, live(setup, make))


def test_adaptive_replay_equals_live_switching_drafter(setup):
    """Adaptive (k, p) per step = a live drafter that reads the entropies of its head logits."""
    _, _, _, trace, lm = setup
    means = np.unique(np.concatenate([e[:, 1:].mean(1) for e in trace.entropy]))
    threshold = float(means[len(means) // 2 - 1 : len(means) // 2 + 1].mean())  # between two recorded values
    policy = lambda ent: (4, 3) if float(np.mean(ent)) > threshold else (2, 1)  # noqa: E731

    class Switching:
        name, p = "switching", 3

        def __init__(self):
            self.drafters = {}
            self.current = None

        def propose(self, head_logits, sampling, draws):
            logp = torch.log_softmax(head_logits.float(), -1)
            k, p = policy((-(logp.exp() * logp).sum(-1))[0].numpy())
            self.current = self.drafters.setdefault((k, p), LatticeDrafter(lm, k, p, 1.0))
            return self.current.propose(head_logits, sampling, draws)

        def finish(self, proposal, host, contexts, device):
            return self.current.finish(proposal, host, contexts, device)

    replayed = replay(trace, D.Adaptive(lm, policy, 1.0, False), progress=False)
    assert_identical(replayed, live(setup, lambda i, _: Switching()))
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
    # y = 0 1 2 3 4 5 6 (T = 7), h = 3. The prefill commits y0. At n = 0 heads 2, 3 propose
    # (1, 2): both right -> commit 3 (y1 y2 y3). At n = 3 they propose (4, 0): one right ->
    # commit 2 (y4 y5). At n = 5 (7, 7): none right -> commit y6 alone; the decode is complete.
    greedy = [0, 1, 2, 3, 4, 5, 6]
    heads = [[1, 2], [7, 7], [7, 7], [4, 0], [7, 7], [7, 7], [7, 7]]
    result = replay(hand_trace(heads, greedy), D.Vanilla(), progress=False)
    assert result.stats.accepted == [[2], [1], [0]]
    assert result.stats.block_sizes == [0, 1, 1, 1]
    assert result.stats.target_calls == 4 and result.stats.prefill_calls == 1  # prefill + 3 steps
    assert result.stats.new_tokens == 7 and result.block_efficiency == 7 / 4
    # oracle k=2: at n = 3 head 3's second candidate is 1 (not 5): still 2; n = 0 unchanged.
    assert replay(hand_trace(heads, greedy), D.Oracle(2), progress=False).block_efficiency == 7 / 4
    heads[3] = [4, 4]  # second candidate of head 3 is now 5 = y5: the oracle takes it
    oracle = replay(hand_trace(heads, greedy), D.Oracle(2), progress=False)
    assert oracle.stats.block_sizes == [0, 0, 0, 2] and oracle.block_efficiency == 7 / 3
    # The last block is cut by the trace's end: at n = 5 only y6 remains for drafts of 2.
    heads[5] = [6, 9]
    cut = replay(hand_trace(heads, greedy), D.Vanilla(), progress=False)
    assert cut.stats.accepted == [[2], [1], [1]] and cut.block_efficiency == 7 / 4


def test_bad_k_is_refused(setup):
    _, _, _, trace, lm = setup
    with pytest.raises(ValueError, match="top_k"):
        replay(trace, D.NgramRescore(lm, 9, 1, 1.0), progress=False)


def test_trace_recorder_lists_the_committed_token_first_on_a_tie():
    """Head 1's top-1 in a trace is the committed token: on an exact tie (frequent in bfloat16)
    topk may order the tied ids either way; the recorder puts the engine's choice first."""
    from draftlattice.evaluate.record import TraceRecorder

    scores = torch.full((1, 1, 10), -5.0)
    scores[0, 0, 3] = scores[0, 0, 7] = 2.0  # argmax: 3; topk may list 7 first
    recorder = TraceRecorder(1, 4)
    for token in (3, 7):
        recorder.path(
            torch.zeros(1, 1, 2), scores, [[token]], lambda hidden, next_ids: scores[..., None, :].expand(1, 1, 2, 10)
        )
    ids, logprobs, _ = recorder.arrays(0)
    assert ids[:, 0, 0].tolist() == [3, 7] and sorted(ids[0, 0, :2].tolist()) == [3, 7]
    assert logprobs[0, 0, 0] == logprobs[0, 0, 1]
    with pytest.raises(ValueError, match="not a maximum"):
        recorder.path(
            torch.zeros(1, 1, 2), scores, [[0]], lambda hidden, next_ids: scores[..., None, :].expand(1, 1, 2, 10)
        )
