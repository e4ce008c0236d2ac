"""Tuning ``sample_alpha`` (the LM weight of sampled lattice drafts) for acceptance.

The weight that drafts best in greedy mode is not the one that samples best: in sampling mode a
draft is accepted with the overlap of its proposal law q and the target's law, so the LM helps
only as far as it moves q towards the target. :func:`tune_sample_alpha` measures that directly on
calibration prompts (held out from the prompts one reports on):

1. the target's own sampled continuation of every prompt (lossless blockwise decoding with
   vanilla drafts: an exact sample of the target's sampling law) gives contexts as decoding meets
   them;
2. at every ``stride``-th position of it, for every candidate weight, the drafter samples its
   drafts (the decoder's ``"multi"`` rule: ``p`` drafts; ``"block"``: one) from the heads there,
   with the same seed for every weight (common random numbers);
3. one batched target forward over all candidates' draft rows gives the target's law after every
   draft prefix, and the **expected** number of accepted tokens given the drafts is computed
   exactly from the rule's output law (``verify.multi_draft_verify_distribution`` or
   ``block_verify_distribution``), so the verifier's own randomness adds no noise;
4. the weight with the highest mean expected accepted length wins.

Block efficiency of decoding is about ``1 + E[accepted]`` per step, so this is the quantity to
maximise. Cost: per evaluated position, ``len(alphas)`` lattice samplings and one forward over
``len(alphas) * p`` rows of the whole context (no cache: calibration, not decoding).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from .. import verify
from ..decode import BlockwiseDecoder, SamplingConfig, VanillaDrafter
from ..decode.drafters import LatticeDrafter
from ..decode.sampling import seen_tokens
from ..decode.target import check_positions, check_target

logger = logging.getLogger(__name__)

TUNE_RULES = ("multi", "block")


@dataclass
class AlphaScore:
    """Expected accepted draft tokens per step at one weight, over the calibration positions."""

    alpha: float
    mean: float
    stderr: float  # standard error of the mean over positions
    gap_stderr: float = 0.0  # standard error of (best - this), paired over the same positions


@dataclass
class SampleAlphaTuning:
    """Result of :func:`tune_sample_alpha`: the scores of every candidate and the best weight."""

    scores: list[AlphaScore]
    positions: int
    rule: str
    p: int
    sampling: SamplingConfig
    notes: list[str] = field(default_factory=list)

    @property
    def best(self) -> AlphaScore:
        return max(self.scores, key=lambda s: s.mean)

    def table(self) -> str:
        lines = [
            "| sample_alpha | expected accepted tokens per step | std. error | gap to best (paired s.e.) |",
            "|---:|---:|---:|---|",
        ]
        best = self.best
        for s in self.scores:
            gap = "best" if s is best else f"{best.mean - s.mean:.4f} ({s.gap_stderr:.4f})"
            lines.append(f"| {s.alpha:g} | {s.mean:.4f} | {s.stderr:.4f} | {gap} |")
        return "\n".join(lines)

    def to_json(self) -> dict:
        return {
            "best_alpha": self.best.alpha,
            "rule": self.rule,
            "p": self.p,
            "positions": self.positions,
            "scores": [{"alpha": s.alpha, "expected_accepted": s.mean, "stderr": s.stderr} for s in self.scores],
        }


def tune_sample_alpha(
    model,
    lm,
    prompts: Sequence[Sequence[int]],
    sampling: SamplingConfig,
    alphas: Sequence[float] = (0.0, 0.1, 0.2, 0.3, 0.5, 0.8),
    k: int = 8,
    p: int = 4,
    rule: str = "multi",
    max_new_tokens: int = 64,
    stride: int = 4,
    seed: int = 0,
    progress: Callable | None = None,
) -> SampleAlphaTuning:
    """Picks the ``sample_alpha`` of :class:`LatticeDrafter` that maximises the expected number
    of accepted draft tokens (module docstring).

    Args:
        model: the blockwise target (``BlockwiseLM`` or any ``BlockwiseTarget``).
        lm: the n-gram LM of the drafter (``NgramLM`` over the model's tokenizer).
        prompts: calibration prompts (token ids), held out from any prompts reported on.
        sampling: the target's sampling settings (temperature, top-k, top-p, penalty).
        alphas: candidate weights (>= 0, at least one).
        k: lattice candidates per head; p: drafts per step of the ``"multi"`` rule.
        rule: ``"multi"`` (p drafts, recursive rejection) or ``"block"`` (one draft).
        max_new_tokens: length of each prompt's sampled continuation.
        stride: evaluate every ``stride``-th position of the continuations.
        seed: seeds the continuations and the drafts (prompt i, position t: ``seed + i``, ...).
        progress: optional wrapper of an iterable (e.g. tqdm).
    """
    check_target(model)
    if rule not in TUNE_RULES:
        raise ValueError(f"rule must be one of {TUNE_RULES}, got {rule!r}")
    alphas = [float(a) for a in alphas]
    if not alphas or any(not (a >= 0 and math.isfinite(a)) for a in alphas):
        raise ValueError(f"alphas must be finite weights >= 0, at least one, got {alphas}")
    for name, value in (("k", k), ("p", p), ("max_new_tokens", max_new_tokens), ("stride", stride)):
        if value < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")
    if not prompts:
        raise ValueError("tune_sample_alpha needs at least one calibration prompt")
    n = p if rule == "multi" else 1
    drafters = [LatticeDrafter(lm, k=k, p=n, sample_alpha=a) for a in alphas]
    h = model.config.num_heads
    if h < 2:
        raise ValueError("the model has one head: there is nothing to draft")
    samples: list[list[float]] = [[] for _ in alphas]
    wrap = progress or (lambda items, **_: items)
    sampler = BlockwiseDecoder(model, VanillaDrafter(), "block", sampling)
    model.eval()
    with torch.inference_mode():
        for i, prompt in enumerate(wrap(list(prompts), desc="calibration")):
            prompt = list(prompt)
            check_positions(model, len(prompt) + max_new_tokens + h)
            continuation = sampler.generate(prompt, max_new_tokens, generator=_generator(seed + i)).tokens
            sequence = prompt + continuation
            ids = torch.tensor([sequence], device=model.device)
            heads = model.head_logits(model.trunk(ids))[0]  # [L, h, V]
            for t in range(len(prompt), len(sequence), stride):
                expected = _expected_accepted(
                    model, drafters, rule, sequence[: t + 1], heads[t - 1, 1:], sampling, seed=(seed + i) * 100_003 + t
                )
                for scores, value in zip(samples, expected):
                    scores.append(value)
    result = [AlphaScore(a, _mean(v), _stderr(v)) for a, v in zip(alphas, samples)]
    best = max(range(len(alphas)), key=lambda j: result[j].mean)
    for score, values in zip(result, samples):
        score.gap_stderr = _stderr([b - v for b, v in zip(samples[best], values)])
    tuning = SampleAlphaTuning(result, len(samples[0]), rule, n, sampling)
    logger.info("tune_sample_alpha: best %g over %d positions", tuning.best.alpha, tuning.positions)
    return tuning


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _expected_accepted(
    model, drafters, rule: str, context: list[int], head_logits: torch.Tensor, sampling: SamplingConfig, seed: int
) -> list[float]:
    """Per drafter: E[accepted draft tokens | its drafts] after ``context`` (its last token
    pending), drafts drawn with the same seed for every drafter."""
    drawn = [d.sample(head_logits, context, sampling, _generator(seed), n=d.num_drafts) for d in drafters]
    tokens = torch.cat([dr.tokens for dr in drawn]).to(model.device)  # [A*n, g]
    rows, g = tokens.shape
    prefix = torch.tensor(context, device=model.device).expand(rows, len(context))
    z = model.trunk(torch.cat([prefix, tokens], dim=1))[:, len(context) - 1 :]  # [A*n, g+1, d]
    logits = model.head1_logits(z).float()
    probs = sampling.distribution(logits, seen_tokens(context, logits.shape[-1], tokens, device=logits.device))
    out, start = [], 0
    for dr in drawn:
        n = dr.tokens.shape[0]
        d, q, law = tokens[start : start + n], dr.q.to(probs), probs[start : start + n]
        start += n
        if rule == "block":
            accepted = verify.block_verify_distribution(d, q, law[:, : g + 1])[0].sum(-1)  # [g+1]
        else:
            accepted = verify.multi_draft_verify_distribution(d[None], law[None], q[None])[0].sum((0, 2))
        out.append(float((accepted * torch.arange(g + 1, device=accepted.device)).sum()))
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _stderr(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1) / len(values))
