"""Sampling mode is lossless: the decoder's output law is the target's own sampling law.

The target law of every 4-token continuation over a 3-token vocabulary is computed exactly (one
batched forward over all 81 continuations); the decoder's empirical law over many seeded runs
is compared with it by a chi-square test. A drafter that misreports q fails the same test, so
the test has power.
"""

from __future__ import annotations

import itertools

import pytest
import scipy.stats
import torch

from _decode_models import markov_ngram, ngram_dir, trained_model  # noqa: F401 (fixtures)
from draftlattice.decode import BlockwiseDecoder, Drafts, LatticeDrafter, NeuralDrafter, SamplingConfig, VanillaDrafter
from draftlattice.decode.sampling import seen_tokens

pytestmark = pytest.mark.usefixtures("one_thread")

VOCAB, NEW, H = 3, 4, 3
PROMPT = [0, 1]
RUNS = 1200


def target_law(model, sampling: SamplingConfig) -> dict[tuple[int, ...], float]:
    """Exact probability of every continuation of length NEW under the target's sampling."""
    continuations = list(itertools.product(range(VOCAB), repeat=NEW))
    batch = torch.tensor([PROMPT + list(c) for c in continuations])
    with torch.inference_mode():
        logits = model(batch).logits[:, len(PROMPT) - 1 : -1, 0]  # [81, NEW, V]
    seen = torch.stack([seen_tokens(PROMPT, VOCAB, torch.tensor([c]))[0, :NEW] for c in continuations])
    probs = sampling.distribution(logits.double(), seen)
    steps = probs.gather(-1, batch[:, len(PROMPT) :, None]).squeeze(-1)  # [81, NEW]
    return {c: float(p) for c, p in zip(continuations, steps.prod(-1))}


def decoder_counts(decoder, seed: int) -> dict[tuple[int, ...], int]:
    generator = torch.Generator().manual_seed(seed)
    counts: dict[tuple[int, ...], int] = {}
    for _ in range(RUNS):
        out = tuple(decoder.generate(PROMPT, NEW, generator=generator).tokens)
        counts[out] = counts.get(out, 0) + 1
    return counts


def chi_square_pvalue(law: dict, counts: dict) -> float:
    """Chi-square goodness of fit, outcomes with expected count < 5 pooled into one cell."""
    assert sum(counts.values()) == RUNS
    assert set(counts) <= {c for c, p in law.items() if p > 0}, "an impossible output was produced"
    observed, expected, rest_obs, rest_exp = [], [], 0, 0.0
    for outcome, p in law.items():
        if p * RUNS >= 5:
            observed.append(counts.get(outcome, 0))
            expected.append(p * RUNS)
        else:
            rest_obs += counts.get(outcome, 0)
            rest_exp += p * RUNS
    if rest_exp > 0:
        observed.append(rest_obs)
        expected.append(rest_exp)
    scale = sum(observed) / sum(expected)  # guards float round-off in sum(law) == 1
    return float(scipy.stats.chisquare(observed, [e * scale for e in expected]).pvalue)


def tiny_model():
    return trained_model(H, seed=3, vocab=VOCAB)


CASES = [
    ("block", "vanilla", SamplingConfig()),
    ("token", "vanilla", SamplingConfig(top_p=0.8)),
    ("block", "neural", SamplingConfig(temperature=0.8)),
    ("block", "vanilla", SamplingConfig(temperature=1.5, top_k=2)),
    ("block", "ngram", SamplingConfig(temperature=0.9)),
    ("token", "ngram", SamplingConfig(top_k=2)),
    ("block", "vanilla", SamplingConfig(repetition_penalty=1.6)),
    ("block", "ngram-top-k-only", SamplingConfig(temperature=0.9)),
    ("multi", "vanilla-3", SamplingConfig(temperature=0.8)),
    ("multi", "ngram-3", SamplingConfig(top_p=0.9, repetition_penalty=1.3)),
    ("tree-sample", "ngram-3", SamplingConfig(temperature=1.2)),
    ("multi-wor", "vanilla-3", SamplingConfig(top_k=2)),
    ("multi-wor", "ngram-3", SamplingConfig(temperature=0.9, top_p=0.95)),
    ("tree-sample", "vanilla", SamplingConfig(top_k=2, repetition_penalty=0.7)),
]


@pytest.mark.parametrize(("verifier", "drafter_name", "sampling"), CASES)
def test_sampling_preserves_the_target_distribution(verifier, drafter_name, sampling, ngram_dir):
    model = tiny_model()
    if drafter_name.startswith("vanilla"):
        drafter = VanillaDrafter()
    elif drafter_name == "neural":
        drafter = NeuralDrafter(trained_model(2, seed=4, vocab=VOCAB), k=2, alpha=1.0)
    else:  # exact samples from the lattice rescored by a trigram LM, k = 2 of 3 tokens
        lm = markov_ngram(ngram_dir, order=3, seed=5, vocab=VOCAB)
        drafter = LatticeDrafter(lm, k=2, alpha=1.0, sample_alpha=1.0, full_support=drafter_name != "ngram-top-k-only")
    if drafter_name.endswith("-3"):
        drafter.num_drafts = 3
    decoder = BlockwiseDecoder(model, drafter, verifier, sampling)
    counts = decoder_counts(decoder, seed=11)
    assert chi_square_pvalue(target_law(model, sampling), counts) > 1e-3


