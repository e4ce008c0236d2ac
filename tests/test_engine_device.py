"""No decoding code path allocates on the host by accident: the decoder runs against a target that
claims another device (tests/_fake_device.py), in every verifier mode and with every drafter, and
its output still equals plain greedy decoding (or, sampling, the same run on the plain CPU)."""

from __future__ import annotations

import copy

import pytest
import torch

from _decode_models import markov_ngram, ngram_dir, prompts, trained_model  # noqa: F401
from _fake_device import FAKE, FakeDevice
from draftlattice.decode import (
    BlockwiseDecoder,
    LatticeDrafter,
    NeuralDrafter,
    OracleDrafter,
    SamplingConfig,
    VanillaDrafter,
    greedy_decode,
)
from draftlattice.decode.target import BlockwiseTarget, check_target

pytestmark = pytest.mark.usefixtures("one_thread")
NEW_TOKENS = 20


def make_drafter(kind: str, reference, ngram_dir):  # noqa: F811
    if kind == "vanilla":
        return VanillaDrafter()
    if kind == "lattice":
        return LatticeDrafter(markov_ngram(ngram_dir, order=3), k=3, p=3, alpha=1.0)
    if kind == "oracle":
        return OracleDrafter(reference, k=3)
    return NeuralDrafter(fresh(trained_model(2, seed=1)), k=3, alpha=1.0)


def fresh(model):
    """A private copy: the fake device tags its weights."""
    return copy.deepcopy(model)


@pytest.mark.parametrize("verifier", ["greedy", "tree"])
@pytest.mark.parametrize("kind", ["vanilla", "lattice", "neural", "oracle"])
def test_greedy_decoding_creates_every_tensor_on_the_target_device(verifier, kind, ngram_dir):  # noqa: F811
    model = fresh(trained_model(4))
    prompt = prompts(1, seed=3)[0]
    reference = prompt + greedy_decode(model, prompt, NEW_TOKENS)
    drafter = make_drafter(kind, reference, ngram_dir)
    with FakeDevice(model, *([drafter.lm] if kind == "neural" else [])) as fake:
        assert model.device == FAKE
        result = BlockwiseDecoder(model, drafter, verifier).generate(prompt, NEW_TOKENS)
    assert fake.violations == []
    assert prompt + result.tokens == reference
    assert result.stats.steps < NEW_TOKENS  # drafts were accepted: the multi-token paths ran


@pytest.mark.parametrize("verifier", ["block", "token"])
@pytest.mark.parametrize("kind", ["vanilla", "lattice", "neural"])
def test_sampling_creates_every_tensor_on_the_target_device(verifier, kind, ngram_dir):  # noqa: F811
    model = fresh(trained_model(4))
    prompt = prompts(1, seed=4)[0]
    sampling = SamplingConfig(temperature=0.8, top_k=10)

    def run(fake_device: bool):
        drafter = make_drafter(kind, None, ngram_dir)
        decoder = BlockwiseDecoder(model, drafter, verifier, sampling)
        generator = torch.Generator().manual_seed(7)
        if not fake_device:
            return decoder.generate(prompt, NEW_TOKENS, generator=generator).tokens, []
        with FakeDevice(model, *([drafter.lm] if kind == "neural" else [])) as fake:
            tokens = decoder.generate(prompt, NEW_TOKENS, generator=generator).tokens
        return tokens, fake.violations

    plain, _ = run(False)
    faked, violations = run(True)
    assert violations == []
    assert faked == plain  # same draws: the fake device changes where tensors claim to be, not values


def test_fake_device_flags_host_allocations_and_mixing():
    """The check can fail: a forgotten ``device=`` and a host/device mix are both reported."""
    weight = torch.nn.Linear(3, 3)
    with FakeDevice(weight) as fake:
        x = torch.ones(2, 3, device=weight.weight.device)
        weight(x)  # fine: both on the device
        assert fake.violations == []
        torch.zeros(2, 3)
        assert "torch.zeros created a host tensor" in fake.violations[-1]
        weight(torch.from_numpy(x.cpu().numpy()))
        assert "mixes device and host tensors" in fake.violations[-1]
        weight(torch.from_numpy(x.cpu().numpy()).to(weight.weight.device))
        x.numpy()
        assert "numpy() of a device tensor" in fake.violations[-1]
    assert len(fake.violations) == 3


def test_builtin_model_is_a_blockwise_target():
    model = trained_model(2)
    assert isinstance(model, BlockwiseTarget)
    assert check_target(model) is model
    assert (model.device, model.dtype) == (torch.device("cpu"), torch.float32)


def test_a_model_without_the_protocol_is_refused_by_name():
    class ForwardOnly(torch.nn.Module):
        config = trained_model(2).config

        def forward(self, input_ids, cache=None):
            raise AssertionError("never called")

    with pytest.raises(TypeError, match="not a BlockwiseTarget: it lacks device, dtype, new_cache, trunk"):
        BlockwiseDecoder(ForwardOnly(), VanillaDrafter())


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="not applicable: CUDA is not available")


@CUDA
@pytest.mark.parametrize("verifier", ["greedy", "tree", "block", "token"])
@pytest.mark.parametrize("kind", ["vanilla", "lattice", "neural"])
def test_decoding_on_cuda(verifier, kind, ngram_dir):  # noqa: F811
    """On a real accelerator: greedy modes equal greedy decoding there, sampling runs with a CUDA
    generator (the fake-device tests above cover the same paths without one)."""
    model = fresh(trained_model(4)).to("cuda")
    prompt = prompts(1, seed=5)[0]
    drafter = make_drafter(kind, None, ngram_dir)
    if kind == "neural":
        drafter.lm.to("cuda")
    if verifier in ("greedy", "tree"):
        result = BlockwiseDecoder(model, drafter, verifier).generate(prompt, NEW_TOKENS)
        assert result.tokens == greedy_decode(model, prompt, NEW_TOKENS)
    else:
        decoder = BlockwiseDecoder(model, drafter, verifier, SamplingConfig(temperature=0.8))
        result = decoder.generate(prompt, NEW_TOKENS, generator=torch.Generator("cuda").manual_seed(0))
        assert len(result.tokens) == NEW_TOKENS and all(0 <= t < model.config.vocab_size for t in result.tokens)
