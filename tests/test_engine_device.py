"""Nothing in the engine or its drafters allocates on the host by accident: the engine runs a
transformers model and draft heads that claim another device (tests/_fake_device.py), in both
greedy layouts with every drafter and with every sampling rule, and its output still equals
greedy generate() (or, sampling, the same seeded run on the plain CPU). The only host tensors are
the documented host transfers (HOST_WORK)."""

from __future__ import annotations

import copy

import pytest
import torch

from _engine_models import PROMPTS, run, trained, unpadded
from _fake_device import FAKE, FakeDevice
from _hf_models import greedy, left_padded, own_ngram
from draftlattice.decode import Engine, LatticeDrafter, NeuralDrafter, OracleDrafter, Sampling

pytestmark = pytest.mark.usefixtures("one_thread")
NEW_TOKENS = 16

# The engine's documented host work: what it builds on the host on purpose and copies to the device.
HOST_WORK = {
    "draftlattice/decode/engine.py:_verify": "the committed token lists, for generate()'s logits processors",
    "draftlattice/decode/forward.py:tree_forward": "the token tree, built from the drafts on the host",
    "draftlattice/verify/tree_host.py:host_tree_fields": "the same tree, walked on the host when it is small",
    "draftlattice/decode/processors.py:process_scores": "node indices of the processors' per-depth groups",
    "draftlattice/decode/drafters/lattice.py:_sampled": "the lattice sampler's seed, from torch's CPU generator",
}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Private copies of the trained model and heads (the fake device tags their weights)."""
    model, heads = trained()
    lm = own_ngram(model, tmp_path_factory.mktemp("engine-device"), PROMPTS)
    return copy.deepcopy(model), copy.deepcopy(heads), lm


def make_drafter(kind: str, lm, references=None, model=None):
    if kind == "heads":
        return LatticeDrafter(None, k=3, p=3)
    if kind == "lattice":
        return LatticeDrafter(lm, k=3, p=3, alpha=2.0)
    if kind == "neural":  # the target itself rescores (its weights are on the fake device)
        return NeuralDrafter(model, k=3, alpha=2.0, window=8)
    return OracleDrafter(references, k=3)


def on_fake_device(model, heads, engine, ids, mask, new, seed=None):
    """``run`` with the model and heads on the fake device: (tokens, stats, output, fake)."""
    with FakeDevice(model, heads, host_work=HOST_WORK) as fake:
        assert model.device == FAKE and next(heads.parameters()).device == FAKE
        if seed is not None:
            torch.manual_seed(seed)
        ids = ids.to(model.device)
        mask = None if mask is None else mask.to(model.device)
        tokens, stats, out = run(engine, ids, new, mask)
    return tokens, stats, out, fake


@pytest.mark.parametrize("layout", ["tree", "batch"])
@pytest.mark.parametrize("kind", ["heads", "lattice", "neural", "oracle"])
def test_greedy_decoding_creates_every_tensor_on_the_model_device(setup, layout, kind):
    model, heads, lm = setup
    ids, mask = left_padded([PROMPTS[0], PROMPTS[3], PROMPTS[2]])
    expected = greedy(model, ids, mask, max_new_tokens=NEW_TOKENS)
    references = [p + row for p, row in zip(unpadded(ids, mask), expected[:, ids.shape[1] :].tolist())]
    engine = Engine(model, heads, make_drafter(kind, lm, references, model), layout=layout)
    _, stats, out, fake = on_fake_device(model, heads, engine, ids, mask, NEW_TOKENS)
    assert fake.violations == []
    assert out.tolist() == expected.tolist()
    assert sum(map(sum, stats.accepted)) > 0  # drafts were accepted: the multi-token paths ran


@pytest.mark.parametrize("layout", ["tree", "batch"])
def test_context_dependent_processors_on_the_model_device(setup, layout):
    """A repetition penalty sees each node's own sequence (the per-node processor path)."""
    from transformers import LogitsProcessorList, RepetitionPenaltyLogitsProcessor

    model, heads, lm = setup
    ids, mask = left_padded([PROMPTS[1], PROMPTS[4]])
    expected = greedy(model, ids, mask, max_new_tokens=NEW_TOKENS, repetition_penalty=1.4)
    processors = LogitsProcessorList([RepetitionPenaltyLogitsProcessor(1.4)])
    engine = Engine(model, heads, make_drafter("lattice", lm), layout=layout, processors=processors)
    _, _, out, fake = on_fake_device(model, heads, engine, ids, mask, NEW_TOKENS)
    assert fake.violations == []
    assert fake.host_allocations  # the documented host work did run
    assert out.tolist() == expected.tolist()


