"""The host walks over small trees of CPU drafts (draftlattice.verify.tree_host) against the
vectorised code they stand in for: the tree's every field, and greedy acceptance's every output,
equal for random drafts that share prefixes, ragged lengths, batched or not, padded or not."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import draftlattice.verify.tree as tree_module
from draftlattice.verify.path import accept_tree
from draftlattice.verify.tree import build_tree


def _both(monkeypatch, *args, **kwargs):
    host = build_tree(*args, **kwargs)
    monkeypatch.setattr(tree_module, "_VECTORISED_ONLY", True)
    vectorised = build_tree(*args, **kwargs)
    monkeypatch.setattr(tree_module, "_VECTORISED_ONLY", False)
    return host, vectorised


def _assert_same(host, vectorised):
    for field in dataclasses.fields(host):
        a, b = getattr(host, field.name), getattr(vectorised, field.name)
        if isinstance(a, torch.Tensor):
            assert a.dtype == b.dtype and torch.equal(a, b), field.name
        else:
            assert a == b, field.name


@pytest.mark.parametrize("seed", range(40))
def test_the_host_walk_equals_the_vectorised_build(monkeypatch, seed):
    g = torch.Generator().manual_seed(seed)
    B, P, H = (int(torch.randint(1, 4, (1,), generator=g)) for _ in range(3))
    drafts = torch.randint(0, 3, (B, P, H), generator=g)  # 3 tokens: many shared prefixes
    lengths = torch.randint(0, H + 1, (B, P), generator=g)
    root = torch.randint(0, 50, (B,), generator=g)
    offset = torch.randint(0, 30, (B,), generator=g)
    dtype = [torch.float32, torch.bfloat16][seed % 2]
    pad = int(seed % 3 == 0) * 7
    host, vectorised = _both(
        monkeypatch, drafts, lengths, root_token=root, position_offset=offset, dtype=dtype, pad_token=pad
    )
    _assert_same(host, vectorised)
    padded = (host.tokens.shape[-1]) + seed % 3
    _assert_same(*_both(monkeypatch, drafts, lengths, root_token=root, position_offset=offset, num_nodes=padded))


@pytest.mark.parametrize("lengths", [None, 2, [3, 1, 0]])
def test_unbatched_drafts_and_scalar_arguments(monkeypatch, lengths):
    drafts = torch.tensor([[5, 6, 7], [5, 6, 9], [8, 1, 2]])
    _assert_same(*_both(monkeypatch, drafts, lengths, root_token=3, position_offset=40, dtype=torch.bfloat16))
    _assert_same(*_both(monkeypatch, drafts, lengths))


def test_too_few_nodes_is_a_clear_error():
    with pytest.raises(ValueError, match="num_nodes=3 is fewer than the tree's 7 nodes"):
        build_tree(torch.tensor([[5, 6, 7], [8, 1, 2]]), num_nodes=3)


@pytest.mark.parametrize("seed", range(40))
def test_the_host_acceptance_equals_the_vectorised_one(monkeypatch, seed):
    g = torch.Generator().manual_seed(1000 + seed)
    B, P, H = (int(torch.randint(1, 4, (1,), generator=g)) for _ in range(3))
    drafts = torch.randint(0, 3, (B, P, H), generator=g)
    lengths = torch.randint(0, H + 1, (B, P), generator=g)
    padded = seed % 2 == 0
    tree = build_tree(
        drafts, lengths, root_token=torch.zeros(B, dtype=torch.int64), num_nodes=1 + P * H if padded else None
    )
    T, V = tree.tokens.shape[1], 3
    # Scores that follow the drafts often (so paths run deep), with ties, in float32 as the lean
    # step gives them (NumPy's argmax) or bf16 (PyTorch's).
    scores = torch.randint(0, 2, (B, T, V), generator=g).to(torch.float32 if seed % 3 else torch.bfloat16)
    hidden = torch.randn(B, T, 4, generator=g)
    host = accept_tree(tree, scores, hidden)
    monkeypatch.setattr(tree_module, "_VECTORISED_ONLY", True)
    vectorised = accept_tree(tree, scores, hidden)
    for field in dataclasses.fields(host):
        a, b = getattr(host, field.name), getattr(vectorised, field.name)
        if isinstance(a, tuple):
            assert all(torch.equal(x, y) for x, y in zip(a, b)), field.name
        else:
            assert (a is None and b is None) or (a.dtype == b.dtype and torch.equal(a, b)), field.name
