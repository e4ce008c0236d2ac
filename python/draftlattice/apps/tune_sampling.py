"""Tuning ``sample_alpha`` (the LM weight of sampled lattice drafts) for acceptance.

The weight that drafts best in greedy mode is not the one that samples best: in sampling mode a
draft is accepted with the overlap of its proposal law q and the target's law, so the LM helps
only as far as it moves q towards the target. :func:`tune_sample_alpha` measures that directly on
calibration prompts (held out from the prompts one reports on), for a transformers causal LM and
its :class:`~draftlattice.hf.DraftHeads`:

1. the target's own sampled continuation of every prompt (the engine's lossless sampling with
   one-token drafts and block verification: an exact sample of the target's sampling law) gives
   contexts as decoding meets them;
2. one forward of the base model over prompt + continuation gives the heads at every position;
   at every ``stride``-th position, for every candidate weight, the drafter samples its drafts
   (the engine's ``"multi"`` rule: ``p`` drafts; ``"block"``: one) from the heads there, with
   the same seed for every weight (common random numbers);
3. one batched target forward over all candidates' draft rows (their root and draft tokens
   only: every row reads the context's keys and values from step 2's forward) gives the target's
   law after every draft prefix, and the **expected** number of accepted tokens given the drafts is computed
   exactly from the rule's output law (``verify.multi_draft_verify_distribution`` or
   ``block_verify_distribution``), so the verifier's own randomness adds no noise;
4. the weight with the highest mean expected accepted length wins.

Block efficiency of decoding is about ``1 + E[accepted]`` per step, so this is the quantity to
maximise. Cost: per evaluated position, ``len(alphas)`` lattice samplings and one forward over
``len(alphas) * p`` rows of ``h`` tokens each. The random
draws come from torch's generators, seeded from ``seed``; the caller's generator state is
restored afterwards.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from .. import verify
from ..decode import Engine, LatticeDrafter, RowStopper, Sampling
from ..decode.cache import cache_layers
from ..decode.drafters import to_host
from ..decode.target import cache_keyword, draft_head_logits

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
    sampling: Sampling
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
    heads,
    lm,
    prompts: Sequence[Sequence[int]],
    sampling: Sampling,
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
        model: the target, a transformers causal LM (``*ForCausalLM``, decoder-only).
        heads: its :class:`~draftlattice.hf.DraftHeads` (horizon h: drafts of h - 1 tokens).
        lm: the n-gram LM of the drafter (``NgramLM`` over the model's token ids).
        prompts: calibration prompts (token ids), held out from any prompts reported on.
        sampling: the target's sampling settings (temperature, top-k, top-p).
        alphas: candidate weights (>= 0, at least one).
        k: lattice candidates per head; p: drafts per step of the ``"multi"`` rule.
        rule: ``"multi"`` (p drafts, recursive rejection) or ``"block"`` (one draft).
        max_new_tokens: length of each prompt's sampled continuation.
        stride: evaluate every ``stride``-th position of the continuations.
        seed: seeds the continuations (prompt i: ``torch.manual_seed(seed + i)``) and the drafts
            (prompt i, position t: ``(seed + i) * 100_003 + t``, the same for every weight).
        progress: optional wrapper of an iterable (e.g. tqdm).
    """
    if rule not in TUNE_RULES:
        raise ValueError(f"rule must be one of {TUNE_RULES}, got {rule!r}")
    if not isinstance(sampling, Sampling):
        raise ValueError(f"sampling must be a draftlattice.decode.Sampling, got {type(sampling).__name__}")
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
    sampler = continuation_sampler(model, heads, sampling)
    device = model.get_output_embeddings().weight.device
    samples: list[list[float]] = [[] for _ in alphas]
    wrap = progress or (lambda items, **_: items)
    model.eval()
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), torch.inference_mode():
        for i, prompt in enumerate(wrap(list(prompts), desc="calibration")):
            prompt = [int(t) for t in prompt]
            if not prompt:
                raise ValueError(f"calibration prompt {i} is empty")
            _check_positions(model, len(prompt) + max_new_tokens + heads.horizon - 1)
            torch.manual_seed(seed + i)
            ids = torch.tensor([prompt], device=device)
            stopper = RowStopper(ids, max_new_tokens, set(), [], 0)
            continuation = sampler.run(ids, stopper, max_length=len(prompt) + max_new_tokens)[0][0]
            sequence = prompt + continuation
            hidden, kv = _cached_forward(model, torch.tensor([sequence], device=device))
            hidden = hidden[0]
            # Heads 2..h at every position [L, h-1, V]; heads that read the next token get it.
            following = torch.tensor(sequence[1:] + [0], device=device)
            head_logits = draft_head_logits(heads, model, hidden, following)
            for t in range(len(prompt), len(sequence), stride):
                prefix = [(keys[:, :, :t], values[:, :, :t]) for keys, values in kv]
                expected = _expected_accepted(
                    model,
                    drafters,
                    rule,
                    sequence[: t + 1],
                    head_logits[t - 1],
                    sampling,
                    (seed + i) * 100_003 + t,
                    prefix,
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


def continuation_sampler(model, heads, sampling: Sampling) -> Engine:
    """The engine that samples the calibration continuations: exactly the target's law (one
    head draft, block verification), whatever the heads."""
    return Engine(
        model,
        heads,
        LatticeDrafter(None, k=1, p=1),
        sample_rule="block",
        sampling=sampling,
        processors=sampling.processors(),
    )


def _check_positions(model, length: int) -> None:
    """The calibration forwards read ``length`` positions (continuation and drafts, no clamping)."""
    limit = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
    if limit and length > limit:
        raise ValueError(
            f"a calibration prompt, its continuation and a draft need {length} positions; the model has {limit}: "
            "use shorter prompts or a smaller max_new_tokens"
        )


def _expected_accepted(
    model,
    drafters,
    rule: str,
    context: list[int],
    head_logits: torch.Tensor,
    sampling: Sampling,
    seed: int,
    prefix: list[tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> list[float]:
    """Per drafter: E[accepted draft tokens | its drafts] after ``context`` (its last token
    decided, not yet in the cache), from the heads 2..h ``head_logits [h-1, V]`` that read the
    hidden state before it; drafts drawn after the same ``torch.manual_seed(seed)`` for every
    drafter (common random numbers).

    ``prefix``: the keys and values ``[1, heads, len(context) - 1, d]`` of every layer over
    ``context[:-1]`` (default: one forward computes them). Every draft row reads them, so only
    the drafts' own tokens are forwarded.
    """
    device = head_logits.device
    drawn = [_sampled_drafts(d, head_logits, context, sampling, seed) for d in drafters]
    tokens = torch.cat([dr.tokens[0] for dr in drawn]).to(device)  # [A*n, g]
    rows, g = tokens.shape
    if prefix is None:
        prefix = _cached_forward(model, torch.tensor([context[:-1]], device=device))[1]
    root = torch.full((rows, 1), context[-1], dtype=torch.int64, device=device)
    positions = torch.arange(len(context) - 1, len(context) + g, device=device).expand(rows, g + 1)
    z = _cached_forward(model, torch.cat([root, tokens], dim=1), positions, prefix)[0]
    logits = model.get_output_embeddings()(z).float()  # [A*n, g+1, V]
    probs = verify.sampling_distribution(logits, sampling.temperature, sampling.top_k, sampling.top_p)
    out, start = [], 0
    for dr in drawn:
        n = dr.tokens.shape[1]
        d, q, law = tokens[start : start + n], dr.q[0].to(probs), probs[start : start + n]
        start += n
        if rule == "block":
            accepted = verify.block_verify_distribution(d, q, law)[0].sum(-1)  # [g+1]
        else:
            accepted = verify.multi_draft_verify_distribution(d[None], law[None], q[None])[0].sum((0, 2))
        out.append(float((accepted * torch.arange(g + 1, device=accepted.device)).sum()))
    return out


def _cached_forward(model, input_ids: torch.Tensor, position_ids=None, prefix=None):
    """``(last hidden states, [(keys, values)] per layer)`` of a forward over ``input_ids [R, N]``
    after the cached ``prefix`` (one row's keys and values per layer, read by every row; None:
    no prefix)."""
    from transformers import DynamicCache

    cache = DynamicCache()
    rows = input_ids.shape[0]
    for index, (keys, values) in enumerate(prefix or []):
        cache.update(keys.expand(rows, -1, -1, -1), values.expand(rows, -1, -1, -1), index)
    out = model.base_model(
        input_ids=input_ids, position_ids=position_ids, use_cache=True, **{cache_keyword(model): cache}
    )
    return out.last_hidden_state, [(layer.keys, layer.values) for layer in cache_layers(cache)]


def _sampled_drafts(drafter: LatticeDrafter, head_logits: torch.Tensor, context: list[int], sampling, seed: int):
    """The drafter's sampled drafts of one row, both halves as the engine runs them."""
    torch.manual_seed(seed)
    proposal = drafter.propose(head_logits[None], sampling, drafter.p)
    _, sampled = drafter.finish(proposal, to_host(proposal.to_host), [context], head_logits.device)
    return sampled


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _stderr(values: list[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1) / len(values))
