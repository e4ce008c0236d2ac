"""The lean step at fixed shapes (draftlattice.lean.GraphedStep): every verification forward
padded to a node budget, its keys/values written at slots given as a tensor, the whole fixed cache
attended under a mask. On CUDA the forwards are captured as graphs; here, on the CPU, the same
fixed-shape forwards run eagerly, which is what these tests check.

References: transformers' own ``generate()`` (float32 greedy), the plain lean step's forward, and
an exactly enumerated output law for sampling.
"""

from __future__ import annotations

import pytest
import torch

import draftlattice.hf as dlhf
from _engine_models import PROMPTS, trained
from _hf_models import left_padded, llama
from _laws import sampled_continuations_p_value
from draftlattice.decode.cache import additive_mask
from draftlattice.lean import GraphedStep, LeanLlama
from draftlattice.verify import build_tree

pytestmark = pytest.mark.usefixtures("one_thread")


def _generate(model, ids, mask, step, **drafting):
    return model.generate(
        ids,
        attention_mask=mask,
        max_new_tokens=24,
        do_sample=False,
        pad_token_id=0,
        custom_generate=dlhf.generate,
        draft_step=step,
        return_dict_in_generate=True,
        **drafting,
    )


@pytest.mark.parametrize("budgets", [(1, 4, 8, 16, 32), (2, 8)])
def test_drafted_greedy_through_the_graphed_step_equals_generate(budgets):
    model, heads = trained()
    step = GraphedStep(LeanLlama(model, "dense"), capacity=96, budgets=budgets)
    ids, mask = left_padded(PROMPTS)
    expected = model.generate(ids, attention_mask=mask, max_new_tokens=24, do_sample=False, pad_token_id=0)
    got = _generate(model, ids, mask, step, draft_heads=heads, draft_p=3)
    assert torch.equal(got.sequences, expected)
    assert got.draft_stats.tokens_per_call > 1.2  # drafts were accepted: the cache's edits ran
    # every step after the prompt's ran at a budget; with budgets (2, 8), trees past 8 nodes did not
    assert step.replays > 0 and (step.replays < got.draft_stats.target_calls - 1) == (budgets == (2, 8))


def test_the_cache_is_reused_across_calls_without_leaking_between_them():
    model, heads = trained()
    step = GraphedStep(LeanLlama(model, "dense"), capacity=96)
    for prompts in (PROMPTS, [[9, 9, 1], [2, 3, 4, 5, 6, 7, 8]], PROMPTS[:1]):
        ids, mask = left_padded(prompts)
        expected = model.generate(ids, attention_mask=mask, max_new_tokens=24, do_sample=False, pad_token_id=0)
        assert torch.equal(_generate(model, ids, mask, step, draft_heads=heads, draft_p=2).sequences, expected)
    assert sorted(step._caches) == [1, 2, 5]  # one fixed buffer per batch size


def test_a_padded_tree_forward_equals_the_plain_steps_at_its_nodes():
    model, _ = trained()
    lean = LeanLlama(model, "dense")
    step = GraphedStep(lean, capacity=64)
    prompt = torch.tensor([[3, 4, 5, 6, 7]])
    tree = build_tree(torch.tensor([[[8, 9, 1], [8, 2, 0]]]), root_token=torch.tensor([4]), position_offset=5)
    plain_cache, fixed_cache = lean.new_cache(1, 16), step.new_cache(1, 16)
    with torch.inference_mode():
        positions = torch.arange(5).unsqueeze(0)
        lean.hidden(prompt, positions, None, plain_cache)
        step.hidden(prompt, positions, None, fixed_cache)
        mask = additive_mask(torch.ones(1, 5, dtype=torch.bool), tree.ancestor, lean.dtype)
        want = lean.hidden(tree.tokens, tree.position_ids, mask, plain_cache)
        got = step.hidden(tree.tokens, tree.position_ids, mask, fixed_cache)
    assert got.shape == want.shape == (1, tree.size, lean.hidden_size)  # padded to 8 nodes, 6 returned
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert fixed_cache.length == plain_cache.length == 5 + tree.size
    torch.testing.assert_close(fixed_cache.keys[0][:, :, :11], plain_cache.keys[0][:, :, :11], rtol=1e-5, atol=1e-5)


def test_the_context_copy_alone_through_the_graphed_step_equals_generate():
    model, _ = trained()
    step = GraphedStep(LeanLlama(model, "dense"), capacity=96)
    ids, mask = left_padded([[5, 6, 7, 5, 6, 7, 5, 6], [1, 2, 1, 2, 1]])
    expected = model.generate(ids, attention_mask=mask, max_new_tokens=24, do_sample=False, pad_token_id=0)
    got = _generate(model, ids, mask, step, draft_heads=None, draft_lookup=2, draft_lookup_tokens=5)
    assert torch.equal(got.sequences, expected)


def test_sampling_through_the_graphed_step_keeps_the_models_law():
    """Lossless sampling (p sampled drafts, recursive rejection over their tree) through padded,
    fixed-shape forwards: the output law is the model's own, enumerated over every continuation."""
    model = llama(vocab=6, seed=3)
    with torch.no_grad():
        model.lm_head.weight.mul_(40)
    step = GraphedStep(LeanLlama(model, "dense"), capacity=48)
    assert sampled_continuations_p_value(model, step, lambda batch: model(batch).logits, seed=7) > 1e-3
    assert step.replays > 0


def test_bad_settings_are_refused_with_a_clear_error():
    model, heads = trained()
    lean = LeanLlama(model, "dense")
    with pytest.raises(ValueError, match="runs a dense LeanLlama"):
        GraphedStep(model)
    with pytest.raises(ValueError, match="budgets must be increasing"):
        GraphedStep(lean, budgets=(4, 2))
    with pytest.raises(ValueError, match="capacity must be an int above the largest budget 32"):
        GraphedStep(lean, capacity=32)
    ids, mask = left_padded(PROMPTS)
    with pytest.raises(ValueError, match="holds 40 slots per row: .* do not fit"):
        _generate(model, ids, mask, GraphedStep(lean, capacity=40), draft_heads=heads, draft_p=3)
    with pytest.raises(ValueError, match="verifies token trees"):
        _generate(model, ids, mask, GraphedStep(lean, capacity=96), draft_heads=heads, draft_p=3, draft_verify="batch")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="not applicable: CUDA is not available")
def test_drafted_greedy_through_cuda_graphs_equals_generate_on_cuda():
    import copy

    model, heads = trained()
    model, heads = copy.deepcopy(model).cuda(), copy.deepcopy(heads).cuda()
    step = GraphedStep(LeanLlama(model, "dense"), capacity=96)
    for prompts in (PROMPTS, PROMPTS[1:3]):  # graphs captured by the first call, replayed by the second
        ids, mask = (t.cuda() for t in left_padded(prompts))
        expected = model.generate(ids, attention_mask=mask, max_new_tokens=24, do_sample=False, pad_token_id=0)
        assert torch.equal(_generate(model, ids, mask, step, draft_heads=heads, draft_p=3).sequences, expected)
    assert step.graphs_on and step.replays > 0
    assert all(forward.graph is not None for forward in step._forwards.values())
