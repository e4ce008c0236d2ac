"""BlockwiseLM: KV cache consistency, rollback (crop/select/batch rows), tree masks, IO, errors.

The reference for every cached or masked computation is a fresh full forward of the same tokens.
"""

from __future__ import annotations

import json

import pytest
import torch

from draftlattice.model import BlockwiseConfig, BlockwiseLM, KVCache
from draftlattice.model.losses import blockwise_loss, blockwise_targets, sampled_blockwise_loss

ATOL = 1e-5

pytestmark = pytest.mark.usefixtures("one_thread")


def make_model(num_heads=3, seed=0, **overrides) -> BlockwiseLM:
    torch.manual_seed(seed)
    fields = dict(
        vocab_size=37, n_layer=2, n_head=2, d_model=16, d_ff=32, num_heads=num_heads, max_seq_len=64, head_hidden=12
    )
    fields.update(overrides)
    model = BlockwiseLM(BlockwiseConfig(**fields))
    with torch.no_grad():  # make every parameter (incl. zero-initialised head outputs) matter
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    return model.eval()


def tokens(*shape, seed=1):
    return torch.randint(0, 37, shape, generator=torch.Generator().manual_seed(seed))


def full(model, ids):
    return model(ids).logits


def test_logits_shape_and_head_semantics():
    model = make_model(num_heads=4)
    out = model(tokens(2, 5))
    assert out.logits.shape == (2, 5, 4, 37) and out.hidden.shape == (2, 5, 16)
    # head 1 is the plain projection of the final hidden state
    torch.testing.assert_close(out.logits[:, :, 0], out.hidden @ model.embed.weight.t())
    assert not torch.allclose(out.logits[:, :, 0], out.logits[:, :, 1])


@pytest.mark.parametrize("chunks", [[1] * 9, [4, 1, 1, 3], [2, 7]])
def test_cached_incremental_forward_equals_full_forward(chunks):
    model = make_model()
    ids = tokens(2, sum(chunks))
    reference = full(model, ids)
    cache, start, pieces = model.new_cache(), 0, []
    for size in chunks:
        pieces.append(model(ids[:, start : start + size], cache=cache).logits)
        start += size
        assert cache.length == start
    torch.testing.assert_close(torch.cat(pieces, dim=1), reference, atol=ATOL, rtol=0)


def test_crop_rollback_then_continue_equals_fresh_forward():
    model = make_model()
    prefix, junk, cont = tokens(1, 6, seed=2), tokens(1, 4, seed=3), tokens(1, 3, seed=4)
    cache = model.new_cache()
    model(prefix, cache=cache)
    model(junk, cache=cache)
    cache.crop(6)
    assert cache.length == 6
    got = model(cont, cache=cache).logits
    want = full(model, torch.cat([prefix, cont], dim=1))[:, 6:]
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


def tree_mask(parents, past):
    """Additive mask [1, 1, n, past + n] letting node i see the prefix and its ancestors."""
    n = len(parents)
    allowed = torch.zeros(n, past + n, dtype=torch.bool)
    allowed[:, :past] = True
    for i in range(n):
        node = i
        while node >= 0:
            allowed[i, past + node] = True
            node = parents[node]
    return torch.zeros(n, past + n).masked_fill(~allowed, float("-inf"))[None, None]


def depths(parents):
    out = []
    for p in parents:
        out.append(0 if p < 0 else out[p] + 1)
    return out


# A token tree: root 0 has children 1 and 2; 1 has children 3 and 4; 2 has child 5; 4 has child 6.
PARENTS = [-1, 0, 0, 1, 1, 2, 4]


def branch(node):
    path = []
    while node >= 0:
        path.append(node)
        node = PARENTS[node]
    return path[::-1]


def test_tree_mask_forward_equals_separate_branch_forwards():
    model = make_model()
    prefix, nodes = tokens(1, 5, seed=5), tokens(1, len(PARENTS), seed=6)
    cache = model.new_cache()
    model(prefix, cache=cache)
    positions = torch.tensor([[5 + d for d in depths(PARENTS)]])
    got = model(nodes, cache=cache, position_ids=positions, attention_mask=tree_mask(PARENTS, 5)).logits
    for node in range(len(PARENTS)):
        path = branch(node)
        want = full(model, torch.cat([prefix, nodes[:, path]], dim=1))[:, -1]
        torch.testing.assert_close(got[:, node], want, atol=ATOL, rtol=0)


def test_select_accepted_path_then_continue_equals_fresh_forward():
    model = make_model()
    prefix, nodes, cont = tokens(1, 5, seed=7), tokens(1, len(PARENTS), seed=8), tokens(1, 4, seed=9)
    cache = model.new_cache()
    model(prefix, cache=cache)
    positions = torch.tensor([[5 + d for d in depths(PARENTS)]])
    model(nodes, cache=cache, position_ids=positions, attention_mask=tree_mask(PARENTS, 5))
    accepted = branch(6)  # nodes 0, 1, 4, 6
    cache.select(torch.tensor(accepted) + 5)  # prefix defaults to the committed length 5
    assert cache.length == 5 + len(accepted)
    got = model(cont, cache=cache).logits
    want = full(model, torch.cat([prefix, nodes[:, accepted], cont], dim=1))[:, -4:]
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


