"""Plain sampling on a lean step (draftlattice.decode.plain_loop, the plug-in's draft_step without
heads or copy under do_sample=True): generate()'s law, drawn by inversion from torch's generator,
where the step computes the model's logits (a dense float32 step): with generate()'s processors,
EOS and padding, left-padded batches and a streamer; a quantized step draws from its own law;
bad input is refused clearly."""

from __future__ import annotations

import pytest
import torch

from _hf_models import left_padded, llama
from draftlattice.hf import generate
from draftlattice.lean import LeanLlama

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPTS = [[3, 4, 5, 6, 3, 4], [7, 8, 9], [10, 20, 30, 40, 10, 20, 30]]


@pytest.fixture(scope="module")
def model():
    return llama(seed=5)


def _sampled(model, ids, mask, seed: int, **kwargs):
    torch.manual_seed(seed)
    with torch.inference_mode():
        return model.generate(ids, attention_mask=mask, do_sample=True, pad_token_id=0, **kwargs)


def _processors(model, ids, mask, **settings):
    """The logits processors generate() hands a custom_generate for these settings."""

    def capture(model, input_ids, logits_processor=None, **_):
        return logits_processor

    return model.generate(ids, attention_mask=mask, do_sample=True, custom_generate=capture, **settings)


def _reference(model, ids, mask, seed: int, max_new_tokens: int, eos=(), **settings):
    """generate()'s law drawn by inversion from torch's generator: the float model's full forward
    over the sequence so far, generate()'s processors, the softmax, one uniform a row and the
    first token whose cumulative mass passes it; finished rows take the pad token (0)."""
    processors = _processors(model, ids, mask, max_new_tokens=max_new_tokens, pad_token_id=0, **settings)
    torch.manual_seed(seed)
    sequences, mask = ids.clone(), mask.clone()
    finished = torch.zeros(len(ids), dtype=torch.bool)
    with torch.inference_mode():
        for _ in range(max_new_tokens):
            positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 1)
            logits = model(sequences, attention_mask=mask, position_ids=positions).logits[:, -1].float()
            probs = torch.softmax(processors(sequences, logits), dim=-1)
            cdf = probs.cumsum(-1)
            u = torch.rand(len(ids), 1)
            tokens = (cdf > u * cdf[:, -1:]).int().argmax(-1)
            tokens = torch.where(finished, torch.zeros_like(tokens), tokens)
            sequences = torch.cat([sequences, tokens[:, None]], dim=1)
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            finished |= torch.isin(tokens, torch.tensor(list(eos), dtype=tokens.dtype))
            if bool(finished.all()):
                break
    return sequences


@pytest.mark.parametrize(
    "settings",
    [
        dict(temperature=0.7, top_k=0),
        dict(temperature=1.3, top_p=0.8, top_k=0),
        dict(temperature=0.9, top_k=5, repetition_penalty=1.4),  # a processor that reads the sequence
        dict(temperature=0.8, top_k=0, eos_token_id=[11, 17]),  # rows stop at EOS, then take the pad token
    ],
)
def test_plain_sampling_on_a_float32_step_draws_generates_law(model, settings):
    """With the same seed, the tokens of generate()'s law drawn by inversion (the reference
    replays the float model and generate()'s own processors); rows left-padded."""
    step = LeanLlama(model, "dense")
    ids, mask = left_padded(PROMPTS)
    plug = dict(custom_generate=generate, draft_step=step, draft_heads=None)
    eos = settings.get("eos_token_id", ())
    for seed in range(4):
        expected = _reference(model, ids, mask, seed, 12, eos, **settings)
        got = _sampled(model, ids, mask, seed, max_new_tokens=12, **plug, **settings)
        assert got.tolist() == expected.tolist(), (seed, settings)


def test_one_row_streams_and_counts_a_call_a_token(model):
    step = LeanLlama(model, "dense")
    ids = torch.tensor([PROMPTS[0]])

    class Streamer:
        def __init__(self):
            self.parts = []

        def put(self, value):
            self.parts.append(value.tolist())

        def end(self):
            self.parts.append("end")

    streamer = Streamer()
    out = _sampled(
        model,
        ids,
        None,
        3,
        max_new_tokens=9,
        temperature=0.7,
        custom_generate=generate,
        draft_step=step,
        draft_heads=None,
        draft_streamer=streamer,
        return_dict_in_generate=True,
    )
    new = out.sequences[0, ids.shape[1] :].tolist()
    assert streamer.parts[0] == ids.tolist() and streamer.parts[-1] == "end"
    assert [t for part in streamer.parts[1:-1] for t in part] == new
    stats = out.draft_stats
    assert (stats.target_calls, stats.prefill_calls, stats.new_tokens, stats.tokens_per_call) == (9, 1, 9, 1.0)
    assert stats.mean_nodes == 1.0
    assert _reference(model, ids, torch.ones_like(ids), 3, 9, temperature=0.7).tolist() == out.sequences.tolist()


def test_an_int4_step_samples_its_own_law(model):
    """A quantized step draws from its own logits: with the same seed, each first token is the
    draw by inversion from the softmax of the step's tempered logits (at T = 0.05 the float
    model's law would draw other tokens in a few of the 64 rows)."""
    step = LeanLlama(model, "int4", kernel="torch")
    ids = torch.tensor([PROMPTS[1]] * 64)
    with torch.inference_mode():
        hidden = step.hidden(ids[:1], torch.arange(3).unsqueeze(0), None, step.new_cache(1, 8))
        law = torch.softmax(step.logits(hidden[:, -1]) / 0.05, dim=-1).expand(len(ids), -1)
        float_law = torch.softmax(model(ids[:1]).logits[:, -1].float() / 0.05, dim=-1).expand(len(ids), -1)
    plug = dict(custom_generate=generate, draft_step=step, draft_heads=None)
    for seed in range(3):
        out = _sampled(model, ids, None, seed, max_new_tokens=1, temperature=0.05, top_k=0, **plug)
        torch.manual_seed(seed)
        u = torch.rand(len(ids), 1)
        assert out[:, -1].tolist() == _inverted(law, u).tolist()
        assert out[:, -1].tolist() != _inverted(float_law, u).tolist()


def test_bad_input_is_refused(model):
    step = LeanLlama(model, "dense")
    ids = torch.tensor([PROMPTS[0]])
    plug = dict(custom_generate=generate, draft_step=step, draft_heads=None)
    with pytest.raises(ValueError, match="step was built for another model"):
        _sampled(llama(seed=5, num_hidden_layers=1), ids, None, 0, max_new_tokens=3, **plug)
    with pytest.raises(ValueError, match="outside the model's vocabulary"):
        _sampled(model, torch.tensor([[3, 999]]), None, 0, max_new_tokens=3, **plug)
    with pytest.raises(ValueError, match="use draft_sample=.tree."):  # the copy alone samples by the tree rule only
        _sampled(model, ids, None, 0, max_new_tokens=3, draft_lookup=2, **plug)
    from transformers import DynamicCache

    from draftlattice.decode import RowStopper, plain_loop
    from draftlattice.decode.target import cache_keyword

    filled = DynamicCache()
    with torch.inference_mode():
        model.base_model(ids, use_cache=True, **{cache_keyword(model): filled})
    with pytest.raises(ValueError, match="a lean step decodes into its own cache"):
        plain_loop.run(step, model, ids, RowStopper(ids, 3, set(), [], 0), lambda i, s: s, {"past_key_values": filled})


def _inverted(probs, u):
    cdf = probs.cumsum(-1)
    return (cdf > u * cdf[:, -1:]).int().argmax(-1)
