"""Greedy verification of several drafts: hand cases, lengths, and equality with plain greedy
decoding of a tiny random Hugging Face Llama."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest
import torch

from _verify_helpers import greedy_reference, make_drafts, tiny_llama
from draftlattice.verify import greedy_accept


def _onehot_logits(tokens: torch.Tensor, V: int) -> torch.Tensor:
    return torch.nn.functional.one_hot(tokens, V).double() + 0.01 * torch.rand(*tokens.shape, V, dtype=torch.float64)


def test_core_package_does_not_import_torch():
    code = "import sys, draftlattice; assert 'torch' not in sys.modules; import draftlattice.verify as v; assert draftlattice.verify is v"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_hand_cases_tokens_and_logits():
    # target greedy tokens after the context and each draft prefix
    drafts = torch.tensor([[[5, 6, 7], [5, 6, 9], [5, 6, 7], [1, 2, 3]]])
    target = torch.tensor([[[5, 6, 8, 0], [5, 6, 8, 0], [5, 6, 8, 0], [5, 1, 1, 1]]])
    for t in (target, _onehot_logits(target, 10)):
        best, num, nxt = greedy_accept(drafts, t)
        assert best.tolist() == [0] and num.tolist() == [2] and nxt.tolist() == [8]
    # all accepted: next token is the bonus token at position h
    target2 = torch.tensor([[[5, 6, 7, 4], [5, 6, 7, 0], [5, 6, 7, 4], [5, 0, 0, 0]]])
    best, num, nxt = greedy_accept(drafts, target2)
    assert (best.item(), num.item(), nxt.item()) == (0, 3, 4)
    # ties go to the higher-ranked (lower index) draft, even when it is not first in the batch order
    target3 = torch.tensor([[[9, 0, 0, 0], [9, 0, 0, 0], [9, 0, 0, 0], [1, 2, 0, 0]]])
    assert greedy_accept(drafts, target3).best_draft.tolist() == [3]
    target4 = torch.tensor([[[9, 0, 0, 0], [9, 0, 0, 0], [9, 0, 0, 0], [9, 0, 0, 0]]])
    best, num, nxt = greedy_accept(drafts, target4)
    assert (best.item(), num.item(), nxt.item()) == (0, 0, 9)


def test_unbatched_and_lengths():
    drafts = torch.tensor([[5, 6, 7], [5, 6, 0]])
    target = torch.tensor([[5, 6, 7, 2], [5, 6, 7, 3]])
    r = greedy_accept(drafts, target)
    assert r.best_draft.dim() == 0 and (r.best_draft.item(), r.num_accepted.item(), r.next_token.item()) == (0, 3, 2)
    # draft 0 cut to length 1: draft 1 (length 3, padding token 0 ignored past length 2) wins
    r = greedy_accept(drafts[None], target[None], lengths=torch.tensor([[1, 2]]))
    assert (r.best_draft.item(), r.num_accepted.item(), r.next_token.item()) == (1, 2, 7)
    # per-row lengths [B]
    r = greedy_accept(drafts[None].repeat(2, 1, 1), target[None].repeat(2, 1, 1), lengths=torch.tensor([0, 3]))
    assert r.num_accepted.tolist() == [0, 3] and r.next_token.tolist() == [5, 2] and r.best_draft.tolist() == [0, 0]


def test_batched_matches_per_row_loop():
    rng = torch.Generator().manual_seed(0)
    B, P, H, V = 32, 5, 4, 3
    drafts = torch.randint(V, (B, P, H), generator=rng)
    target = torch.randint(V, (B, P, H + 1), generator=rng)
    lengths = torch.randint(H + 1, (B, P), generator=rng)
    best, num, nxt = greedy_accept(drafts, target, lengths)
    for b in range(B):
        nums = []
        for d in range(P):
            k = 0
            while k < int(lengths[b, d]) and drafts[b, d, k] == target[b, d, k]:
                k += 1
            nums.append(k)
        d = max(range(P), key=lambda i: (nums[i], -i))
        assert (int(best[b]), int(num[b]), int(nxt[b])) == (d, nums[d], int(target[b, d, nums[d]]))


@pytest.mark.parametrize("seed", [0, 1])
@torch.no_grad()
def test_multi_draft_greedy_equals_greedy_decoding(seed):
    model = tiny_llama(seed)
    V = model.config.vocab_size
    rng = random.Random(seed)
    prompt = [rng.randrange(V) for _ in range(5)]
    N, P, H = 30, 4, 4
    ref = greedy_reference(model, prompt, N + H)
    hf = model.generate(torch.tensor([prompt]), max_new_tokens=N + H, do_sample=False, pad_token_id=0)
    assert hf[0].tolist() == ref  # the reference is Hugging Face's greedy generate()
    ids = list(prompt)
    accepted_total = steps = 0
    while len(ids) < len(prompt) + N:
        n = len(ids)
        drafts = make_drafts(rng, ref[n : n + H], P, H, V)
        batch = torch.cat([torch.tensor(ids).expand(P, n), drafts], dim=1)
        logits = model(input_ids=batch).logits[:, n - 1 :]  # [p, h+1, V]
        best, num, nxt = greedy_accept(drafts[None], logits[None])
        k = int(num)
        ids += drafts[int(best), :k].tolist() + [int(nxt)]
        assert ids == ref[: len(ids)]
        accepted_total += k
        steps += 1
    assert accepted_total > steps  # the drafts were useful, so the test covers acceptance
