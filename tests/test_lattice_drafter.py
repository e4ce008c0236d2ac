"""The lattice drafter's committed LM state (decode/drafters/lattice.py): advanced by the new
tokens only, it always equals the state computed from the whole context, so proposals equal
rescoring with the whole context (the decoders' identity with greedy decoding is tested in
test_decode_greedy.py)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import draftlattice as dl
from arpa_writer import random_arpa
from draftlattice import _core
from draftlattice.decode import LatticeDrafter
from draftlattice.decode.drafters.lattice import CommittedLmState, device_topk
from draftlattice.sample import sample_from_heads


def _models(tmp_path):
    out = []
    for seed in range(6):
        path = tmp_path / f"m{seed}.arpa"
        random_arpa(path, 1 + seed % 5, seed=40 + seed, n_words=7, consistent=seed % 2 == 0, with_unk=seed % 3 == 0)
        out.append(dl.NgramLM(path))
    return out


def test_committed_state_follows_growth_rollback_and_jumps(tmp_path):
    rng = random.Random(5)
    for lm in _models(tmp_path):
        for bos in (False, True):
            committed = CommittedLmState(lm, bos)
            context: list[int] = []
            for _ in range(60):
                move = rng.random()
                if move < 0.6:  # accepted tokens (ids 7, 8 are unknown to the LM)
                    context = context + [rng.randrange(9) for _ in range(rng.randint(0, 4))]
                elif move < 0.8:  # rollback
                    context = context[: rng.randint(0, len(context))]
                else:  # another sequence
                    context = [rng.randrange(9) for _ in range(rng.randint(0, 8))]
                assert committed.after(context) == lm.start(context, bos), (lm, context)


def test_proposals_equal_rescoring_the_whole_context(tmp_path):
    rng = random.Random(8)
    generator = torch.Generator().manual_seed(0)
    for lm in _models(tmp_path):
        drafter = LatticeDrafter(lm, k=3, p=4, alpha=0.7, bos=True)
        context = [rng.randrange(7) for _ in range(3)]
        for _ in range(25):
            logits = torch.randn(3, 9, generator=generator)
            got = drafter.propose(logits, context).tokens.numpy()
            lattice = drafter.lattice(logits)
            want = dl.rescore(lattice, lm, 4, 0.7, np.array(context), bos=True).tokens
            np.testing.assert_array_equal(got, want)
            if rng.random() < 0.7:  # accepted tokens
                context = context + [rng.randrange(7) for _ in range(rng.randint(1, 3))]
            elif rng.random() < 0.5:  # rollback: the core call restarts from the last tokens
                context = context[: rng.randint(0, len(context))]
            else:  # another sequence
                context = [rng.randrange(7) for _ in range(rng.randint(0, 6))]


def test_proposals_take_logits_of_any_float_dtype_layout_and_grad(tmp_path):
    """The plain float32 view and to_numpy's general path (grad, other dtypes, strides) agree."""
    lm = _models(tmp_path)[2]
    generator = torch.Generator().manual_seed(3)
    base = torch.randn(3, 9, generator=generator)
    want = LatticeDrafter(lm, k=3, p=3, alpha=0.5).propose(base, [1, 2]).tokens
    every_other = torch.zeros(3, 18)[:, ::2]  # [3, 9] with a column stride of 2
    every_other.copy_(base)
    for logits in (base.clone().requires_grad_(True), base.double(), every_other, base.T.contiguous().T):
        got = LatticeDrafter(lm, k=3, p=3, alpha=0.5).propose(logits, [1, 2]).tokens
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    halves = base.bfloat16()
    want_half = LatticeDrafter(lm, k=3, p=3, alpha=0.5).propose(halves.float(), [1, 2]).tokens
    torch.testing.assert_close(LatticeDrafter(lm, k=3, p=3, alpha=0.5).propose(halves, [1, 2]).tokens, want_half)


