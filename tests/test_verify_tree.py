"""Tree verification: trie structure, agreement with greedy_accept, and decoding a tiny random
Hugging Face Llama with one tree forward per step over a KV cache gathered after acceptance."""

from __future__ import annotations

import random

import pytest
import torch

from _verify_helpers import greedy_reference, make_drafts, tiny_llama
from draftlattice.verify import (
    build_tree,
    draft_logits_from_tree,
    gather_tree_kv,
    greedy_accept,
    tree_greedy_accept,
    tree_kv_indices,
)

TOL = 1e-5


def test_structure_of_a_hand_tree():
    drafts = torch.tensor([[1, 2, 3], [1, 2, 4], [1, 5, 6], [7, 8, 9], [1, 2, 3]])
    tree = build_tree(drafts, root_token=42, position_offset=10, dtype=torch.float16)
    # breadth-first: root; 1, 7; 2, 5, 8; 3, 4, 6, 9
    assert tree.tokens.tolist() == [42, 1, 7, 2, 5, 8, 3, 4, 6, 9]
    assert tree.parent.tolist() == [-1, 0, 0, 1, 1, 2, 3, 3, 4, 5]
    assert tree.depth.tolist() == [0, 1, 1, 2, 2, 2, 3, 3, 3, 3]
    assert tree.position_ids.tolist() == [10, 11, 11, 12, 12, 12, 13, 13, 13, 13]
    assert tree.draft_nodes.tolist() == [[1, 3, 6], [1, 3, 7], [1, 4, 8], [2, 5, 9], [1, 3, 6]]
    assert tree.node_draft.tolist() == [0, 0, 3, 0, 2, 3, 0, 1, 2, 3]
    assert int(tree.num_nodes) == 10 and tree.size == 10 and not tree.batched
    m = tree.attention_mask
    assert m.dtype == torch.float16 and m.shape == (10, 10)
    assert set(m.unique().tolist()) == {0.0, torch.finfo(torch.float16).min}
    # node 7 (token 4): ancestors-or-self are root, 1, 3 and itself
    assert (m[7] == 0).nonzero().flatten().tolist() == [0, 1, 3, 7]
    assert (m[0] == 0).nonzero().flatten().tolist() == [0]
    m4 = tree.attention_mask_4d(past_length=3)
    assert m4.shape == (1, 1, 10, 13) and (m4[..., :3] == 0).all() and torch.equal(m4[0, 0, :, 3:], m)


def _random_drafts(gen, B, P, H, V):
    drafts = torch.randint(V, (B, P, H), generator=gen)
    lengths = torch.randint(H + 1, (B, P), generator=gen)
    return drafts, lengths


def test_batched_tree_equals_per_row_trees():
    gen = torch.Generator().manual_seed(0)
    B, P, H, V = 12, 6, 4, 2
    drafts, lengths = _random_drafts(gen, B, P, H, V)
    offsets = torch.arange(B) * 3
    tree = build_tree(drafts, lengths, root_token=torch.arange(B), position_offset=offsets)
    for b in range(B):
        one = build_tree(drafts[b], lengths[b], root_token=b, position_offset=int(offsets[b]))
        T = one.size
        assert int(tree.num_nodes[b]) == T and tree.node_valid[b, :T].all() and not tree.node_valid[b, T:].any()
        for name in ("tokens", "parent", "depth", "position_ids", "node_draft"):
            assert torch.equal(getattr(tree, name)[b, :T], getattr(one, name)), name
        assert torch.equal(tree.attention_mask[b, :T, :T], one.attention_mask)
        assert torch.equal(tree.draft_nodes[b], one.draft_nodes)
        # padding nodes see only themselves; real nodes never see padding
        assert (tree.attention_mask[b, :T, T:] != 0).all()
        pad = tree.attention_mask[b, T:]
        assert torch.equal(pad == 0, torch.eye(tree.size, dtype=torch.bool)[T:])
        # node tokens along each draft's path are the draft's tokens
        for d in range(P):
            k = int(lengths[b, d])
            assert one.tokens[one.draft_nodes[d, :k]].tolist() == drafts[b, d, :k].tolist()
            assert (one.draft_nodes[d, k:] == -1).all()
    assert tree.size <= 1 + P * H
    padded = build_tree(drafts, lengths, num_nodes=1 + P * H)
    assert padded.size == 1 + P * H and torch.equal(padded.tokens[:, : tree.size], build_tree(drafts, lengths).tokens)


@pytest.mark.parametrize("seed", range(4))
def test_tree_greedy_equals_greedy_accept(seed):
    gen = torch.Generator().manual_seed(seed)
    B, P, H, V = 64, 5, 4, 3
    drafts, lengths = _random_drafts(gen, B, P, H, V)
    if seed % 2:
        lengths = None
    tree = build_tree(drafts, lengths)
    # A deterministic "target": per-node logits (small vocabulary, so drafts are often accepted).
    logits = torch.randn(B, tree.size, V, generator=gen, dtype=torch.float64)
    res = tree_greedy_accept(tree, logits)
    per_draft = draft_logits_from_tree(tree, logits)  # [B, p, h+1, V]
    ref = greedy_accept(drafts, per_draft, lengths)
    assert torch.equal(res.best_draft, ref.best_draft)
    assert torch.equal(res.num_accepted, ref.num_accepted)
    assert torch.equal(res.next_token, ref.next_token)
    # the same from greedy tokens instead of logits
    res_t = tree_greedy_accept(tree, logits.argmax(-1))
    assert all(torch.equal(a, b) for a, b in zip(res_t, res))
    # the path is the chosen draft's accepted prefix
    for b in range(B):
        k, d = int(res.num_accepted[b]), int(res.best_draft[b])
        path = res.path[b]
        assert int(path[0]) == 0 and (path[k + 1 :] == -1).all() and int(path[k]) == int(res.last_node[b])
        assert tree.tokens[b, path[1 : k + 1]].tolist() == drafts[b, d, :k].tolist()
    assert res.num_accepted.float().mean() > 0.3


