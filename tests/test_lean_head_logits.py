"""The lean step's draft heads in one C++ call (draftlattice.lean.heads.HeadLogits) against the
same heads through PyTorch: LeanHeads (tested bit for bit against per-head products in
test_lean_step.py), then the output rows they draft from, scattered over the vocabulary."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import draftlattice.hf as dlhf
from _hf_models import llama
from draftlattice import _core
from draftlattice.lean import LeanLlama
from draftlattice.lean.heads import HeadLogits, LeanHeads

pytestmark = pytest.mark.usefixtures("one_thread")

QUANTIZABLE = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2)
VOCAB = 96
OURS = list(_core.lowbit_kernels())


def _heads(model, next_token: bool, draft_vocab: bool):
    heads = dlhf.DraftHeads.for_model(model, horizon=4, next_token=next_token).to(torch.bfloat16)
    torch.manual_seed(1)
    with torch.no_grad():
        for parameter in heads.parameters():  # the down projections start at 0: no test of them
            parameter.normal_(0, 0.3)
    if draft_vocab:
        heads.restrict_vocabulary(torch.tensor(sorted({3, 7, 8, 20, 41, 50, 77, 90, 95, 0, 12, 33, 64, 5, 6, 2})))
    return heads


def _through_pytorch(lean: LeanLlama, heads, z, ids):
    """LeanHeads, then the rows the heads draft from, -inf outside them."""
    states = lean._heads_for(heads)(z, F.embedding(ids, lean.embed) if heads.reads_next_token else None)
    vocab = heads.draft_vocab
    rows = lean.output_layer if vocab is None else lean._rows_for(vocab)
    part = rows(states).float()
    if vocab is None:
        return part
    return part.new_full((*part.shape[:-1], VOCAB), float("-inf")).scatter_(-1, vocab.expand(part.shape), part)


@pytest.mark.parametrize("kernel", OURS)
@pytest.mark.parametrize("next_token", [True, False])
@pytest.mark.parametrize("draft_vocab", [True, False])
def test_one_call_equals_the_heads_through_pytorch(kernel, next_token, draft_vocab):
    model = llama(seed=3, vocab=VOCAB, **QUANTIZABLE).to(torch.bfloat16)
    heads = _heads(model, next_token, draft_vocab)
    lean = LeanLlama(model, "int4", kernel=kernel)
    assert LeanHeads.fits(heads)
    torch.manual_seed(2)
    z, ids = (torch.randn(2, 3, 64) * 2).to(torch.bfloat16), torch.randint(0, VOCAB, (2, 3))
    with torch.inference_mode():
        got = lean.head_logits(heads, z, ids)
        expected = _through_pytorch(lean, heads, z, ids)
    assert isinstance(lean._head_logits_of[2], HeadLogits)  # the call above ran in C++
    assert got.shape == (2, 3, 3, VOCAB) and got.dtype == torch.float32
    assert torch.equal(got.isinf(), expected.isinf())
    # GELU's erf there is PyTorch's formula with another exponential: a hidden unit may move by one
    # bf16 unit in the last place (none did on the default model's heads); nothing more.
    finite = expected.isfinite()
    torch.testing.assert_close(got[finite], expected[finite], rtol=2e-2, atol=2e-2)
    assert (got[finite] == expected[finite]).float().mean() > 0.9


def test_one_call_follows_the_heads_in_place_changes():
    model = llama(seed=3, vocab=VOCAB, **QUANTIZABLE).to(torch.bfloat16)
    heads = _heads(model, True, True)
    lean = LeanLlama(model, "int4")
    z, ids = torch.randn(1, 64).to(torch.bfloat16), torch.tensor([4])
    with torch.inference_mode():
        before = lean.head_logits(heads, z, ids)
    with torch.no_grad():
        heads.heads[1].up.weight.mul_(-1)
    with torch.inference_mode():
        after = lean.head_logits(heads, z, ids)
        fresh = LeanLlama(model, "int4").head_logits(heads, z, ids)
    assert torch.equal(after, fresh) and not torch.equal(after[:, 1], before[:, 1])


def _core_step(lean: LeanLlama, heads, **change):
    fused = lean._heads_for(heads)
    rows = lean._rows_for(heads.draft_vocab)
    args = dict(
        count=3,
        hidden=64,
        width=fused.hidden,
        vocab=VOCAB,
        embedding=lean.embed.view(torch.int16).numpy(),
        bits=4,
        up=(fused.up.codes, fused.up.scales, fused.up.mins),
        up_bias=fused.up_bias.numpy(),
        down=(fused.down.codes, fused.down.scales, fused.down.mins),
        down_bias=fused.down_bias.numpy(),
        rows_bits=rows.bits,
        rows=(rows.codes, rows.scales, rows.mins),
        rows_n=rows.out_features,
        row_tokens=heads.draft_vocab.numpy(),
    )
    return _core.DraftHeadsStep(**(args | change))


def test_bad_input_is_one_clear_error():
    model = llama(seed=3, vocab=VOCAB, **QUANTIZABLE).to(torch.bfloat16)
    heads = _heads(model, True, True)
    lean = LeanLlama(model, "int4")
    step = _core_step(lean, heads)
    z, out = np.zeros((2, 64), dtype=np.int16), np.zeros((2, 3, VOCAB), dtype=np.float32)
    step.forward(z, np.array([0, VOCAB - 1]), out, 1)
    with pytest.raises(ValueError, match=f"next token {VOCAB} outside the vocabulary of {VOCAB}"):
        step.forward(z, np.array([0, VOCAB]), out, 1)
    with pytest.raises(ValueError, match="next token -1 outside"):
        step.forward(z, np.array([-1, 0]), out, 1)
    with pytest.raises(ValueError, match="logits has shape"):
        step.forward(z, np.array([0, 1]), out[:, :2].copy(), 1)
    with pytest.raises(ValueError, match="z has shape"):
        step.forward(np.zeros((2, 32), dtype=np.int16), np.array([0, 1]), out, 1)
    with pytest.raises(ValueError, match="row_tokens\\[0\\] = 96 outside the vocabulary"):
        _core_step(lean, heads, row_tokens=np.full(16, VOCAB, dtype=np.int64))
    with pytest.raises(ValueError, match="up: codes has shape"):
        _core_step(lean, heads, width=32)
    with pytest.raises(ValueError, match="embedding of shape"):
        _core_step(lean, heads, vocab=VOCAB + 1)
    with pytest.raises(ValueError, match="kernel 'avx9000' is not available"):
        _core_step(lean, heads, kernel="avx9000")
