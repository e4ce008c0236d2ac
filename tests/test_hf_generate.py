"""draftlattice.hf.generate through model.generate(custom_generate=...) equals greedy generate()."""

from __future__ import annotations

import pytest
import torch

import draftlattice.hf as dlhf
from _hf_models import MODELS, greedy, left_padded, own_ngram

pytestmark = pytest.mark.usefixtures("one_thread")

PROMPTS = [[3, 4, 5], [7, 7, 7, 7, 9], [1], [10, 20, 30, 40, 11, 12], [5, 6]]


@pytest.fixture(scope="module", params=sorted(MODELS))
def setup(request, tmp_path_factory):
    """(model, heads, LM over the model's own greedy continuations: drafts often right, not always)."""
    model = MODELS[request.param]()
    heads = dlhf.DraftHeads.for_model(model, horizon=4)
    return model, heads, own_ngram(model, tmp_path_factory.mktemp(request.param), PROMPTS)


def count_forwards(model):
    calls = []
    handle = model.base_model.register_forward_hook(lambda *args: calls.append(1))
    return calls, handle


def draft_generate(model, ids, mask, heads, **kwargs):
    kwargs.setdefault("pad_token_id", 0)
    kwargs.setdefault("eos_token_id", None)
    with torch.inference_mode():
        return model.generate(
            ids,
            attention_mask=mask,
            do_sample=False,
            custom_generate=dlhf.generate,
            draft_heads=heads,
            return_dict_in_generate=True,
            **kwargs,
        )


@pytest.mark.parametrize("verify", ["tree", "batch"])
@pytest.mark.parametrize("use_lm", [False, True])
def test_batch1_equals_greedy_generate(setup, verify, use_lm):
    model, heads, lm = setup
    accepted = 0
    for i, prompt in enumerate(PROMPTS):
        for new in (1, 2, 5, 13):  # lengths ending inside and at the end of blocks
            ids = torch.tensor([prompt])
            expected = greedy(model, ids, max_new_tokens=new)
            calls, handle = count_forwards(model)
            out = draft_generate(
                model,
                ids,
                None,
                heads,
                max_new_tokens=new,
                draft_lm=lm if use_lm else None,
                draft_verify=verify,
                draft_p=1 + i % 4,
                draft_alpha=2.0,
            )
            handle.remove()
            assert out.sequences.tolist() == expected.tolist(), (prompt, new)
            stats = out.draft_stats
            assert len(calls) == stats.target_calls == 1 + len(stats.accepted)  # one forward per step
            assert stats.new_tokens == new
            gained = 1 + len(stats.accepted) + sum(map(sum, stats.accepted))  # cut at new inside a block
            assert new <= gained < new + heads.horizon
            accepted += sum(map(sum, stats.accepted))
    if use_lm:
        assert accepted > 0  # the LM knows the continuations: drafts are accepted (and verified)


@pytest.mark.parametrize("verify", ["tree", "batch"])
@pytest.mark.parametrize("use_lm", [False, True])
def test_left_padded_batch_equals_greedy_generate(setup, verify, use_lm):
    model, heads, lm = setup
    rows_differ = False
    for rows in ([0, 1, 3], [2, 4, 1], [3, 0, 2]):
        ids, mask = left_padded([PROMPTS[r] for r in rows])
        for new in (4, 11):
            expected = greedy(model, ids, mask, max_new_tokens=new)
            out = draft_generate(
                model,
                ids,
                mask,
                heads,
                max_new_tokens=new,
                draft_lm=lm if use_lm else None,
                draft_verify=verify,
                draft_p=3,
                draft_alpha=2.0,
            )
            assert out.sequences.tolist() == expected.tolist(), (rows, new)
            rows_differ |= any(len(set(step)) > 1 for step in out.draft_stats.accepted)
    if use_lm:
        assert rows_differ  # rows accepted different numbers of tokens in one call


@pytest.mark.parametrize("verify", ["tree", "batch"])
def test_eos_inside_a_block(setup, verify):
    model, heads, lm = setup
    ids, mask = left_padded([PROMPTS[0], PROMPTS[3], PROMPTS[4]])
    plain = greedy(model, ids, mask, max_new_tokens=16)
    hits = 0
    for eos in sorted(set(plain[:, -16:][:, 3:9].reshape(-1).tolist()))[:6]:  # tokens met mid-way
        for eos_ids in (eos, [eos, (eos + 1) % model.config.vocab_size]):
            expected = greedy(model, ids, mask, max_new_tokens=16, eos_token_id=eos_ids, pad_token_id=0)
            out = draft_generate(
                model,
                ids,
                mask,
                heads,
                max_new_tokens=16,
                eos_token_id=eos_ids,
                draft_lm=lm,
                draft_verify=verify,
                draft_alpha=2.0,
            )
            assert out.sequences.tolist() == expected.tolist(), eos_ids
            stops = set([eos_ids] if isinstance(eos_ids, int) else eos_ids)
            hits += sum(any(t in stops for t in row[:-1]) for row in expected[:, ids.shape[1] :].tolist())
    assert hits > 0  # rows stopped by an EOS before the length limit, the others went on


