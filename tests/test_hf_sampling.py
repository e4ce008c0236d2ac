"""generate(do_sample=True, custom_generate=dlhf.generate) samples the target's own law.

Monte-Carlo law test on a tiny vocabulary: many rows of one prompt in one batched call, the
empirical law of the 3 new tokens against the exact law enumerated from the model with
generate()'s warpers (temperature, top-k), by a chi-square test; for each sampling rule
(``draft_sample``: p sampled drafts with recursive rejection, the p best drafts with the tree
rule, one draft with block verification), with and without an n-gram LM. The rules' own exact
laws are checked by enumeration in test_verify_multi_draft.py.
"""

from __future__ import annotations

import itertools

import pytest
import torch

import draftlattice.hf as dlhf
from _hf_models import disagreeing_heads, llama, misreporting_propose, ngram_over, peaked_model_and_heads
from _laws import law_p_value
from draftlattice.verify import sampling_distribution

pytestmark = pytest.mark.usefixtures("one_thread")

V, NEW, T, TOP_K = 6, 3, 0.8, 5
PROMPT = [1, 2, 3]


def peaked_model():
    """The tiny Llama with its output layer scaled up: a far-from-uniform law (test power)."""
    model = llama(vocab=V, seed=3)
    with torch.no_grad():
        model.lm_head.weight.mul_(40)
    return model


def exact_law(model) -> dict[tuple[int, ...], float]:
    """P(x1 x2 x3 | prompt) under temperature T and top-k, by enumeration."""
    law = {}
    with torch.inference_mode():
        for seq in itertools.product(range(V), repeat=NEW):
            ids = torch.tensor([PROMPT + list(seq)])
            logits = model(ids).logits[0, len(PROMPT) - 1 : len(PROMPT) - 1 + NEW].float()
            p = sampling_distribution(logits, T, TOP_K)
            law[seq] = float(torch.prod(p[torch.arange(NEW), torch.tensor(seq)]))
    return law


def sampled_counts(model, heads, n, top_k=TOP_K, **kwargs) -> tuple[dict[tuple[int, ...], int], object]:
    ids = torch.tensor([PROMPT] * n)
    with torch.inference_mode():
        out = model.generate(
            ids,
            do_sample=True,
            temperature=T,
            top_k=top_k,
            max_new_tokens=NEW,
            pad_token_id=0,
            eos_token_id=None,
            custom_generate=dlhf.generate,
            draft_heads=heads,
            return_dict_in_generate=True,
            **kwargs,
        )
    counts: dict[tuple[int, ...], int] = {}
    for row in out.sequences[:, len(PROMPT) :].tolist():
        counts[tuple(row)] = counts.get(tuple(row), 0) + 1
    return counts, out.draft_stats


@pytest.mark.parametrize("rule", ["multi", "tree", "block"])
@pytest.mark.parametrize("use_lm", [False, True])
def test_sampling_preserves_the_target_law(tmp_path, use_lm, rule):
    model = peaked_model()
    heads = disagreeing_heads(model, horizon=3, seed=4)
    lm = ngram_over(tmp_path, [[(3 * i + j) % V for j in range(12)] for i in range(V)], order=2) if use_lm else None
    torch.manual_seed(11)
    n = 6000
    counts, stats = sampled_counts(
        model, heads, n, draft_lm=lm, draft_alpha=1.0, draft_sample_alpha=1.0, draft_k=4, draft_p=3, draft_sample=rule
    )
    assert sum(counts.values()) == n
    assert 0 < stats.mean_accepted < 2  # some drafts accepted, some rejected
    assert law_p_value(exact_law(model), counts) > 1e-3


def test_misreported_proposal_law_is_detected(monkeypatch):
    """The law test catches a sampling path whose q is not the law the drafts came from."""
    from draftlattice.decode.drafters import LatticeDrafter

    monkeypatch.setattr(LatticeDrafter, "propose", misreporting_propose(V))
    model = peaked_model()
    heads = dlhf.DraftHeads.for_model(model, horizon=3)
    torch.manual_seed(13)
    counts, _ = sampled_counts(model, heads, 6000, draft_p=3)
    assert law_p_value(exact_law(model), counts) < 1e-3


def test_bad_sampling_rule_is_named():
    model = peaked_model()
    heads = dlhf.DraftHeads.for_model(model, horizon=3)
    with pytest.raises(ValueError, match="draft_sample must be one of"):
        sampled_counts(model, heads, 1, draft_sample="beam")
    with pytest.raises(ValueError, match="draft_sample_alpha must be a finite number"):
        sampled_counts(model, heads, 1, draft_sample_alpha=-1.0)


