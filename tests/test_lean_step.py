"""The lean target step (draftlattice.lean): the same model as transformers' forward, its
quantized formats as exact as their codes, and the engine's guarantees kept when it runs the step.

References: transformers' own ``base_model`` forward and ``generate()`` (float32, dense weights);
the dequantized codes of each format (int8, int4) for the quantized layers; the step's own
one-token-at-a-time greedy decoding (``LeanLlama.greedy``) for drafted decoding in a quantized
format; an exactly enumerated law for sampling through a quantized step.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import draftlattice.hf as dlhf
from _engine_models import PROMPTS, run, trained
from _hf_models import gpt2, left_padded, llama
from _q8 import INTEGER_KERNELS, q8_activations
from draftlattice import _core
from draftlattice.decode import Engine, LatticeDrafter, RowStopper
from draftlattice.decode.cache import additive_mask
from draftlattice.decode.drafters.lookup import ContextLookup
from draftlattice.lean import LeanLlama, StaticCache
from draftlattice.lean.heads import LeanHeads
from draftlattice.lean.linear import make_linear
from draftlattice.lean.lowbit import LowbitLinear, quantized_linear
from draftlattice.lean.model import FUSED_TOKENS
from draftlattice.verify import build_tree

KERNELS = ["torch", *_core.lowbit_kernels()]

pytestmark = pytest.mark.usefixtures("one_thread")

# hidden and intermediate sizes divisible by the int4 group (32)
QUANTIZABLE = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2)


def test_dense_step_equals_the_model_forward_with_left_padding():
    model = llama(seed=5)
    ids, mask = left_padded([[3, 4, 5, 6, 7], [9, 1]])
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    lean = LeanLlama(model, "dense")
    with torch.inference_mode():
        expected = model.model(input_ids=ids, attention_mask=mask, position_ids=positions).last_hidden_state
        got = lean.hidden(ids, positions, mask, lean.new_cache(2, 3))  # capacity grows past 3
    keep = mask.bool()
    torch.testing.assert_close(got[keep], expected[keep], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ["tree", "batch"])
def test_drafted_greedy_with_the_dense_step_equals_generate(layout):
    model, heads = trained()
    lean = LeanLlama(model, "dense")
    ids, mask = left_padded(PROMPTS)
    expected = model.generate(ids, attention_mask=mask, max_new_tokens=24, do_sample=False, pad_token_id=0)
    got = model.generate(
        ids,
        attention_mask=mask,
        max_new_tokens=24,
        do_sample=False,
        pad_token_id=0,
        custom_generate=dlhf.generate,
        draft_heads=heads,
        draft_p=3,
        draft_verify=layout,
        draft_step=lean,
        return_dict_in_generate=True,
    )
    assert torch.equal(got.sequences, expected)
    stats = got.draft_stats
    assert stats.tokens_per_call > 1.2  # drafts were accepted: cache edits were exercised
    # the steps' forwards are timed apart from the rest of each step, the prompt's left out
    assert 0 < stats.forward_seconds < stats.verification_seconds


def _q4_1_weight(out_features: int, in_features: int, seed: int) -> torch.Tensor:
    """A weight made like a Q4_1 tensor: per group of 32, ``min + scale * q`` with q in 0..15
    using both ends (bf16-exact scales and minima, so the codes are recoverable exactly)."""
    g = torch.Generator().manual_seed(seed)
    groups = in_features // 32
    codes = torch.randint(0, 16, (out_features, groups, 32), generator=g)
    codes[..., 0], codes[..., 1] = 0, 15
    scale = (torch.rand(out_features, groups, 1, generator=g) * 0.01 + 0.001).bfloat16().float()
    low = (-7.5 * scale + torch.randn(out_features, groups, 1, generator=g) * 0.002).bfloat16().float()
    return (low + scale * codes).view(out_features, in_features)


@pytest.mark.parametrize("kernel", KERNELS)
def test_int4_recovers_q4_1_codes(kernel):
    weight = _q4_1_weight(96, 128, seed=1)
    layer = quantized_linear(weight, "int4", kernel)
    eye = torch.eye(128, dtype=torch.bfloat16)
    dequantized = layer(eye).float().t()  # [out, in]
    torch.testing.assert_close(dequantized, weight.bfloat16().float(), rtol=1e-2, atol=2e-4)
    x = torch.randn(5, 128).bfloat16()
    torch.testing.assert_close(layer(x).float(), x.float() @ weight.t(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("kernel", KERNELS)
def test_int8_is_symmetric_per_channel_with_torch_per_group_with_ours(kernel):
    weight = torch.randn(40, 64, generator=torch.Generator().manual_seed(2))
    layer = quantized_linear(weight, "int8", kernel)
    groups = weight.view(40, 1 if kernel == "torch" else 2, -1)
    scale = groups.abs().amax(-1, keepdim=True) / 127
    if kernel != "torch":
        scale = scale.half().float()  # ours keep scales in float16, as GGUF's Q8_0
    dequantized = ((groups / scale).round().clamp(-127, 127) * scale).view(40, 64)
    x = torch.randn(3, 7, 64).bfloat16()
    got = layer(x)
    assert got.shape == (3, 7, 40)
    seen = q8_activations(x).float() if kernel in INTEGER_KERNELS else x.float()
    torch.testing.assert_close(got.float(), seen @ dequantized.t(), rtol=2e-2, atol=2e-2)
    assert (dequantized - weight).abs().max() <= scale.max() / 2 + 1e-6
    assert layer.format == "int8" and layer.kernel == kernel


@pytest.mark.parametrize("weights", ["int8", "int4"])
def test_drafted_greedy_in_a_quantized_format_follows_its_own_greedy(weights):
    """Drafts verified in one forward, cache edited in place: the output is the quantized
    model's own one-token-at-a-time greedy output, up to bf16 rounding. Several tokens in one
    forward round differently from one at a time, so where the two first differ, the reference's
    two candidates must be within rounding of each other (a cache or mask bug gives wide gaps)."""
    model = llama(seed=7, vocab=48, **QUANTIZABLE)
    with torch.no_grad():
        model.lm_head.weight.mul_(40)  # a peaked model: drafts accepted and rejected, wide margins
    model = model.to(torch.bfloat16)
    heads = dlhf.DraftHeads.for_model(model, horizon=3)
    lean = LeanLlama(model, weights)
    engine = Engine(model, heads, LatticeDrafter(None, k=4, p=3), step=lean)
    agreeing = 0
    for prompt in PROMPTS:
        ids = torch.tensor([prompt])
        drafted, _, _ = run(engine, ids, 20)
        reference = lean.greedy(ids, 20)
        first = next((i for i, (a, b) in enumerate(zip(drafted[0], reference)) if a != b), None)
        if first is None:
            agreeing += 1
            continue
        with torch.inference_mode():
            prefix = torch.tensor([prompt + reference[:first]])
            positions = torch.arange(prefix.shape[1]).unsqueeze(0)
            logits = lean.logits(lean.hidden(prefix, positions, None, lean.new_cache(1)))[0, -1]
        gap = float(logits[reference[first]] - logits[drafted[0][first]])
        assert 0 <= gap <= 2**-6 * float(logits.abs().max()), (prompt, first, gap)
    assert agreeing >= len(PROMPTS) - 2


FUSABLE = dict(hidden_size=128, intermediate_size=160, num_attention_heads=2, num_key_value_heads=1)  # head size 64
needs_fused = pytest.mark.skipif(
    not _core.fused_step_runs(64), reason="the fused int4 step needs one of draftlattice's kernels (x86)"
)
# The fused step's kernel on this CPU (its attention: AVX-512 BF16 beside the AVX-512 kernels)
# and the AVX2 ones (their attention in plain C++), where the CPU runs them.
FUSED_HERE = sorted({k for k in (_core.lowbit_kernels()[:1] + ["avx2-int8", "avx2"]) if k in _core.lowbit_kernels()})
each_fused_kernel = pytest.mark.parametrize("kernel", FUSED_HERE)


@needs_fused
@each_fused_kernel
def test_a_fused_step_computes_each_token_as_a_one_token_step_does(kernel):
    """Every kernel of the fused step computes a row independently of the others: hidden states
    of 7 tokens in one step equal those of 7 one-token steps, bit for bit."""
    model = llama(seed=3, vocab=64, **FUSABLE).to(torch.bfloat16)
    lean = LeanLlama(model, "int4", kernel=kernel)
    assert lean.fused
    ids = torch.randint(0, 64, (1, 12), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        together_cache, alone_cache = lean.new_cache(1), lean.new_cache(1)
        for cache in (together_cache, alone_cache):
            lean.hidden(ids[:, :5], torch.arange(5).unsqueeze(0), None, cache)
        mask = torch.zeros(1, 1, 7, 12, dtype=torch.bfloat16)
        mask[..., 5:] = torch.full((7, 7), float("-inf")).triu(1).bfloat16()
        together = lean.hidden(ids[:, 5:], torch.arange(5, 12).unsqueeze(0), mask, together_cache)
        for t in range(7):
            one = torch.zeros(1, 1, 1, 6 + t, dtype=torch.bfloat16)
            alone = lean.hidden(ids[:, 5 + t : 6 + t], torch.tensor([[5 + t]]), one, alone_cache)
            assert torch.equal(alone[0, 0], together[0, t]), t
            assert torch.equal(lean.logits(alone[0, 0]), lean.logits(together[0, t]))


@needs_fused
@each_fused_kernel
def test_a_prompt_longer_than_a_fused_call_runs_in_pieces_with_one_calls_bits(kernel):
    """A prompt of 2.5 fused calls' tokens, with left padding in a batch: its hidden states and
    its cache equal those of each row's tokens stepped one at a time (every row is computed on
    its own, so the pieces change no bit)."""
    model = llama(seed=4, vocab=64, max_position_embeddings=512, **FUSABLE).to(torch.bfloat16)
    lean = LeanLlama(model, "int4", kernel=kernel)
    assert lean.fused
    T = 2 * FUSED_TOKENS + FUSED_TOKENS // 2
    ids = torch.randint(0, 64, (2, T), generator=torch.Generator().manual_seed(3))
    valid = torch.ones(2, T, dtype=torch.long)
    valid[1, :5] = 0  # row 1 left-padded
    positions = (valid.cumsum(-1) - 1).clamp(min=0)
    with torch.inference_mode():
        cache = lean.new_cache(2)
        prompt = lean.hidden(ids, positions, valid, cache)
        for row in range(2):
            start = 5 if row else 0
            alone_cache = lean.new_cache(1)
            for t in range(start, T):
                one = torch.zeros(1, 1, 1, t - start + 1, dtype=torch.bfloat16)
                alone = lean.hidden(
                    ids[row : row + 1, t : t + 1], positions[row : row + 1, t : t + 1], one, alone_cache
                )
                assert torch.equal(alone[0, 0], prompt[row, t]), (row, t)
            kept = slice(start, T)
            assert torch.equal(alone_cache.keys[0][0, :, : T - start], cache.keys[0][row, :, kept])
            assert torch.equal(alone_cache.values[-1][0, :, : T - start], cache.values[-1][row, :, kept])


@needs_fused
@each_fused_kernel
def test_drafted_greedy_through_the_fused_step_equals_its_own_greedy_exactly(kernel):
    model = llama(seed=7, vocab=48, **FUSABLE)
    with torch.no_grad():
        model.lm_head.weight.mul_(40)  # a peaked model: drafts accepted and rejected
    model = model.to(torch.bfloat16)
    heads = dlhf.DraftHeads.for_model(model, horizon=3)
    lean = LeanLlama(model, "int4", kernel=kernel)
    engine = Engine(model, heads, LatticeDrafter(None, k=4, p=3), step=lean)
    accepted = 0.0
    for prompt in PROMPTS:
        ids = torch.tensor([prompt])
        drafted, stats, _ = run(engine, ids, 20)
        assert drafted[0] == lean.greedy(ids, 20), prompt
        accepted += stats.tokens_per_call
    assert accepted / len(PROMPTS) > 1.2  # drafts were accepted: multi-token steps were compared


@needs_fused
@each_fused_kernel
def test_the_context_copy_alone_through_the_fused_step_equals_its_own_greedy_exactly(kernel):
    """No heads: steps of the root alone (no copy) and of the root and a copied draft."""
    model = llama(seed=7, vocab=48, **FUSABLE)
    with torch.no_grad():
        model.lm_head.weight.mul_(40)
    model = model.to(torch.bfloat16)
    lean = LeanLlama(model, "int4", kernel=kernel)
    engine = Engine(model, None, ContextLookup(None, max_ngram=2, length=4), step=lean)
    nodes = calls = 0
    for prompt in PROMPTS:
        ids = torch.tensor([prompt + prompt])  # a copy to find from the first step
        drafted, stats, _ = run(engine, ids, 20)
        assert drafted[0] == lean.greedy(ids, 20), prompt
        nodes, calls = nodes + stats.nodes, calls + stats.target_calls
    assert calls < nodes < 5 * calls  # both kinds of steps ran


@needs_fused
@each_fused_kernel
def test_each_node_of_a_token_tree_step_is_computed_as_one_token_steps_along_its_path(kernel):
    """In a token tree, other branches' nodes sit masked between a node's ancestors: the fused
    attention skips masked keys, so every node's hidden state equals one-token steps along its
    own path, bit for bit. (Its softmax sum once ran in lanes by key index: a masked key moved the
    node's later keys into other lanes, the sum changed in its last bit, and the demo's heads_tree
    row left the int4 step's own greedy output.)"""
    shape = dict(hidden_size=512, intermediate_size=256, num_attention_heads=8, num_key_value_heads=2)
    model = llama(seed=3, vocab=64, num_hidden_layers=4, **shape).to(torch.bfloat16)
    lean = LeanLlama(model, "int4", kernel=kernel)
    assert lean.fused
    generator = torch.Generator().manual_seed(0)
    interleaved = 0
    for past in (13, 30, 47, 60):
        ids = torch.randint(0, 64, (1, past + 1), generator=generator)
        drafts = torch.randint(0, 64, (1, 4, 4), generator=generator)
        drafts[0, 1, :2] = drafts[0, 0, :2]  # branches that fork below the root too
        tree = build_tree(drafts, position_offset=past, dtype=torch.bfloat16)
        tokens = tree.tokens.clone()
        tokens[0, 0] = ids[0, past]
        with torch.inference_mode():
            cache = lean.new_cache(1)
            lean.hidden(ids[:, :past], torch.arange(past).unsqueeze(0), None, cache)
            prefix = copy.deepcopy(cache)
            mask = additive_mask(torch.ones(1, past, dtype=torch.bool), tree.ancestor, torch.bfloat16)
            nodes = lean.hidden(tokens, tree.position_ids, mask, cache)
            for n in range(tree.size):
                path = sorted(tree.ancestor[0, n].nonzero().flatten().tolist(), key=lambda j: int(tree.depth[0, j]))
                interleaved += len(path) < n + 1  # a masked node between the root and this one
                alone = copy.deepcopy(prefix)
                for j in path:
                    one = torch.zeros(1, 1, 1, alone.length + 1, dtype=torch.bfloat16)
                    hidden = lean.hidden(tokens[:, j : j + 1], tree.position_ids[:, j : j + 1], one, alone)
                assert torch.equal(hidden[0, 0], nodes[0, n]), (past, n)
    assert interleaved > 10  # the trees did put masked nodes between nodes and their ancestors


@needs_fused
@each_fused_kernel
def test_unfused_and_fused_steps_agree_up_to_rounding(kernel):
    model = llama(seed=5, vocab=64, **FUSABLE).to(torch.bfloat16)
    unfused = LeanLlama(model, "int4", kernel=kernel, fused=False)
    assert not unfused.fused
    fused = LeanLlama(model, "int4", kernel=kernel)
    assert fused.fused
    ids = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        a, b = (s.logits(s.hidden(ids, torch.arange(9).expand(2, 9), None, s.new_cache(2))) for s in (unfused, fused))
    torch.testing.assert_close(a, b, rtol=0.05, atol=0.05 * float(a.abs().max()))


def test_sampling_through_a_quantized_step_keeps_its_law():
    """Lossless sampling with an int4 step: the output law is the int4 model's own (enumerated
    from the step's forward over every continuation)."""
    from _laws import sampled_continuations_p_value

    model = llama(vocab=6, seed=3, **QUANTIZABLE)
    with torch.no_grad():
        model.lm_head.weight.mul_(40)
    model = model.to(torch.bfloat16)
    lean = LeanLlama(model, "int4")

    def logits_of(batch):
        positions = torch.arange(batch.shape[1]).expand_as(batch)
        return lean.logits(lean.hidden(batch, positions, None, lean.new_cache(len(batch))))

    assert sampled_continuations_p_value(model, lean, logits_of, seed=5) > 1e-3


def test_the_cache_grows_and_keeps_its_contents():
    cache = StaticCache(layers=1, batch=1, kv_heads=1, head_dim=2, capacity=2, dtype=torch.float32, device="cpu")
    for step in range(5):
        cache.reserve(1)
        cache.write(0, torch.full((1, 1, 1, 2), float(step)), torch.full((1, 1, 1, 2), -float(step)))
        cache.advance(1)
    assert cache.capacity == 8 and cache.get_seq_length() == 5
    assert cache.keys[0][0, 0, :5, 0].tolist() == [0, 1, 2, 3, 4]
    cache.keep_block(2, None, torch.tensor([[2, 0]]))  # of the block 2..4 keep slots 4 and 2
    assert cache.length == 4 and cache.values[0][0, 0, :4, 0].tolist() == [0, -1, -4, -2]


def test_bad_settings_are_refused_before_any_work():
    model = llama(seed=1)
    with pytest.raises(ValueError, match="weights must be one of dense, int8, int4, got 'int3'"):
        LeanLlama(model, "int3")
    with pytest.raises(ValueError, match="not 'gpt2'"):
        LeanLlama(gpt2(), "dense")
    with pytest.raises(ValueError, match="in_features divisible by 32"):
        LeanLlama(llama(seed=1, hidden_size=48, intermediate_size=64).to(torch.bfloat16), "int4")
    with pytest.raises(ValueError, match="kernel must be one of auto, torch, .* on this CPU, got 'avx9'"):
        LeanLlama(model, "dense", kernel="avx9")  # even where no layer is quantized: a typo is an error
    with pytest.raises(ValueError, match="kernel must be one of"):
        make_linear(torch.zeros(32, 32), "int4", torch.bfloat16, kernel="AVX2")
    with pytest.raises(ValueError, match="dynamic rope"):
        LeanLlama(llama(seed=1, rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "dense")
    with pytest.raises(ValueError, match="compute in bfloat16"):
        make_linear(torch.zeros(32, 32), "int8", torch.float32)
    other = LeanLlama(llama(seed=1, vocab=40), "dense")
    heads = dlhf.DraftHeads.for_model(model, horizon=3)
    with pytest.raises(ValueError, match="built for another model"):
        Engine(model, heads, LatticeDrafter(None, k=2, p=1), step=other)
    engine = Engine(model, heads, LatticeDrafter(None, k=2, p=1), step=LeanLlama(model, "dense"))
    ids = torch.tensor([[1, 2]])
    with torch.inference_mode():
        filled = model(ids, use_cache=True).past_key_values
    with pytest.raises(ValueError, match="its own cache"):
        engine.run(ids, RowStopper(ids, 2, set(), [], 0), cache=filled, max_length=4)


@pytest.mark.parametrize("fused", [True, False])
def test_batched_greedy_equals_each_prompt_alone(fused):
    """greedy_batch (left padding, EOS, padding after it) gives every row its own greedy output."""
    from draftlattice.lean.greedy import greedy_batch

    model = llama(seed=11, vocab=64, **FUSABLE).to(torch.bfloat16)
    lean = LeanLlama(model, "int4", fused=fused)
    prompts = [[5, 9, 2, 7], [3], [8, 8, 1, 4, 6, 2, 9], [10, 11]]
    width = max(map(len, prompts))
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, p in enumerate(prompts):
        ids[r, width - len(p) :], mask[r, width - len(p) :] = torch.tensor(p), 1
    alone = [lean.greedy(torch.tensor([p]), 12) for p in prompts]
    eos = alone[2][5]  # a token the third row emits: it must stop there, others may too
    out = greedy_batch(lean, ids, mask, 12, eos_ids=[eos], pad_id=0)
    assert out.shape == (4, width + 12)
    for r, reference in enumerate(alone):
        stop = next((i for i, t in enumerate(reference) if t == eos), len(reference) - 1)
        got = out[r, width:].tolist()
        assert got[: stop + 1] == reference[: stop + 1], r
        assert all(t == 0 for t in got[stop + 1 :]), r


def test_lean_heads_equal_their_per_head_products_and_follow_in_place_changes():
    """The heads on our kernels compute each head's down projection in one product over all
    heads' rows: bit for bit what a product per head gives. A step keeps them between calls and
    rebuilds them when the heads' parameters change in place (an optimizer step)."""
    model = llama(seed=3, vocab=48, **QUANTIZABLE).to(torch.bfloat16)
    heads = dlhf.DraftHeads.for_model(model, horizon=4).to(torch.bfloat16)
    torch.manual_seed(0)
    with torch.no_grad():
        for parameter in heads.parameters():  # the down projections start at 0: no test of them
            parameter.normal_(0, 0.1)
    lean = LeanLlama(model, "int4")
    if not LeanHeads.fits(heads) or lean.kernel == "torch":
        pytest.fail(f"the heads must run on our kernels here (kernel {lean.kernel})")
    z, ids = torch.randn(2, 3, 64).to(torch.bfloat16), torch.randint(0, 48, (2, 3))
    fused = LeanHeads(heads, lean.kernel)
    e = F.embedding(ids, lean.embed)
    hidden = F.gelu(fused.up(torch.cat([z, e], -1) if fused.reads_next_token else z).float() + fused.up_bias)
    hidden = hidden.to(z.dtype).split(fused.hidden, dim=-1)
    per_head = [
        z.float() + LowbitLinear(b.down.weight.float(), fused.down.bits, lean.kernel)(h).float() + b.down.bias.float()
        for b, h in zip(heads.heads, hidden)
    ]
    assert torch.equal(fused(z, e), torch.stack(per_head, dim=-2).to(z.dtype))
    with torch.inference_mode():
        before = lean.head_logits(heads, z, ids)
    with torch.no_grad():
        heads.heads[0].down.weight.mul_(2)
    with torch.inference_mode():
        after = lean.head_logits(heads, z, ids)
        fresh = LeanLlama(model, "int4").head_logits(heads, z, ids)
    assert torch.equal(after, fresh) and not torch.equal(after, before)
