"""Grouped-query attention under the verification forward's own mask, without copying the cache.

A verification forward hands the model an explicit 4D mask (a token tree, or chains with holes
in the cache). Under an explicit mask, transformers' ``"sdpa"`` attention repeats every layer's
keys and values once per query head of a group (grouped-query attention: SmolLM2 has 9 query
heads over 3 key/value heads) before it calls ``scaled_dot_product_attention``: each step then
copies the whole cache twice per layer. PyTorch's CPU kernel takes the groups itself
(``enable_gqa=True``) under a mask and gives the same values without the copies; CUDA kernels
with a mask would fall back to the slow math kernel, so the copy stays there.

:func:`grouped_query_attention` routes a model's ``"sdpa"`` attention through that kernel for
the span of one forward. transformers reads ``config._attn_implementation`` at every call of an
attention layer, so the switch is a change of that name, undone on exit; a forward of the same
model running meanwhile in another thread would see it too (the engine runs none).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.utils.import_utils import is_torch_greater_or_equal

GROUPED_SDPA = "draftlattice_grouped_sdpa"
_KERNEL_GROUPS = is_torch_greater_or_equal("2.5")  # enable_gqa came with torch 2.5


def _grouped_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
    """transformers' ``"sdpa"`` attention, with the key/value groups left to the CPU kernel
    where the copy would be made (a mask, several query positions, grouped heads)."""
    grouped = getattr(module, "num_key_value_groups", 1) > 1
    plain = kwargs.get("position_bias") is None and kwargs.get("softcap") is None
    if not (grouped and plain and attention_mask is not None and query.device.type == "cpu" and query.shape[2] > 1):
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    out = F.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask[:, :, :, : key.shape[-2]],
        dropout_p=dropout,
        scale=scaling,
        enable_gqa=True,
    )
    return out.transpose(1, 2).contiguous(), None


AttentionInterface.register(GROUPED_SDPA, _grouped_sdpa)


@contextmanager
def grouped_query_attention(model):
    """Within the block, ``model``'s ``"sdpa"`` attention uses :func:`_grouped_sdpa`; other
    implementations (eager, flash, flex) are left as they are."""
    config = model.config
    before = getattr(config, "_attn_implementation", None)
    if before != "sdpa" or not _KERNEL_GROUPS:
        yield
        return
    config._attn_implementation = GROUPED_SDPA
    try:
        yield
    finally:
        config._attn_implementation = before