def test_law_test_detects_a_wrong_law():
    """The same test rejects samples of another temperature (so it can fail)."""
    model = peaked_model()
    law = exact_law(model)
    torch.manual_seed(12)
    ids = torch.tensor([PROMPT] * 6000)
    with torch.inference_mode():
        out = model.generate(
            ids, do_sample=True, temperature=1.3, top_k=TOP_K, max_new_tokens=NEW, pad_token_id=0, eos_token_id=None
        )
    counts: dict[tuple[int, ...], int] = {}
    for row in out[:, len(PROMPT) :].tolist():
        counts[tuple(row)] = counts.get(tuple(row), 0) + 1
    assert law_p_value(law, counts) < 1e-3


@pytest.mark.parametrize("rule", ["multi", "tree", "block"])
@pytest.mark.parametrize("use_lm", [False, True])
def test_sampling_with_top_k_1_is_greedy_on_padded_batches(tmp_path, use_lm, rule):
    """top_k=1 makes the target law a point mass: the sampling path (proposal, block
    verification, padded rows, EOS, repetition penalty) must then give greedy generate()'s output."""
    from _hf_models import greedy, left_padded, qwen2

    model = qwen2()
    heads = disagreeing_heads(model, horizon=4, seed=6)
    lm = ngram_over(tmp_path, [[(5 * i + j) % 48 for j in range(12)] for i in range(48)]) if use_lm else None
    ids, mask = left_padded([[3, 4, 5], [7, 7, 7, 7, 9], [1]])
    for extra in ({}, {"repetition_penalty": 1.3}, {"eos_token_id": [5, 9]}):
        expected = greedy(model, ids, mask, max_new_tokens=12, **extra)
        with torch.inference_mode():
            out = model.generate(
                ids,
                attention_mask=mask,
                do_sample=True,
                top_k=1,
                max_new_tokens=12,
                pad_token_id=0,
                custom_generate=dlhf.generate,
                draft_heads=heads,
                draft_lm=lm,
                draft_sample=rule,
                draft_p=3,
                **{"eos_token_id": None, **extra},
            )
        assert out.tolist() == expected.tolist(), extra


def topk_law(model, prompt: list[int], new: int, top_k: int) -> dict[tuple[int, ...], float]:
    """P(x1..x_new | prompt) under temperature T and top-k, enumerated over each position's
    top-k support only (the rest has probability 0): feasible at any vocabulary size."""
    law: dict[tuple[int, ...], float] = {}

    def walk(prefix: list[int], prob: float) -> None:
        if len(prefix) == new:
            law[tuple(prefix)] = prob
            return
        logits = model(torch.tensor([prompt + prefix])).logits[0, -1].float()
        p = sampling_distribution(logits, T, top_k)
        for token in torch.nonzero(p).flatten().tolist():
            walk(prefix + [token], prob * float(p[token]))

    with torch.inference_mode():
        walk([], 1.0)
    return law


@pytest.mark.parametrize("rule,use_lm", [("multi", True), ("block", False), ("token", True)])
def test_sampling_law_at_the_default_models_vocabulary(tmp_path, rule, use_lm):
    """V = 49,152 (SmolLM2's): the full-support lattice at that size (top-k and the mass outside
    it to the host, the law outside it on the device) keeps the target's law exactly."""
    vocab, top_k, n, batch = 49_152, 4, 1200, 200
    model, heads = peaked_model_and_heads(vocab)
    law = topk_law(model, PROMPT, NEW, top_k)
    support = sorted({t for seq in law for t in seq})
    lm = ngram_over(tmp_path, [[support[(3 * i + j) % len(support)] for j in range(12)] for i in range(8)], order=2)
    torch.manual_seed(12)
    counts: dict[tuple[int, ...], int] = {}
    for _ in range(n // batch):  # batches: the scores of every row's drafts are [rows, V] each
        part, _ = sampled_counts(
            model,
            heads,
            batch,
            top_k,
            draft_lm=lm if use_lm else None,
            draft_sample_alpha=1.0,
            draft_k=6,
            draft_p=3,
            draft_sample=rule,
        )
        for seq, count in part.items():
            counts[seq] = counts.get(seq, 0) + count
    assert law_p_value(law, counts) > 1e-3