def test_repetition_penalty_and_stopping_criteria(setup):
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StopAfter(StoppingCriteria):
        def __init__(self, length):
            self.length = length

        def __call__(self, input_ids, scores, **kwargs):
            return torch.full((input_ids.shape[0],), input_ids.shape[1] >= self.length, dtype=torch.bool)

    model, heads, lm = setup
    ids, mask = left_padded([PROMPTS[1], PROMPTS[0], PROMPTS[3]])
    for verify in ("tree", "batch"):
        expected = greedy(model, ids, mask, max_new_tokens=14, repetition_penalty=1.4)
        out = draft_generate(
            model, ids, mask, heads, max_new_tokens=14, repetition_penalty=1.4, draft_lm=lm, draft_verify=verify
        )
        assert out.sequences.tolist() == expected.tolist()
    expected = greedy(model, ids, mask, max_new_tokens=14, stopping_criteria=StoppingCriteriaList([StopAfter(13)]))
    out = draft_generate(
        model, ids, mask, heads, max_new_tokens=14, draft_lm=lm, stopping_criteria=StoppingCriteriaList([StopAfter(13)])
    )
    assert out.sequences.tolist() == expected.tolist()
    expected = greedy(model, ids, mask, max_length=ids.shape[1] + 7)
    assert draft_generate(model, ids, mask, heads, max_length=ids.shape[1] + 7).sequences.tolist() == expected.tolist()
    assert (
        draft_generate(model, ids, mask, heads, max_length=ids.shape[1] + 7, use_cache=False).sequences.tolist()
        == expected.tolist()
    )


def test_direct_call_and_streamer(setup):
    model, heads, _ = setup

    class Collect:
        def __init__(self):
            self.parts, self.ended = [], False

        def put(self, value):
            self.parts.append(value.reshape(-1).tolist())

        def end(self):
            self.ended = True

    ids = torch.tensor([PROMPTS[3]])
    expected = greedy(model, ids, max_new_tokens=9)
    streamer = Collect()
    out = dlhf.generate(
        model,
        ids,
        max_new_tokens=9,
        do_sample=False,
        pad_token_id=0,
        eos_token_id=None,
        draft_heads=heads,
        streamer=streamer,
    )
    assert out.tolist() == expected.tolist()
    assert streamer.ended and [t for part in streamer.parts for t in part] == expected[0].tolist()
    streamer = Collect()
    with torch.inference_mode():
        model.generate(
            ids,
            max_new_tokens=9,
            do_sample=False,
            pad_token_id=0,
            eos_token_id=None,
            custom_generate=dlhf.generate,
            draft_heads=heads,
            draft_streamer=streamer,
        )
    assert [t for part in streamer.parts for t in part] == expected[0].tolist()


def test_fresh_heads_accept_repeated_tokens():
    """A model whose greedy output repeats one token (constant final state): fresh heads, which
    reproduce the next-token distribution, draft that token and every draft is accepted."""
    model = MODELS["gpt2"]()
    with torch.no_grad():
        model.transformer.ln_f.weight.zero_()
        model.transformer.ln_f.bias.normal_(generator=torch.Generator().manual_seed(5))
    heads = dlhf.DraftHeads.for_model(model, horizon=4)
    ids = torch.tensor([[1, 2, 3]])
    expected = greedy(model, ids, max_new_tokens=12)
    assert len(set(expected[0, 3:].tolist())) == 1
    for verify in ("tree", "batch"):
        out = draft_generate(model, ids, None, heads, max_new_tokens=12, draft_verify=verify)
        assert out.sequences.tolist() == expected.tolist()
        assert out.draft_stats.tokens_per_call > 1
        # The prompt's forward gives 1 token, each verification 3 drafted + 1: 1 + 4 + 4 + 4 >= 12.
        assert out.draft_stats.accepted == [[3], [3], [3]] and out.draft_stats.target_calls == 4


def test_unsupported_modes_fail_clearly(setup):
    model, heads, _ = setup
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(ValueError, match="beam search"):
        draft_generate(model, ids, None, heads, max_new_tokens=4, num_beams=2)
    with pytest.raises(ValueError, match="assistant_model"):
        draft_generate(model, ids, None, heads, max_new_tokens=4, assistant_model=model)
    with pytest.raises(ValueError, match="draft_heads is required"):
        draft_generate(model, ids, None, None, max_new_tokens=4)
    with pytest.raises(ValueError, match="draft_verify"):
        draft_generate(model, ids, None, heads, max_new_tokens=4, draft_verify="nope")
    with pytest.raises(ValueError, match="output_scores"):
        draft_generate(model, ids, None, heads, max_new_tokens=4, output_scores=True)
    other = dlhf.DraftHeads(4, 16, 16, model.config.vocab_size)
    with pytest.raises(ValueError, match="do not fit"):
        draft_generate(model, ids, None, other, max_new_tokens=4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_batch(dtype):
    """Masks and heads follow the model's dtype (no float32 tensor reaches a half model)."""
    model = MODELS["llama"]().to(dtype)
    heads = dlhf.DraftHeads.for_model(model, horizon=4)
    ids, mask = left_padded([[1, 2, 3], [4, 5, 6, 7, 8], [9]])
    expected = greedy(model, ids, mask, max_new_tokens=12)
    for verify in ("tree", "batch"):
        assert (
            draft_generate(model, ids, mask, heads, max_new_tokens=12, draft_verify=verify).sequences.tolist()
            == expected.tolist()
        )


def test_cache_compaction_keeps_the_output(setup, monkeypatch):
    """Holes left by rows that accepted less are compacted away (here at every step)."""
    import draftlattice.decode.engine as engine

    monkeypatch.setattr(engine, "COMPACT_HOLES", 0.0)
    model, heads, lm = setup
    ids, mask = left_padded([PROMPTS[1], PROMPTS[2], PROMPTS[3]])
    expected = greedy(model, ids, mask, max_new_tokens=20)
    for verify in ("tree", "batch"):
        out = draft_generate(
            model, ids, mask, heads, max_new_tokens=20, draft_lm=lm, draft_verify=verify, draft_alpha=2.0
        )
        assert out.sequences.tolist() == expected.tolist()
        assert any(len(set(step)) > 1 for step in out.draft_stats.accepted)  # holes did appear
