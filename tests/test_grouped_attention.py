"""Grouped-query attention under an explicit mask (decode/attention.py): same hidden states as
transformers' own attention, no repeated cache, and the model's setting left as it was."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
import transformers.integrations.sdpa_attention as sdpa_module  # noqa: E402
from transformers import DynamicCache  # noqa: E402

from _hf_models import llama, qwen2  # noqa: E402
from draftlattice.decode.attention import GROUPED_SDPA, grouped_query_attention  # noqa: E402


def _tree_forward(model, prompt_length: int = 11, nodes: int = 6, seed: int = 0):
    """Hidden states of ``nodes`` tokens after a cached prompt, under a 4D mask in which each
    node sees the prompt (one hole in it) and a random set of earlier nodes (a tree-like mask)."""
    generator = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, 48, (1, prompt_length), generator=generator)
    cache = DynamicCache()
    model.base_model(input_ids=prompt, use_cache=True, cache=cache)
    allowed = torch.ones(1, 1, nodes, prompt_length + nodes, dtype=torch.bool)
    allowed[..., 3] = False  # a hole in the cache, as rows that accepted fewer tokens leave
    earlier = torch.rand(nodes, nodes, generator=generator) < 0.5
    allowed[..., prompt_length:] = (earlier.tril(-1) | torch.eye(nodes, dtype=torch.bool))[None, None]
    mask = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
    tokens = torch.randint(0, 48, (1, nodes), generator=generator)
    positions = torch.arange(prompt_length, prompt_length + nodes)[None]
    out = model.base_model(input_ids=tokens, position_ids=positions, attention_mask=mask, use_cache=True, cache=cache)
    return out.last_hidden_state


@pytest.mark.parametrize("make", [llama, qwen2])
def test_grouped_attention_gives_transformers_hidden_states_without_repeating_the_cache(make, monkeypatch):
    model, eager = make(), make()  # the same weights
    model.config._attn_implementation, eager.config._attn_implementation = "sdpa", "eager"
    with torch.inference_mode():
        reference = _tree_forward(model)
        by_eager = _tree_forward(eager)

        def no_copy(*args, **kwargs):
            raise AssertionError("the cache was repeated per query head")

        monkeypatch.setattr(sdpa_module, "repeat_kv", no_copy)
        with grouped_query_attention(model):
            assert model.config._attn_implementation == GROUPED_SDPA
            grouped = _tree_forward(model)
        with pytest.raises(AssertionError, match="repeated"):
            _tree_forward(model)  # outside the block transformers' own attention copies
    assert model.config._attn_implementation == "sdpa"
    torch.testing.assert_close(grouped, reference, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grouped, by_eager, rtol=1e-4, atol=1e-4)


def test_the_setting_is_restored_after_an_error_and_other_implementations_are_left_alone():
    model = llama(attn_implementation="sdpa")
    with pytest.raises(RuntimeError, match="inside"):
        with grouped_query_attention(model):
            raise RuntimeError("inside")
    assert model.config._attn_implementation == "sdpa"
    eager = llama(attn_implementation="eager")
    with grouped_query_attention(eager):
        assert eager.config._attn_implementation == "eager"
    assert eager.config._attn_implementation == "eager"


def test_a_forward_in_another_thread_meanwhile_computes_what_it_computes_without_the_switch():
    """Threads sharing one model (each running generate()): while one holds the switch, another
    thread's forward of a left-padded prompt gets sdpa's own mask and attention, bit for bit
    (found by tests/test_concurrency.py: it got no mask at all, transformers' choice for an
    attention name without a mask function of its own)."""
    import threading

    model = llama()
    ids = torch.tensor([[0, 0, 5, 6, 7], [1, 2, 3, 4, 5]])
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]])
    with torch.inference_mode():
        alone = model(ids, attention_mask=mask).logits
        meanwhile = {}
        with grouped_query_attention(model):
            thread = threading.Thread(
                target=lambda: meanwhile.setdefault("logits", model(ids, attention_mask=mask).logits)
            )
            thread.start()
            thread.join()
            with grouped_query_attention(model):  # nested / a second forward at once: restored at the last exit
                pass
            assert model.config._attn_implementation == GROUPED_SDPA
    assert model.config._attn_implementation == "sdpa"
    assert torch.equal(meanwhile["logits"], alone)
