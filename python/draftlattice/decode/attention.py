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
attention layer (and when it builds the mask), so the switch is a change of that name, undone
when the last forward that asked for it ends. Forwards of the same model in other threads
meanwhile (threads sharing one model, each running generate()) see the name too: they get
sdpa's own masks (the name is registered with transformers' sdpa mask) and sdpa's own attention
(the kernel path is taken only in the threads inside :func:`grouped_query_attention`), so they
compute exactly what they compute without it.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import torch.nn.functional as F
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.utils.import_utils import is_torch_greater_or_equal

GROUPED_SDPA = "draftlattice_grouped_sdpa"
_KERNEL_GROUPS = is_torch_greater_or_equal("2.5")  # enable_gqa came with torch 2.5


class _Switch:
    """Who holds the switch: per config, the forwards inside it (over all threads) and the name
    to restore; per thread, whether this thread is inside it. Process-wide, as the model is."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.users: dict[int, tuple[int, str]] = {}  # id(config) -> (forwards inside, name before)
        self.inside = threading.local()

    def here(self) -> bool:
        return getattr(self.inside, "depth", 0) > 0


_SWITCH = _Switch()


def _grouped_sdpa(module, query, key, value, attention_mask, dropout=0.0, scaling=None, is_causal=None, **kwargs):
    """transformers' ``"sdpa"`` attention, with the key/value groups left to the CPU kernel
    where the copy would be made (a mask, several query positions, grouped heads) in a forward
    inside :func:`grouped_query_attention`."""
    grouped = getattr(module, "num_key_value_groups", 1) > 1
    plain = kwargs.get("position_bias") is None and kwargs.get("softcap") is None
    if not (
        grouped
        and plain
        and attention_mask is not None
        and query.device.type == "cpu"
        and query.shape[2] > 1
        and _SWITCH.here()
    ):
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
AttentionMaskInterface.register(GROUPED_SDPA, sdpa_mask)


@contextmanager
def grouped_query_attention(model):
    """Within the block, ``model``'s ``"sdpa"`` attention uses :func:`_grouped_sdpa`; other
    implementations (eager, flash, flex) are left as they are. Threads may enter it at once for
    one model: the name is restored when the last one leaves."""
    config, switch = model.config, _SWITCH
    with switch.lock:
        count, before = switch.users.get(id(config), (0, getattr(config, "_attn_implementation", None)))
        if before != "sdpa" or not _KERNEL_GROUPS:
            switched = False
        else:
            switched = True
            switch.users[id(config)] = (count + 1, before)
            config._attn_implementation = GROUPED_SDPA
    if not switched:
        yield
        return
    switch.inside.depth = getattr(switch.inside, "depth", 0) + 1
    try:
        yield
    finally:
        switch.inside.depth -= 1
        with switch.lock:
            count, before = switch.users.pop(id(config))
            if count > 1:
                switch.users[id(config)] = (count - 1, before)
            else:
                config._attn_implementation = before
