"""Rolling a DynamicCache back to the accepted path (decode/cache.py keep_block), against the
cache built by concatenating the kept slots."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")
from transformers import DynamicCache  # noqa: E402

from draftlattice.decode.cache import cache_layers, keep_block  # noqa: E402


def _cache(rows: int, length: int, layers: int = 2, seed: int = 0) -> DynamicCache:
    generator = torch.Generator().manual_seed(seed)
    cache = DynamicCache()
    for layer in range(layers):
        keys, values = (torch.randn(rows, 2, length, 4, generator=generator) for _ in range(2))
        cache.update(keys, values, layer)
    return cache


@pytest.mark.parametrize(
    "index, rows",
    [
        ([[0]], None),  # the root alone: the block's first slot
        ([[0, 1, 2]], None),  # the first draft's chain
        ([[0, 2, 5]], None),  # another draft's chain
        ([[0, 1], [0, 3]], None),  # two sequences, one of them off the first chain
        ([[0, 1, 2]], [1]),  # a chosen cache row (batch layout)
    ],
)
def test_keep_block_keeps_the_context_and_the_accepted_slots_in_order(index, rows):
    past, block = 5, 6
    index = torch.tensor(index)
    rows = None if rows is None else torch.tensor(rows)
    cache = _cache(2 if rows is not None or len(index) == 2 else 1, past + block)
    before = [(layer.keys.clone(), layer.values.clone()) for layer in cache_layers(cache)]
    keep_block(cache, past, rows, index)
    for (keys, values), layer in zip(before, cache_layers(cache)):
        for old, new in ((keys, layer.keys), (values, layer.values)):
            if rows is not None:
                old = old.index_select(0, rows)
            B, H, _, D = old.shape
            picked = old[:, :, past:].gather(2, index.view(B, 1, -1, 1).expand(B, H, index.shape[1], D))
            assert torch.equal(new, torch.cat([old[:, :, :past], picked], dim=2))