def test_proposals_name_bad_logits_and_keep_the_committed_state(tmp_path):
    lm = _models(tmp_path)[3]
    drafter = LatticeDrafter(lm, k=3, p=2, alpha=0.5)
    logits = torch.randn(3, 9)
    drafter.propose(logits, [1, 2])
    bad = logits.clone()
    bad[1, 4] = float("nan")
    with pytest.raises(ValueError, match="head 1 token 4 is nan"):
        drafter.propose(bad, [1, 2, 3])
    with pytest.raises(ValueError, match="head 0 has 0 tokens with a logit above -inf, fewer than k=3"):
        drafter.propose(torch.full((3, 9), -float("inf")), [1, 2, 3])
    assert drafter.committed.after([1, 2, 3]) == lm.start([1, 2, 3], True)


def test_samples_equal_sampling_after_the_whole_context(tmp_path):
    """Sampling mode uses the committed state too: the same drafts and q as sampling the
    full-support lattice after the whole context's tokens (same seeds)."""
    from draftlattice.decode import SamplingConfig

    rng = random.Random(3)
    sampling = SamplingConfig(temperature=0.9)
    for lm in _models(tmp_path):
        drafter = LatticeDrafter(lm, k=3, sample_alpha=0.6, bos=True)
        context = [rng.randrange(7) for _ in range(3)]
        for step in range(15):
            logits = torch.randn(3, 9, generator=torch.Generator().manual_seed(step))
            got = drafter.sample(logits, context, sampling, torch.Generator().manual_seed(step), n=3)
            logp = sampling.distribution(logits.double()).log().numpy()
            want = sample_from_heads(logp, 3, lm, 3, 0.6, np.array(context), True, torch.Generator().manual_seed(step))
            np.testing.assert_array_equal(got.tokens.numpy(), want.tokens)
            np.testing.assert_allclose(got.q.numpy(), want.q, rtol=1e-6, atol=1e-7)
            context = context + [rng.randrange(7) for _ in range(rng.randint(1, 3))]


def test_the_device_path_keeps_the_host_paths_lattice_and_drafts(tmp_path):
    # On an accelerator propose() takes the top k on the device (device_topk) and only those cross
    # to the host; with untied logits its lattice and drafts equal the host path's.
    generator = torch.Generator().manual_seed(3)
    for lm in _models(tmp_path):
        drafter = LatticeDrafter(lm, k=4, p=3, alpha=0.6, bos=True)
        for _ in range(10):
            logits = torch.randn(3, 9, generator=generator) * 2
            ids, logprobs = device_topk(logits, 4)
            lattice = drafter.lattice(logits)
            np.testing.assert_array_equal(ids, lattice.tokens)
            np.testing.assert_allclose(logprobs, lattice.logprobs, atol=1e-6)
            state = lm.start([1, 2], True)
            via_device, after = _core.draft_from_topk(ids, logprobs, lm, state, [3], 3, 0.6)
            via_host, _ = _core.draft_from_logits(logits.numpy(), 4, 1.0, lm, state, [3], 3, 0.6)
            np.testing.assert_array_equal(via_device, via_host)
            assert after == lm.start([1, 2, 3], True)
    bad = torch.randn(3, 9)
    bad[2, 5] = float("nan")
    with pytest.raises(ValueError, match="NaN or \\+inf logit"):
        device_topk(bad, 4)


def test_device_path_names_mismatched_top_k_arrays(tmp_path):
    lm = _models(tmp_path)[1]
    state = lm.start([], False)
    ids, logprobs = np.array([[1, 2, 3], [4, 5, 6]]), np.full((2, 2), -1.0, np.float32)
    with pytest.raises(ValueError, match=r"tokens shape \[2, 3\] != logprobs shape \[2, 2\]"):
        _core.draft_from_topk(ids, logprobs, lm, state, [], 1, 0.5)
    with pytest.raises(ValueError, match=r"tokens must have shape \[g, k\]"):
        _core.draft_from_topk(ids[0], logprobs[0], lm, state, [], 1, 0.5)
