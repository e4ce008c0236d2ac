"""The host walk that builds small trees of CPU drafts (draftlattice.verify.tree_host) against the
vectorised build it stands in for: every field equal, for random drafts that share prefixes,
ragged lengths, batched or not, padded or not."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import draftlattice.verify.tree as tree_module
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
