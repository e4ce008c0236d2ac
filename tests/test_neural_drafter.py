"""Neural rescoring drafts (decode/drafters/neural.py): the left-to-right rule against a reference
that reruns the small LM on every full sequence, and greedy output through the engine."""

from __future__ import annotations

import pytest
import torch

import draftlattice.hf as dlhf
from _hf_models import V, greedy, llama
from draftlattice.decode import Engine, NeuralDrafter, RowStopper
from draftlattice.decode.drafters import topk_lattice


def reference_draft(lm, head_logits, context, k, alpha):
    """Algorithm 2 by brute force: the LM rescored on the whole sequence at every position."""
    ids, logprobs = topk_lattice(head_logits[None], k)
    chosen = []
    for i in range(head_logits.shape[0]):
        seq = torch.tensor([context + chosen])
        lm_logp = lm(input_ids=seq).logits[0, -1].float().log_softmax(-1)
        score = logprobs[0, i] + alpha * lm_logp[ids[0, i]]
        chosen.append(int(ids[0, i, score.argmax()]))
    return chosen


@pytest.mark.parametrize("alpha", [0.0, 0.7, 5.0])
def test_drafts_follow_the_rule_for_every_row(alpha):
    lm = llama(seed=5)
    drafter = NeuralDrafter(lm, k=4, alpha=alpha)
    gen = torch.Generator().manual_seed(3)
    head_logits = torch.randn(3, 3, V, generator=gen) * 2
    contexts = [[1, 2, 3, 4, 5, 6], [7], [9, 10, 11]]  # different lengths: left padding
    with torch.inference_mode():
        drafts, sampled = drafter.finish(drafter.propose(head_logits, None, 0), [], contexts, head_logits.device)
        assert sampled is None and drafts.shape == (3, 1, 3)
        for b in range(3):
            assert drafts[b, 0].tolist() == reference_draft(lm, head_logits[b], contexts[b], 4, alpha)
    if alpha == 0.0:  # no LM weight: each head's top-1
        assert torch.equal(drafts[:, 0], head_logits.argmax(-1))


def test_window_keeps_only_recent_context():
    lm = llama(seed=5)
    head_logits = torch.randn(1, 2, V, generator=torch.Generator().manual_seed(4)) * 2
    context = list(range(1, 40))
    with torch.inference_mode():
        short = NeuralDrafter(lm, k=4, alpha=3.0, window=5)
        drafts, _ = short.finish(short.propose(head_logits, None, 0), [], [context], head_logits.device)
        assert drafts[0, 0].tolist() == reference_draft(lm, head_logits[0], context[-5:], 4, 3.0)


def test_greedy_output_equals_generate():
    model, lm = llama(), llama(seed=9)
    torch.manual_seed(0)
    heads = dlhf.DraftHeads.for_model(model, horizon=4)
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    ids = torch.tensor([prompt])
    engine = Engine(model, heads, NeuralDrafter(lm, k=4, alpha=1.0), layout="batch")
    tokens, stats = engine.run(ids, RowStopper(ids, 24, set(), [], 0), max_length=len(prompt) + 24)
    assert tokens[0] == greedy(model, ids, max_new_tokens=24)[0, len(prompt) :].tolist()
    assert stats.new_tokens == 24


def test_bad_settings_are_named():
    lm = llama()
    with pytest.raises(ValueError, match="k must be a positive int"):
        NeuralDrafter(lm, k=0)
    with pytest.raises(ValueError, match="no sampling mode"):
        NeuralDrafter(lm).propose(torch.zeros(1, 2, V), object(), 1)
    with pytest.raises(ValueError, match="vocabulary"):
        NeuralDrafter(lm).propose(torch.zeros(1, 2, V + 1), None, 0)
