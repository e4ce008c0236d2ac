"""DraftHeads: fresh heads reproduce the model, the fixed on-disk format, fit checks."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

import draftlattice.hf as dlhf
from _hf_models import MODELS, gpt2, llama


@pytest.mark.parametrize("name", sorted(MODELS))
def test_fresh_heads_reproduce_next_token_distribution(name):
    model = MODELS[name]()
    heads = dlhf.DraftHeads.for_model(model, horizon=4)
    ids = torch.tensor([[1, 5, 9, 2]])
    with torch.no_grad():
        z = model.base_model(input_ids=ids).last_hidden_state
        logits = model(ids).logits
        head_logits = heads.logits(z, model)
    assert head_logits.shape == (1, 4, 3, model.config.vocab_size)
    for j in range(3):
        torch.testing.assert_close(head_logits[:, :, j], logits)


def test_heads_follow_model_device_and_dtype():
    model = llama().to(torch.bfloat16)
    heads = dlhf.DraftHeads.for_model(model, horizon=3, head_hidden=24)
    assert {p.dtype for p in heads.parameters()} == {torch.bfloat16}
    assert heads.heads[0].up.weight.shape == (24, 32)


def test_save_load_round_trip_and_format(tmp_path):
    model = llama()
    model.config.name_or_path = "/somewhere/tiny-llama"
    heads = dlhf.DraftHeads.for_model(model, horizon=4, head_hidden=40)
    with torch.no_grad():
        for p in heads.parameters():
            p.normal_()
    heads.save_pretrained(tmp_path / "h")
    config = json.loads((tmp_path / "h" / "config.json").read_text())
    assert config == {
        "format": "draftlattice-draft-heads",
        "version": 1,
        "horizon": 4,
        "hidden_size": 32,
        "head_hidden": 40,
        "vocab_size": model.config.vocab_size,
        "activation": "gelu",
        "base_model_type": "llama",
        "base_model_name": "/somewhere/tiny-llama",
    }
    tensors = load_file(str(tmp_path / "h" / "model.safetensors"))
    assert sorted(tensors) == sorted(
        f"heads.{i}.{m}.{w}" for i in range(3) for m in ("up", "down") for w in ("weight", "bias")
    )
    assert tensors["heads.2.down.weight"].shape == (32, 40)
    model.config.name_or_path = "/elsewhere/tiny-llama"  # moved folder: same last component
    loaded = dlhf.DraftHeads.from_pretrained(tmp_path / "h", model)
    for (name, a), (_, b) in zip(heads.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    # z + down(gelu(up(z))) with the model's lm_head, from the stored tensors
    z = torch.randn(2, 32)
    up_w, up_b = tensors["heads.1.up.weight"], tensors["heads.1.up.bias"]
    down_w, down_b = tensors["heads.1.down.weight"], tensors["heads.1.down.bias"]
    state = z + torch.nn.functional.gelu(z @ up_w.T + up_b) @ down_w.T + down_b
    with torch.no_grad():
        torch.testing.assert_close(loaded.logits(z, model)[:, 1], model.lm_head(state))


def test_heads_of_another_model_are_refused(tmp_path):
    llama_model = llama()
    dlhf.DraftHeads.for_model(llama_model, horizon=3).save_pretrained(tmp_path / "llama")
    with pytest.raises(ValueError, match="model type 'llama' != the model's 'gpt2'"):
        dlhf.DraftHeads.from_pretrained(tmp_path / "llama", gpt2())
    wider = llama(vocab=64)
    with pytest.raises(ValueError, match="vocab_size 48 != the model's 64"):
        dlhf.DraftHeads.from_pretrained(tmp_path / "llama", wider)
    llama_model.config.name_or_path = "org/model-a"
    dlhf.DraftHeads.for_model(llama_model, horizon=3).save_pretrained(tmp_path / "a")
    other = llama()
    other.config.name_or_path = "org/model-b"
    with pytest.raises(ValueError, match="strict_name=False"):
        dlhf.DraftHeads.from_pretrained(tmp_path / "a", other)
    assert dlhf.DraftHeads.from_pretrained(tmp_path / "a", other, strict_name=False).horizon == 3
    with pytest.raises(FileNotFoundError, match="config.json"):
        dlhf.DraftHeads.from_pretrained(tmp_path / "missing", other)
    (tmp_path / "a" / "config.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ValueError, match="not draftlattice draft heads"):
        dlhf.DraftHeads.from_pretrained(tmp_path / "a", other)


def test_bad_horizon():
    with pytest.raises(ValueError, match="horizon must be an int >= 2"):
        dlhf.DraftHeads.for_model(llama(), horizon=1)


def trained_looking_heads(model, next_token: bool) -> dlhf.DraftHeads:
    """h = 3 heads of 24 units with random weights (nonzero residuals, unlike fresh heads) and a
    draft vocabulary of the even token ids."""
    heads = dlhf.DraftHeads.for_model(model, horizon=3, head_hidden=24, next_token=next_token)
    with torch.no_grad():
        for parameter in heads.parameters():
            parameter.normal_(0, 0.2)
    return heads.restrict_vocabulary(torch.arange(0, 40, 2))


def test_extended_heads_keep_the_trained_ones_and_start_the_new_ones_as_the_model():
    model = llama().to(torch.bfloat16)
    heads = trained_looking_heads(model, next_token=True)
    longer = heads.extended(5)
    assert longer.horizon == 5 and len(longer.heads) == 4 and longer.draft_vocab is heads.draft_vocab
    assert longer.heads[0] is heads.heads[0] and longer.heads[1] is heads.heads[1]  # shared, as truncated()
    assert {p.dtype for p in longer.parameters()} == {torch.bfloat16}
    ids, following = torch.tensor([[1, 5, 9, 2]]), torch.tensor([[5, 9, 2, 7]])
    with torch.no_grad():
        z = model.base_model(input_ids=ids).last_hidden_state
        old, new = heads.logits(z, model, following), longer.logits(z, model, following)
        restricted = model(ids).logits.masked_fill(
            ~torch.isin(torch.arange(model.config.vocab_size), heads.draft_vocab), float("-inf")
        )
    assert torch.equal(new[..., :2, :], old)
    for j in (2, 3):  # the new heads: the model's own next-token logits on the draft vocabulary
        torch.testing.assert_close(new[..., j, :], restricted, rtol=2e-2, atol=2e-2)
    assert longer.extended(5) is longer and longer.truncated(3).horizon == 3
    with pytest.raises(ValueError, match="horizon must be an int >= 5"):
        longer.extended(4)


@pytest.mark.parametrize("next_token", [False, True])
def test_widened_heads_draft_as_before_until_their_new_units_learn(next_token, tmp_path):
    model = llama()
    heads = trained_looking_heads(model, next_token=next_token)
    wider = heads.widened(40)
    assert wider.head_hidden == 40 and wider.horizon == 3 and wider.draft_vocab is heads.draft_vocab
    assert all(head.up.out_features == 40 and head.down.in_features == 40 for head in wider.heads)
    ids, following = torch.tensor([[1, 5, 9, 2]]), torch.tensor([[5, 9, 2, 7]])
    with torch.no_grad():
        z = model.base_model(input_ids=ids).last_hidden_state
        before = heads.logits(z, model, following if next_token else None)
        after = wider.logits(z, model, following if next_token else None)
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)  # new units silent: the same drafts
    # a copy: training the wider heads leaves these alone, and the new units do learn
    optimizer = torch.optim.SGD(wider.parameters(), lr=0.1)
    wider.logits(z, model, following if next_token else None)[..., 0].sum().backward()
    optimizer.step()
    assert wider.heads[0].down.weight[:, 24:].abs().sum() > 0
    with torch.no_grad():
        torch.testing.assert_close(heads.logits(z, model, following if next_token else None), before)
    wider.save_pretrained(tmp_path / "wide")  # and it round-trips with its new width
    assert dlhf.DraftHeads.from_pretrained(tmp_path / "wide", model).head_hidden == 40
    assert heads.widened(24).head_hidden == 24
    with pytest.raises(ValueError, match="head_hidden must be an int >= 24"):
        heads.widened(16)