@pytest.mark.parametrize("rule", ["multi", "tree", "block", "token"])
@pytest.mark.parametrize("kind", ["heads", "lattice"])
def test_sampling_creates_every_tensor_on_the_model_device(setup, rule, kind):
    """Every sampling rule, with the heads' own law and with sampled lattice drafts, draws the
    same tokens as the same seeded run on the plain CPU."""
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper

    model, heads, lm = setup
    ids, mask = left_padded([PROMPTS[0], PROMPTS[3]])
    sampling = Sampling(temperature=0.8, top_k=10)
    processors = LogitsProcessorList([TemperatureLogitsWarper(0.8), TopKLogitsWarper(10)])

    def engine():
        return Engine(model, heads, make_drafter(kind, lm), sample_rule=rule, sampling=sampling, processors=processors)

    torch.manual_seed(7)
    plain, _, _ = run(engine(), ids, NEW_TOKENS, mask)
    faked, stats, _, fake = on_fake_device(model, heads, engine(), ids, mask, NEW_TOKENS, seed=7)
    assert fake.violations == []
    assert faked == plain  # same draws: the fake device changes where tensors claim to be, not values
    assert stats.new_tokens == 2 * NEW_TOKENS


def test_fake_device_flags_host_allocations_and_mixing():
    """The check can fail: a forgotten ``device=`` and a host/device mix are both reported, and
    only factory calls inside the named host work are let through."""
    weight = torch.nn.Linear(3, 3)

    def documented_host_work():
        return torch.zeros(2)

    with FakeDevice(weight, host_work={"tests/test_engine_device.py:documented_host_work": "test"}) as fake:
        x = torch.ones(2, 3, device=weight.weight.device)
        weight(x)  # fine: both on the device
        assert fake.violations == []
        documented_host_work()
        assert fake.violations == [] and "torch.zeros created a host tensor" in fake.host_allocations[-1]
        torch.zeros(2, 3)
        assert "torch.zeros created a host tensor" in fake.violations[-1]
        weight(torch.from_numpy(x.cpu().numpy()))
        assert "mixes device and host tensors" in fake.violations[-1]
        weight(torch.from_numpy(x.cpu().numpy()).to(weight.weight.device))
        x.numpy()
        assert "numpy() of a device tensor" in fake.violations[-1]
    assert len(fake.violations) == 3 and len(fake.host_allocations) == 1


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="not applicable: CUDA is not available")


@CUDA
@pytest.mark.parametrize("mode", ["tree", "batch", "multi", "tree-sample", "block", "token"])
@pytest.mark.parametrize("kind", ["heads", "lattice"])
def test_decoding_on_cuda(setup, mode, kind):
    """On a real accelerator: the greedy layouts equal greedy generate() there (float32), the
    sampling rules run with CUDA draws (the fake-device tests cover the same paths without one)."""
    from transformers import LogitsProcessorList, TemperatureLogitsWarper

    model, heads, lm = setup
    model, heads = copy.deepcopy(model).to("cuda"), copy.deepcopy(heads).to("cuda")
    ids, mask = (t.to("cuda") for t in left_padded([PROMPTS[0], PROMPTS[3]]))
    drafter = make_drafter(kind, lm)
    if mode in ("tree", "batch"):
        expected = greedy(model, ids, mask, max_new_tokens=NEW_TOKENS)
        _, _, out = run(Engine(model, heads, drafter, layout=mode), ids, NEW_TOKENS, mask)
        assert out.tolist() == expected.tolist()
    else:
        rule = "tree" if mode == "tree-sample" else mode
        processors = LogitsProcessorList([TemperatureLogitsWarper(0.8)])
        engine = Engine(model, heads, drafter, sample_rule=rule, sampling=Sampling(0.8), processors=processors)
        torch.manual_seed(0)
        tokens, _, out = run(engine, ids, NEW_TOKENS, mask)
        assert out.device.type == "cuda"
        assert all(len(row) == NEW_TOKENS and all(0 <= t < model.config.vocab_size for t in row) for row in tokens)


@pytest.mark.parametrize("mode", ["tree", "batch", "multi"])
def test_heads_reading_the_next_token_stay_on_the_model_device(mode):
    """Heads that read token t + 1 embed the root on the model's device: no host allocation,
    greedy output equal to generate(), sampling equal to the plain-CPU run with the same seed."""
    from transformers import LogitsProcessorList, TemperatureLogitsWarper

    model, heads = (copy.deepcopy(m) for m in trained(next_token=True))
    ids, mask = left_padded([PROMPTS[0], PROMPTS[3]])
    if mode == "multi":
        sampling, processors = Sampling(0.8), LogitsProcessorList([TemperatureLogitsWarper(0.8)])

        def engine():
            return Engine(
                model,
                heads,
                LatticeDrafter(None, k=3, p=3),
                sample_rule="multi",
                sampling=sampling,
                processors=processors,
            )

        torch.manual_seed(3)
        expected, _, _ = run(engine(), ids, NEW_TOKENS, mask)
        tokens, _, _, fake = on_fake_device(model, heads, engine(), ids, mask, NEW_TOKENS, seed=3)
        assert tokens == expected
    else:
        expected = greedy(model, ids, mask, max_new_tokens=NEW_TOKENS)
        engine = Engine(model, heads, LatticeDrafter(None, k=3, p=3), layout=mode)
        _, stats, out, fake = on_fake_device(model, heads, engine, ids, mask, NEW_TOKENS)
        assert out.tolist() == expected.tolist() and sum(map(sum, stats.accepted)) > 0
    assert fake.violations == []