def test_unbatched_accept_and_kv_gather():
    drafts = torch.tensor([[1, 2, 3], [1, 5, 6], [7, 8, 9]])
    tree = build_tree(drafts, root_token=0)
    # target greedy: after root -> 1, after 1 -> 5, after 5 -> 4 (reject 6)
    want = {0: 1, 1: 5, 4: 4}
    tokens = torch.tensor([want.get(n, 0) for n in range(tree.size)])
    res = tree_greedy_accept(tree, tokens)
    assert (int(res.best_draft), int(res.num_accepted), int(res.next_token)) == (1, 2, 4)
    assert res.path.tolist() == [0, 1, 4, -1]
    assert tree_kv_indices(res, past_length=5).tolist() == [5, 6, 9, 9]
    cache = torch.arange(5 + tree.size).double().view(1, 1, -1, 1).expand(2, 3, -1, 4)
    out = gather_tree_kv(cache, res, past_length=5)
    assert out.shape == (2, 3, 9, 4)
    assert out[0, 0, :, 0].tolist() == [0, 1, 2, 3, 4, 5, 6, 9, 9]


def test_batched_kv_gather():
    gen = torch.Generator().manual_seed(1)
    B, P, H, V, past = 5, 3, 3, 2, 4
    drafts, lengths = _random_drafts(gen, B, P, H, V)
    tree = build_tree(drafts, lengths)
    res = tree_greedy_accept(tree, torch.randint(V, (B, tree.size), generator=gen))
    cache = torch.randn(B, 2, past + tree.size, 3, generator=gen)
    out = gather_tree_kv(cache, res, past)
    assert out.shape == (B, 2, past + H + 1, 3)
    for b in range(B):
        k = int(res.num_accepted[b])
        assert torch.equal(out[b, :, :past], cache[b, :, :past])
        assert torch.equal(out[b, :, past : past + k + 1], cache[b, :, past + res.path[b, : k + 1]])


@pytest.mark.parametrize("seed", [0, 1])
@torch.no_grad()
def test_tree_decoding_with_kv_cache_equals_greedy(seed):
    """One tree forward per step over a DynamicCache: equal to multi-draft greedy_accept and to
    plain greedy decoding; logits from the gathered cache equal a fresh forward."""
    from transformers import DynamicCache

    from draftlattice.decode.target import cache_keyword

    model = tiny_llama(seed)
    kw = cache_keyword(model)  # transformers 5.24 deprecates past_key_values
    V = model.config.vocab_size
    rng = random.Random(100 + seed)
    prompt = [rng.randrange(V) for _ in range(6)]
    N, P, H = 30, 5, 4
    ref = greedy_reference(model, prompt, N + H)
    ids = list(prompt)
    cache = DynamicCache(config=model.config)
    model(input_ids=torch.tensor([ids[:-1]]), **{kw: cache}, use_cache=True)
    saved = 0
    while len(ids) < len(prompt) + N:
        n = len(ids)
        past = n - 1
        assert cache.get_seq_length() == past
        drafts = make_drafts(rng, ref[n : n + H], P, H, V)
        tree = build_tree(drafts, root_token=ids[-1], position_offset=past, dtype=model.dtype)
        out = model(
            input_ids=tree.tokens[None],
            attention_mask=tree.attention_mask_4d(past),
            position_ids=tree.position_ids[None],
            **{kw: cache},
            use_cache=True,
        )
        node_logits = out.logits[0]  # [T, V]
        # fresh forward of every draft, without cache
        batch = torch.cat([torch.tensor(ids).expand(P, n), drafts], dim=1)
        fresh = model(input_ids=batch).logits[:, n - 1 :]  # [p, h+1, V]
        # Tolerance: HF Llama runs RMSNorm and RoPE in float32 even in a float64 model, and the
        # float32 reductions depend on the sequence length (exact agreement is not expected).
        torch.testing.assert_close(draft_logits_from_tree(tree, node_logits), fresh, atol=TOL, rtol=TOL)
        res = tree_greedy_accept(tree, node_logits)
        ref_acc = greedy_accept(drafts, fresh)
        assert (int(res.best_draft), int(res.num_accepted), int(res.next_token)) == tuple(int(x) for x in ref_acc)
        k = int(res.num_accepted)
        for layer in cache.layers:
            layer.keys = gather_tree_kv(layer.keys, res, past)[:, :, : past + k + 1]
            layer.values = gather_tree_kv(layer.values, res, past)[:, :, : past + k + 1]
        ids += drafts[int(res.best_draft), :k].tolist() + [int(res.next_token)]
        assert ids == ref[: len(ids)]
        saved += tree.size < 1 + P * H
    assert saved > 0  # shared prefixes made trees smaller than p*h
    # continuing from the gathered cache: logits of the last token equal a fresh forward
    step = model(input_ids=torch.tensor([[ids[-1]]]), **{kw: cache}, use_cache=True).logits[0, -1]
    torch.testing.assert_close(step, model(input_ids=torch.tensor([ids])).logits[0, -1], atol=TOL, rtol=TOL)