def test_expand_and_batch_select_for_multi_draft_rows():
    model = make_model()
    prefix, drafts, cont = tokens(1, 4, seed=10), tokens(3, 3, seed=11), tokens(1, 2, seed=12)
    cache = model.new_cache()
    model(prefix, cache=cache)
    cache.expand(3)
    got = model(drafts, cache=cache).logits
    for row in range(3):
        want = full(model, torch.cat([prefix, drafts[row : row + 1]], dim=1))[:, 4:]
        torch.testing.assert_close(got[row : row + 1], want, atol=ATOL, rtol=0)
    cache.batch_select(torch.tensor([2]))
    cache.crop(4 + 2)  # accept two tokens of draft row 2
    got = model(cont, cache=cache).logits
    want = full(model, torch.cat([prefix, drafts[2:3, :2], cont], dim=1))[:, -2:]
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)


@pytest.mark.parametrize("storage", [torch.float32, torch.float16])
def test_save_load_round_trip(tmp_path, storage):
    model = make_model()
    tokenizer = tmp_path / "tok.json"
    tokenizer.write_text("{}")
    model.save_pretrained(tmp_path / "m", tokenizer_path=tokenizer, storage_dtype=storage)
    assert {p.name for p in (tmp_path / "m").iterdir()} == {"config.json", "model.safetensors", "tokenizer.json"}
    loaded = BlockwiseLM.from_pretrained(tmp_path / "m")
    assert loaded.config == model.config
    assert all(p.dtype == torch.float32 for p in loaded.parameters())
    ids = tokens(2, 7)
    if storage == torch.float32:
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits, atol=0, rtol=0)
    else:  # equal to the model whose weights were rounded to fp16
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.half().float())
        torch.testing.assert_close(loaded(ids).logits, model(ids).logits, atol=1e-6, rtol=0)


def test_load_errors(tmp_path):
    with pytest.raises(ValueError, match="missing config.json"):
        BlockwiseLM.from_pretrained(tmp_path)
    model = make_model()
    model.save_pretrained(tmp_path / "m")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    config["d_ff"] = 48
    (tmp_path / "m" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="shape"):
        BlockwiseLM.from_pretrained(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="invalid JSON"):
        BlockwiseLM.from_pretrained(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text(json.dumps({**config, "colour": 1}))
    with pytest.raises(ValueError, match="unknown"):
        BlockwiseLM.from_pretrained(tmp_path / "m")


@pytest.mark.parametrize(
    "field,value",
    [
        ("vocab_size", 0),
        ("n_head", 3),
        ("num_heads", 0),
        ("d_model", 18),
        ("dropout", 1.5),
        ("max_seq_len", -1),
        ("n_layer", 2.5),
        ("eos_token_id", 37),
    ],
)
def test_bad_config_raises(field, value):
    fields = dict(vocab_size=37, n_layer=2, n_head=2, d_model=16, d_ff=32, num_heads=3, max_seq_len=64)
    fields[field] = value
    with pytest.raises(ValueError, match=field if field not in ("n_head", "d_model") else "divisible|even"):
        BlockwiseConfig(**fields)


def test_bad_inputs_raise():
    model = make_model()
    with pytest.raises(ValueError, match="token ids"):
        model(torch.tensor([[0, 37]]))
    with pytest.raises(ValueError, match="token ids"):
        model(torch.tensor([[-1]]))
    with pytest.raises(ValueError, match=r"\[B, T\]"):
        model(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="integer"):
        model(torch.tensor([[1.0]]))
    with pytest.raises(ValueError, match="max_seq_len"):
        model(tokens(1, 65))
    with pytest.raises(ValueError, match="position ids"):
        model(tokens(1, 2), position_ids=torch.tensor([[0, 64]]))
    with pytest.raises(ValueError, match="position_ids shape"):
        model(tokens(1, 2), position_ids=torch.tensor([[0]]))
    cache = model.new_cache()
    model(tokens(1, 3), cache=cache)
    with pytest.raises(ValueError, match="attention_mask"):
        model(tokens(1, 2), cache=cache, attention_mask=torch.zeros(1, 1, 2, 2))
    with pytest.raises(ValueError, match="additive float"):
        model(tokens(1, 2), cache=cache, attention_mask=torch.ones(1, 1, 2, 5, dtype=torch.bool))
    with pytest.raises(ValueError, match="batch size"):
        model(tokens(2, 2), cache=cache)
    with pytest.raises(ValueError, match="layers"):
        model(tokens(1, 2), cache=KVCache(5))
    with pytest.raises(ValueError, match="crop"):
        cache.crop(4)
    with pytest.raises(ValueError, match="select positions"):
        cache.select(torch.tensor([3]), prefix=1)
    with pytest.raises(ValueError, match="expand"):
        cache.expand(0)


def test_blockwise_targets_and_losses():
    window = torch.arange(10)[None]  # L = 7 inputs, h = 3
    inputs, targets = blockwise_targets(window, 3)
    assert inputs.tolist() == [list(range(7))]
    assert targets[0, 2].tolist() == [3, 4, 5]  # head j at t = 2 predicts token 2 + j + 1
    model = make_model()
    window = tokens(2, 12)
    inputs, targets = blockwise_targets(window, 3)
    total, per_head = blockwise_loss(model(inputs).logits, targets)
    sampled_total, sampled = sampled_blockwise_loss(model, inputs, targets, 1.0)
    torch.testing.assert_close(sampled, per_head, atol=1e-5, rtol=0)
    manual = torch.nn.functional.cross_entropy(
        model(inputs).logits[:, :, 1].reshape(-1, 37), window[:, 2:11].reshape(-1)
    )
    torch.testing.assert_close(per_head[1], manual, atol=1e-5, rtol=0)
    _, partial = sampled_blockwise_loss(model, inputs, targets, 0.3, torch.Generator().manual_seed(0))
    torch.testing.assert_close(partial[0], per_head[0], atol=1e-5, rtol=0)  # head 1 always in full
