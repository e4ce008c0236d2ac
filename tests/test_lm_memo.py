"""The drafter's LM memo (csrc/lm_memo.h, memo_lm.h): pair bounds and arc scores kept across the
drafting calls of a decoding loop. It may only change the time a draft takes, never the draft:
every call with a memo must return what the same call without one returns, whatever the memo
remembered before (other lattices, other models, other threads)."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest

import draftlattice as dl
from arpa_writer import random_arpa
from draftlattice import _core


def _lm(tmp_path, order: int, seed: int, consistent: bool = True, with_unk: bool = False) -> dl.NgramLM:
    path = tmp_path / f"o{order}-s{seed}-{consistent}-{with_unk}.arpa"
    random_arpa(path, order, seed=seed, n_words=7, consistent=consistent, with_unk=with_unk)
    return dl.NgramLM(path)


def _steps(seed: int, n: int, h: int = 4, k: int = 3):
    """A decoding-like sequence: (tokens [h, k], logprobs [h, k], new tokens) per step, over 9 token
    ids (7 and 8 unknown to the models), so that pairs and arcs recur from step to step."""
    rng = np.random.default_rng(seed)
    steps = []
    for _ in range(n):
        tokens = np.stack([rng.choice(9, size=k, replace=False) for _ in range(h)]).astype(np.int32)
        logprobs = np.sort(np.log(rng.dirichlet(np.ones(9), size=h))[:, :k], axis=1)[:, ::-1].astype(np.float32)
        new = rng.integers(0, 9, size=int(rng.integers(0, 4))).tolist()
        steps.append((tokens, np.ascontiguousarray(logprobs), new))
    return steps


def _run(lm, steps, p, memo, state=None):
    """Drafts and states of a drafting loop over `steps`, each advancing the previous state."""
    state = lm.start([], False) if state is None else state
    out = []
    for tokens, logprobs, new in steps:
        state = lm.advance(state, new)
        (best,) = dl.rescore_batch([dl.Lattice.from_topk(tokens, logprobs)], lm, [state], p=p, alpha=0.8, memos=[memo])
        out.append((best.tokens, state))
    return out


def _assert_same(got, want):
    assert len(got) == len(want)
    for (drafts, state), (want_drafts, want_state) in zip(got, want):
        np.testing.assert_array_equal(drafts, want_drafts)
        assert state == want_state


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("consistent", [True, False])
def test_drafts_with_a_memo_equal_drafts_without(tmp_path, order, consistent):
    lm = _lm(tmp_path, order, seed=10 + order, consistent=consistent, with_unk=order % 2 == 0)
    steps = _steps(order, 60)
    for p in (1, 5):
        memo = _core.LmMemo()
        _assert_same(_run(lm, steps, p, memo), _run(lm, steps, p, None))
        stats = memo.stats
        assert stats["pair_hits"] > 0 and stats["pair_hits"] <= stats["pair_lookups"]
        assert stats["arc_hits"] > 0 and stats["arc_hits"] <= stats["arc_lookups"]


def test_one_memo_shared_by_two_models_answers_for_each(tmp_path):
    # The same token ids mean other words' scores in the other model: a memo that kept the first
    # model's entries when handed the second would return its scores.
    a = _lm(tmp_path, 4, seed=1)
    b = _lm(tmp_path, 3, seed=2, consistent=False)
    steps = _steps(3, 20)
    want_a, want_b = _run(a, steps, 3, None), _run(b, steps, 3, None)
    memo = _core.LmMemo()
    for _ in range(3):
        _assert_same(_run(a, steps, 3, memo), want_a)
        _assert_same(_run(b, steps, 3, memo), want_b)


def test_a_memo_keeps_answering_for_a_model_loaded_twice(tmp_path):
    # Two loads of one file are two models: the memo starts over for the second, and stays exact.
    path = tmp_path / "m.arpa"
    random_arpa(path, 4, seed=3, n_words=7)
    steps = _steps(4, 20)
    memo = _core.LmMemo()
    for _ in range(2):
        lm = dl.NgramLM(path)
        _assert_same(_run(lm, steps, 2, memo), _run(lm, steps, 2, None))


def test_threads_sharing_a_memo_get_the_drafts_of_no_memo(tmp_path):
    # One thread holds the memo while the others run: they go without it (the binding's try-lock).
    lm = _lm(tmp_path, 4, seed=5)
    steps = _steps(5, 40)
    want = _run(lm, steps, 4, None)
    memo = _core.LmMemo()
    results, errors = [None] * 4, []

    def worker(i):
        try:
            results[i] = _run(lm, steps, 4, memo)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for got in results:
        _assert_same(got, want)


def test_the_lattice_drafter_keeps_one_memo_per_row_and_uses_it(tmp_path):
    import torch

    from draftlattice.decode import LatticeDrafter
    from draftlattice.decode.drafters import to_host

    lm = _lm(tmp_path, 4, seed=7)
    drafter = LatticeDrafter(lm, k=3, p=2, alpha=0.5)
    rng = random.Random(0)
    contexts = [[1, 2, 3], [4, 5]]
    generator = torch.Generator().manual_seed(1)
    for _ in range(30):
        proposal = drafter.propose(torch.randn(2, 4, 9, generator=generator), None, 0)
        drafter.finish(proposal, to_host(proposal.to_host), contexts, torch.device("cpu"))
        contexts = [c + [rng.randrange(9) for _ in range(rng.randint(1, 3))] for c in contexts]
    assert len(drafter.memos) == 2
    for memo in drafter.memos:
        assert memo.stats["arc_hits"] > 0 and memo.stats["pair_hits"] > 0


def _batch_steps(seed: int, rows: int, n: int):
    """Per step: (tokens [B, h, k], logprobs [B, h, k], contexts): B sequences growing."""
    rng = random.Random(seed)
    contexts = [[rng.randrange(9) for _ in range(3)] for _ in range(rows)]
    out = []
    for step in _steps(seed, n * rows, h=3, k=3)[::rows]:
        tokens = np.stack([np.roll(step[0], b, axis=1) for b in range(rows)])
        logprobs = np.stack([step[1]] * rows)
        contexts = [c + [rng.randrange(9) for _ in range(rng.randint(1, 3))] for c in contexts]
        out.append((tokens, logprobs, [list(c) for c in contexts]))
    return out


@pytest.mark.parametrize("threads", [1, 3])
def test_rescore_batch_with_memos_equals_without(tmp_path, threads):
    lm = _lm(tmp_path, 4, seed=8, consistent=False)
    one = dl.LmMemo()
    # A memo per row, rows without one, and one memo twice in a batch (its second use in a call
    # goes without it, or waits its turn in the serial loop): all the same drafts.
    memo_sets = [[dl.LmMemo() for _ in range(4)], [None, dl.LmMemo(), None, dl.LmMemo()], [one, one, one, one]]
    for memos in memo_sets:
        for tokens, logprobs, contexts in _batch_steps(9, 4, 25):
            got = dl.rescore_batch((tokens, logprobs), lm, contexts, p=3, alpha=0.6, num_threads=threads, memos=memos)
            want = dl.rescore_batch((tokens, logprobs), lm, contexts, p=3, alpha=0.6, num_threads=threads)
            for a, b in zip(got, want):
                np.testing.assert_array_equal(a.tokens, b.tokens)
                np.testing.assert_array_equal(a.scores, b.scores)
        used = [m for m in memos if m is not None]
        assert all(m.stats["arc_hits"] > 0 for m in used)


def test_rescore_batch_names_bad_memos(tmp_path):
    lm = _lm(tmp_path, 3, seed=9)
    tokens, logprobs, contexts = _batch_steps(1, 2, 1)[0]
    with pytest.raises(ValueError, match="got 1 memos for 2 lattices"):
        dl.rescore_batch((tokens, logprobs), lm, contexts, memos=[dl.LmMemo()])
    with pytest.raises(TypeError, match=r"memos\[i\] must be a LmMemo or None"):
        dl.rescore_batch((tokens, logprobs), lm, contexts, memos=[dl.LmMemo(), "memo"])
    with pytest.raises(TypeError, match="memos must be a sequence"):
        dl.rescore_batch((tokens, logprobs), lm, contexts, memos=dl.LmMemo())
