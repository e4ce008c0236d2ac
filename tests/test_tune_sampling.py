"""Tuning sample_alpha (apps/tune_sampling.py) on a transformers model with draft heads: the
expected accepted length it maximises equals the mean of what the engine's own sampling step
accepts (Monte-Carlo, same context, same drafts), the result is deterministic, picks the argmax
and leaves the caller's random state alone, and bad settings are named."""

from __future__ import annotations

import math

import pytest
import torch

from _engine_models import PROMPTS, trained
from _hf_models import own_ngram
from draftlattice.apps.tune_sampling import _expected_accepted, _sampled_drafts, tune_sample_alpha
from draftlattice.decode import Engine, LatticeDrafter, RowStopper, Sampling
from draftlattice.decode.drafters import Proposal, SampledDrafts

pytestmark = pytest.mark.usefixtures("one_thread")

RUNS = 1500


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    model, heads = trained()
    return model, heads, own_ngram(model, tmp_path_factory.mktemp("tune-sampling"), PROMPTS)


class FixedDrafts:
    """A drafter that proposes the same sampled drafts (tokens and q) for every row."""

    name = "fixed"

    def __init__(self, drafts: SampledDrafts) -> None:
        self.drafts, self.p = drafts, drafts.tokens.shape[1]

    def propose(self, head_logits, sampling, draws):
        assert draws == self.p
        B = head_logits.shape[0]
        tokens, q = self.drafts.tokens, self.drafts.q
        return Proposal([], SampledDrafts(tokens.expand(B, *tokens.shape[1:]), q.expand(B, *q.shape[1:])))

    def finish(self, proposal, host, contexts, device):
        return proposal.sampled.tokens, proposal.sampled


class Force:
    """A logits processor that makes ``token`` the only choice after ``length`` tokens: every
    row's first sampled token is the context's pending token."""

    def __init__(self, length: int, token: int) -> None:
        self.length, self.token = length, token

    def __call__(self, input_ids, scores):
        if input_ids.shape[1] != self.length:
            return scores
        forced = torch.full_like(scores, float("-inf"))
        forced[:, self.token] = 0.0
        return forced


@pytest.mark.parametrize("rule,p", [("multi", 3), ("block", 1)])
def test_expected_accepted_equals_the_engines_mean_acceptance(setup, rule, p):
    """Same context, same drafts: the tuner's exact expectation against RUNS verifications by the
    engine's own sampling step (its cache, its warpers), within 4 standard errors."""
    from transformers import LogitsProcessorList

    model, heads, lm = setup
    sampling = Sampling(temperature=0.9, top_p=0.95)
    context = PROMPTS[3] + [4]  # the last token is decided, not yet in the cache
    with torch.inference_mode():
        hidden = model.base_model(input_ids=torch.tensor([context[:-1]])).last_hidden_state[0, -1]
        head_logits = heads.logits(hidden, model)  # heads 2..h after the last cached token
    drafters = [LatticeDrafter(lm, k=3, p=p, sample_alpha=a) for a in (0.0, 0.7)]
    with torch.inference_mode():
        expected = _expected_accepted(model, drafters, rule, context, head_logits, sampling, seed=5)
    assert expected[0] != expected[1]  # the weight changes the drafts
    ids = torch.tensor([context[:-1]] * RUNS)
    for drafter, want in zip(drafters, expected):
        with torch.inference_mode():
            drafts = _sampled_drafts(drafter, head_logits, context, sampling, seed=5)
        processors = LogitsProcessorList([Force(len(context) - 1, context[-1]), *sampling.processors()])
        engine = Engine(model, heads, FixedDrafts(drafts), sample_rule=rule, sampling=sampling, processors=processors)
        torch.manual_seed(9)
        # Room for the forced token and the whole first block, so no stop cuts what the first
        # verification accepted (DecodeStats counts the draft tokens a row keeps).
        g = drafts.tokens.shape[-1]
        stopper = RowStopper(ids, 2 + g, set(), [], 0)
        tokens, stats = engine.run(ids, stopper, max_length=len(context) + 1 + g)
        assert all(row[0] == context[-1] for row in tokens)
        accepted = stats.accepted[0]  # every row's first verification
        assert len(accepted) == RUNS
        mean = sum(accepted) / RUNS
        sd = math.sqrt(sum((a - mean) ** 2 for a in accepted) / (RUNS - 1))
        assert abs(mean - want) < 4 * sd / math.sqrt(RUNS) + 1e-9, (rule, drafter.sample_alpha, mean, want)


def test_tuning_is_deterministic_and_picks_the_best(setup):
    model, heads, lm = setup
    calibration = PROMPTS[:3]
    sampling = Sampling(temperature=1.0, top_k=20)
    torch.manual_seed(123)
    untouched = torch.rand(3)
    runs = []
    for _ in range(2):
        torch.manual_seed(123)
        runs.append(
            tune_sample_alpha(
                model,
                heads,
                lm,
                calibration,
                sampling,
                alphas=(0.0, 0.5, 2.0),
                k=3,
                p=2,
                max_new_tokens=12,
                stride=2,
                seed=4,
            )
        )
        assert torch.equal(torch.rand(3), untouched)  # the caller's random state is restored
    assert [s.mean for s in runs[0].scores] == [s.mean for s in runs[1].scores]
    tuning = runs[0]
    assert tuning.positions == 3 * 6  # 12 tokens per prompt, every 2nd position
    assert tuning.best.mean == max(s.mean for s in tuning.scores)
    assert all(0 <= s.mean <= 3 for s in tuning.scores)  # g = 3 drafted tokens at most
    assert len({s.mean for s in tuning.scores}) == 3  # the weight changes the drafts
    assert (tuning.rule, tuning.p, tuning.sampling) == ("multi", 2, sampling)
    data = tuning.to_json()
    assert data["best_alpha"] == tuning.best.alpha and len(data["scores"]) == 3
    assert "best" in tuning.table()
    block = tune_sample_alpha(
        model, heads, lm, calibration[:1], sampling, alphas=(0.0, 2.0), k=3, rule="block", max_new_tokens=6, seed=4
    )
    assert block.p == 1 and block.positions == 2 and all(0 <= s.mean <= 3 for s in block.scores)


def test_bad_tuning_settings_are_named(setup):
    model, heads, lm = setup
    calibration, sampling = PROMPTS[:1], Sampling()
    for kwargs, words in [
        ({"rule": "tree"}, "rule must be one of"),
        ({"alphas": []}, "alphas"),
        ({"alphas": [-1.0]}, "alphas"),
        ({"stride": 0}, "stride"),
        ({"p": 0}, "p must"),
    ]:
        with pytest.raises(ValueError, match=words):
            tune_sample_alpha(model, heads, lm, calibration, sampling, **kwargs)
    with pytest.raises(ValueError, match="at least one calibration prompt"):
        tune_sample_alpha(model, heads, lm, [], sampling)
    with pytest.raises(ValueError, match="sampling must be"):
        tune_sample_alpha(model, heads, lm, calibration, {"temperature": 1.0})
    with pytest.raises(ValueError, match="positions"):
        tune_sample_alpha(model, heads, lm, [[1] * 250], sampling, max_new_tokens=8)
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        tune_sample_alpha(model, heads, lm, [[1, 2], []], sampling, max_new_tokens=2)
