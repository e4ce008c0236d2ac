"""Tuning sample_alpha (apps/tune_sampling.py): the expected accepted length it maximises equals
the mean of what the decoder's own sampling step accepts (Monte-Carlo, same drafts), the result
is deterministic and picks the argmax, bad settings are named, and `demo --sample-alpha auto`
runs it on held-out prompts."""

from __future__ import annotations

import math

import pytest
import torch

from _decode_models import markov_ngram, ngram_dir, prompts, trained_model  # noqa: F401 (fixtures)
from draftlattice.apps.tune_sampling import _expected_accepted, tune_sample_alpha
from draftlattice.decode import LatticeDrafter, SamplingConfig
from draftlattice.decode.loop import _StepOutput
from draftlattice.decode.sampling_step import sampling_step

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("rule,p", [("multi", 3), ("block", 1)])
def test_expected_accepted_equals_the_decoders_mean_acceptance(ngram_dir, rule, p):
    """Same context, same drafts: the tuner's exact expectation against 1500 verifications by
    the decoder's own sampling step (its cache, its target law), within 4 standard errors."""
    model = trained_model(num_heads=4, seed=1)
    lm = markov_ngram(ngram_dir)
    sampling = SamplingConfig(temperature=0.9, top_p=0.95, repetition_penalty=1.1)
    context = prompts(1, seed=3)[0]
    with torch.inference_mode():
        z = model.trunk(torch.tensor([context[:-1]]))
        heads = model.head_logits(z)[0, -1, 1:]  # the heads after the last cached token
        drafters = [LatticeDrafter(lm, k=3, p=p, sample_alpha=a) for a in (0.0, 0.7)]
        expected = _expected_accepted(model, drafters, rule, context, heads, sampling, seed=5)
        for drafter, want in zip(drafters, expected):
            drafts = drafter.sample(heads, context, sampling, torch.Generator().manual_seed(5), n=p)
            generator = torch.Generator().manual_seed(9)
            accepted = []
            for _ in range(1500):
                cache = model.new_cache()
                model.trunk(torch.tensor([context[:-1]]), cache)
                verifier = "multi" if rule == "multi" else "block"
                tokens, _, _ = sampling_step(
                    lambda rows, kv: _StepOutput(model, rows, kv), cache, context, drafts, sampling, verifier, generator
                )
                accepted.append(len(tokens))
            mean = sum(accepted) / len(accepted)
            sd = math.sqrt(sum((a - mean) ** 2 for a in accepted) / (len(accepted) - 1))
            assert abs(mean - want) < 4 * sd / math.sqrt(len(accepted)) + 1e-9, (rule, drafter.sample_alpha, mean, want)


def test_tuning_is_deterministic_and_picks_the_best(ngram_dir):
    model = trained_model(num_heads=4, seed=1)
    lm = markov_ngram(ngram_dir)
    calibration = prompts(3, seed=7)
    sampling = SamplingConfig(temperature=1.0)
    runs = [
        tune_sample_alpha(
            model, lm, calibration, sampling, alphas=(0.0, 0.5, 2.0), k=3, p=2, max_new_tokens=12, stride=2, seed=4
        )
        for _ in range(2)
    ]
    assert [s.mean for s in runs[0].scores] == [s.mean for s in runs[1].scores]
    tuning = runs[0]
    assert tuning.positions == 3 * 6  # 12 tokens per prompt, every 2nd position
    assert tuning.best.mean == max(s.mean for s in tuning.scores)
    assert all(0 <= s.mean <= 3 for s in tuning.scores)  # g = 3 drafted tokens at most
    assert len({s.mean for s in tuning.scores}) == 3  # the weight changes the drafts
    data = tuning.to_json()
    assert data["best_alpha"] == tuning.best.alpha and len(data["scores"]) == 3
    assert "best" in tuning.table()


def test_bad_tuning_settings_are_named(ngram_dir):
    model = trained_model(num_heads=4, seed=1)
    lm = markov_ngram(ngram_dir)
    calibration, sampling = prompts(1, seed=7), SamplingConfig()
    for kwargs, words in [
        ({"rule": "tree"}, "rule must be one of"),
        ({"alphas": []}, "alphas"),
        ({"alphas": [-1.0]}, "alphas"),
        ({"stride": 0}, "stride"),
        ({"p": 0}, "p must"),
    ]:
        with pytest.raises(ValueError, match=words):
            tune_sample_alpha(model, lm, calibration, sampling, **kwargs)
    with pytest.raises(ValueError, match="at least one calibration prompt"):
        tune_sample_alpha(model, lm, [], sampling)
