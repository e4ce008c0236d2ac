"""Drafts from head logits: exact p-best paths without an LM, C++ rescoring with one, trees of the
best nodes with or without one."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from _hf_models import ngram_over
from draftlattice import Lattice, rescore
from draftlattice.decode.drafters import LatticeDrafter, Sampling, pbest_paths, to_host, topk_lattice
from draftlattice.node_tree import best_nodes


def greedy_drafts(logits, drafter, contexts):
    """The drafter's greedy drafts, both halves, as the engine runs them."""
    proposal = drafter.propose(logits, None, 0)
    drafts, sampled = drafter.finish(proposal, to_host(proposal.to_host), contexts, logits.device)
    assert sampled is None
    return drafts.numpy()


def brute_force_pbest(ids, logprobs, p):
    g, k = ids.shape
    paths = sorted(
        itertools.product(range(k), repeat=g), key=lambda r: -sum(float(logprobs[t, r[t]]) for t in range(g))
    )
    return [[int(ids[t, r[t]]) for t in range(g)] for r in paths[:p]]


def test_pbest_paths_equal_enumeration():
    gen = torch.Generator().manual_seed(0)
    for g, k, p in [(1, 4, 3), (3, 3, 5), (4, 2, 16), (3, 4, 1), (2, 2, 7)]:
        logits = torch.randn(2, g, 30, generator=gen) * 3
        ids, logprobs = topk_lattice(logits, k)
        got = pbest_paths(ids, logprobs, p)
        assert got.shape == (2, p, g)
        for b in range(2):
            expected = brute_force_pbest(ids[b], logprobs[b], p)
            n = len(expected)
            assert got[b, :n].tolist() == expected
            assert all(row == expected[0] for row in got[b, n:].tolist())  # padding repeats the best


def test_lm_drafts_are_the_rescored_lattice_drafts(tmp_path):
    lm = ngram_over(tmp_path, [[(2 * i + j) % 30 for j in range(10)] for i in range(30)])
    logits = torch.randn(3, 3, 30, generator=torch.Generator().manual_seed(1))
    contexts = [[1, 3], [5], []]
    drafts = greedy_drafts(logits, LatticeDrafter(lm, k=4, p=3, alpha=0.7), contexts)
    ids, logprobs = topk_lattice(logits, 4)
    for b in range(3):
        lattice = Lattice.from_topk(ids[b].numpy(), logprobs[b].numpy())
        assert np.array_equal(drafts[b], rescore(lattice, lm, p=3, alpha=0.7, context=contexts[b]).tokens)


@pytest.mark.parametrize("with_lm", [True, False])
def test_node_drafts_are_the_trees_of_the_best_nodes(tmp_path, with_lm):
    lm = ngram_over(tmp_path, [[(2 * i + j) % 30 for j in range(10)] for i in range(30)]) if with_lm else None
    logits = torch.randn(3, 3, 30, generator=torch.Generator().manual_seed(4))
    contexts = [[1, 3], [5], []]
    drafts = greedy_drafts(logits, LatticeDrafter(lm, k=4, nodes=7, alpha=0.7), contexts)
    ids, logprobs = topk_lattice(logits, 4)
    for b in range(3):
        tree = best_nodes(Lattice.from_topk(ids[b].numpy(), logprobs[b].numpy()), lm, 7, 0.7, contexts[b])
        paths = tree.paths(3)
        assert np.array_equal(drafts[b, : len(paths)], paths)
        assert all(row == paths[0].tolist() for row in drafts[b, len(paths) :].tolist())  # padding repeats the best


def test_lm_drafts_keep_one_memo_per_row_across_steps(tmp_path):
    # generate() keeps its drafter for the whole call: row b's memo serves row b at every
    # step, and the drafts stay those of the rescored lattice.
    lm = ngram_over(tmp_path, [[(2 * i + j) % 30 for j in range(10)] for i in range(30)])
    drafter = LatticeDrafter(lm, k=4, p=3, alpha=0.7)
    gen = torch.Generator().manual_seed(2)
    contexts = [[1, 3], [5]]
    for _ in range(6):
        logits = torch.randn(2, 3, 30, generator=gen)
        drafts = greedy_drafts(logits, drafter, contexts)
        ids, logprobs = topk_lattice(logits, 4)
        for b in range(2):
            lattice = Lattice.from_topk(ids[b].numpy(), logprobs[b].numpy())
            assert np.array_equal(drafts[b], rescore(lattice, lm, p=3, alpha=0.7, context=contexts[b]).tokens)
        contexts = [c + [int(drafts[b, 0, 0])] for b, c in enumerate(contexts)]
    assert len(drafter.memos) == 2
    assert all(memo.stats["pair_hits"] > 0 for memo in drafter.memos)


def test_sampled_lattice_drafts_at_the_default_vocabulary_match_the_host_reference(tmp_path):
    """V = 49,152 (the default model's): the split path (top-k and the mass outside it to the host,
    the law outside it on the device) gives the proposal law q of the host reference
    sample_from_heads, draft for draft, with a top-p head whose support is below k."""
    from draftlattice.sample import sample_from_heads

    V, g, k, n = 49_152, 3, 8, 4
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(1, g, V, generator=gen) * 4
    logits[0, 1, :5] += 40  # head 3: almost all mass on 5 tokens, so top-p keeps fewer than k
    lm = ngram_over(tmp_path, [[(7 * i + j) % 50 for j in range(10)] for i in range(50)], order=2)
    drafter = LatticeDrafter(lm, k, n, 0.5, 0.6)
    sampling = Sampling(temperature=0.9, top_p=0.95)
    context = [[3, 10, 17]]
    torch.manual_seed(5)
    proposal = drafter.propose(logits, sampling, n)
    tokens, sampled = drafter.finish(proposal, to_host(proposal.to_host), context, logits.device)
    assert proposal.to_host[0].shape[-1] < k and all(t.numel() < V for t in proposal.to_host)
    torch.manual_seed(5)  # the same seed for the lattice walk
    from draftlattice.verify import sampling_distribution

    q = sampling_distribution(logits, 0.9, None, 0.95, dtype=torch.float32)[0]
    seed = torch.Generator().manual_seed(int(torch.randint(0, 2**62, (1,))))
    want = sample_from_heads(q.double().log().numpy(), k, lm, n, 0.6, np.array(context[0], np.int32), False, seed)
    got_q = sampled.q[0].double().numpy()
    np.testing.assert_allclose(got_q, want.q, atol=2e-6)
    np.testing.assert_allclose(got_q.sum(-1), 1.0, atol=1e-4)
    walk = want.lattice.tokens  # drafts agree wherever the reference did not draw an "other" token
    for i in range(n):
        for t in range(g):
            if want.tokens[i, t] in walk[t]:
                assert int(tokens[0, i, t]) == want.tokens[i, t]
            assert got_q[i, t, int(tokens[0, i, t])] > 0  # every drafted token has positive q