class LyingDrafter(VanillaDrafter):
    """Samples from the head but tells the verifier q is uniform: no longer lossless."""

    def sample(self, head_logits, context, sampling, generator, n=1):
        drafts = super().sample(head_logits, context, sampling, generator, n)
        return Drafts(drafts.tokens, torch.full_like(drafts.q, 1.0 / VOCAB))


@pytest.mark.parametrize("verifier", ["block", "multi"])
def test_the_check_detects_a_drafter_that_misreports_q(verifier):
    model = tiny_model()
    drafter = LyingDrafter()
    drafter.num_drafts = 2
    decoder = BlockwiseDecoder(model, drafter, verifier, SamplingConfig())
    counts = decoder_counts(decoder, seed=11)
    # The lossless tests pass at p > 1e-3: a lie must fall far below that (multi: about 3e-6).
    assert chi_square_pvalue(target_law(model, SamplingConfig()), counts) < 1e-4


def test_drafts_are_accepted_in_sampling_mode():
    decoder = BlockwiseDecoder(tiny_model(), VanillaDrafter(), "block", SamplingConfig())
    generator = torch.Generator().manual_seed(0)
    stats = sum(
        (decoder.generate(PROMPT, 12, generator=generator).stats for _ in range(20)),
        start=type(decoder.generate(PROMPT, 1).stats)(),
    )
    assert stats.block_efficiency > 1.2, stats.summary()


def test_sampling_mode_rejects_several_drafts():
    class Two(VanillaDrafter):
        def sample(self, head_logits, context, sampling, generator, n=1):
            d = super().sample(head_logits, context, sampling, generator, n)
            return Drafts(d.tokens.repeat(2, 1), d.q.repeat(2, 1, 1))

    with pytest.raises(ValueError, match="one draft"):
        BlockwiseDecoder(tiny_model(), Two(), "block").generate(PROMPT, 4, generator=torch.Generator())


@pytest.mark.parametrize("penalty,T,top_k,top_p", [(1.3, 1.0, 0, 1.0), (0.8, 0.7, 5, 0.9), (2.0, 1.5, 0, 0.8)])
def test_processing_matches_hugging_face(penalty, T, top_k, top_p):
    """Repetition penalty, temperature, top-k, top-p: the same law as transformers' processors."""
    from transformers import (
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    gen = torch.Generator().manual_seed(0)
    V, context = 20, [3, 7, 7, 12, 0]
    logits = torch.randn(1, V, generator=gen, dtype=torch.float64) * 2
    ids = torch.tensor([context])
    x = RepetitionPenaltyLogitsProcessor(penalty)(ids, logits.clone())
    x = TemperatureLogitsWarper(T)(ids, x)
    if top_k:
        x = TopKLogitsWarper(top_k)(ids, x)
    if top_p < 1:
        x = TopPLogitsWarper(top_p)(ids, x)
    ours = SamplingConfig(T, top_k, top_p, penalty).distribution(logits, seen_tokens(context, V))
    torch.testing.assert_close(ours, x.softmax(-1))


def test_seen_tokens_follow_each_draft_prefix():
    seen = seen_tokens([1], 5, torch.tensor([[2, 3], [4, 2]]))
    assert seen.shape == (2, 3, 5)
    expected = [[{1}, {1, 2}, {1, 2, 3}], [{1}, {1, 4}, {1, 2, 4}]]
    for i in range(2):
        for j in range(3):
            assert set(torch.nonzero(seen[i, j]).flatten().tolist()) == expected[i][j]
    with pytest.raises(ValueError, match="seen"):
        SamplingConfig(repetition_penalty=1.2).distribution(torch.zeros(3))
    with pytest.raises(ValueError, match="repetition_penalty"):
        SamplingConfig(repetition_penalty=0.0)


@pytest.mark.parametrize("verifier", ["multi", "multi-wor", "tree-sample"])
@pytest.mark.parametrize("kind", ["vanilla", "ngram"])
def test_multi_draft_sampling_creates_every_tensor_on_the_target_device(verifier, kind, ngram_dir):
    """The several-draft verifiers allocate nothing on the host by accident (tests/_fake_device.py)
    and give the same draws as on the plain CPU."""
    import copy

    from _fake_device import FakeDevice

    model = copy.deepcopy(trained_model(4, vocab=VOCAB))
    prompt, sampling = [0, 1, 2, 1], SamplingConfig(temperature=0.8, top_k=2, repetition_penalty=1.2)

    def run(fake: bool):
        if kind == "vanilla":
            drafter = VanillaDrafter()
        else:
            drafter = LatticeDrafter(markov_ngram(ngram_dir, order=3, seed=5, vocab=VOCAB), k=2, p=3)
        drafter.num_drafts = 3
        decoder = BlockwiseDecoder(model, drafter, verifier, sampling)
        generator = torch.Generator().manual_seed(7)
        if not fake:
            return decoder.generate(prompt, 12, generator=generator).tokens, []
        with FakeDevice(model) as device:
            tokens = decoder.generate(prompt, 12, generator=generator).tokens
        return tokens, device.violations

    plain, _ = run(False)
    faked, violations = run(True)
    assert violations == []
    assert faked == plain
