"""Plain sampling (no drafts) on a lean step: one token per row per step, drawn as generate() draws it.

Why a loop of its own: where no draft pays for sampling (a CPU whose step costs more with every
token it verifies, bench/RESULTS.md), the fastest lossless sampling of a model is plain sampling
on its lean step, and it is also the reference a sampled drafted row must beat. The engine's
general loop would spend ~1 ms a token on a tree of one node; this loop spends a softmax and a draw.

Each step applies generate()'s processors to the step's float32 logits over the sequence so far
and draws every row from their softmax, finished rows then taking the pad token, as
``generate(do_sample=True)`` does: the same law. The draw is by inversion, one uniform a row
(:func:`draftlattice.verify.draw_categorical`, as the verifiers draw), not
``torch.multinomial``, which costs ~1 ms a draw over a 49,152-token vocabulary on one CPU thread
(a fifth of the default model's int4 step) against ~0.05: so the tokens are not generate()'s
for the same seed, but those of its law drawn from the same generator
(``tests/test_plain_loop.py`` replays the float model's logits and transformers' processors).
"""

from __future__ import annotations

import time

import torch
from torch import Tensor

from ..verify import draw_categorical
from .arguments import check_inputs, check_no_filled_cache, check_step
from .cache import additive_mask
from .stats import DecodeStats
from .stopping import RowStopper


def run(step, model, input_ids: Tensor, stopper: RowStopper, processors, model_kwargs: dict, streamer=None):
    """:func:`sample` with generate()'s keywords, after the engine's own checks: a step of this
    model, inputs it can decode, no filled cache."""
    attention_mask = model_kwargs.get("attention_mask")
    check_step(step, model)
    check_inputs(model, input_ids, stopper, attention_mask, model_kwargs.get("position_ids"))
    check_no_filled_cache(model_kwargs.get("cache", model_kwargs.get("past_key_values")))
    return sample(step, input_ids, attention_mask, processors, stopper, streamer, model_kwargs.get("position_ids"))


@torch.inference_mode()
def sample(
    step,
    input_ids: Tensor,
    attention_mask: Tensor | None,
    processors,
    stopper: RowStopper,
    streamer=None,
    position_ids: Tensor | None = None,
) -> tuple[list[list[int]], DecodeStats]:
    """Plain sampling of ``input_ids [B, P]`` (left-padded where ``attention_mask`` is 0) on the
    lean ``step``: each row's new tokens, and the run's statistics (one target call a token).
    ``position_ids``: the prompt's (default: counted over the mask); new tokens follow the last."""
    B, P = input_ids.shape
    device = step.device
    valid = torch.ones(B, P, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
    if not bool(valid.any(-1).all()):
        raise ValueError("every row needs at least one token (attention_mask all 0 in a row)")
    valid = valid.to(device)
    sequences = input_ids.to(device)
    bound = stopper.max_new if stopper.max_new != float("inf") else 64  # the cache grows past it
    cache = step.new_cache(B, P + int(bound))
    if position_ids is None:
        positions = (valid.long().cumsum(-1) - 1).clamp(min=0)
    else:
        positions = position_ids.to(device)
    stats, new = DecodeStats(), [[] for _ in range(B)]
    if streamer is not None:
        streamer.put(input_ids.cpu())
    with step.session():
        start = time.perf_counter()
        hidden = step.hidden(sequences, positions, valid.long(), cache)
        logits = step.logits(hidden[:, -1])
        stats.target_calls, stats.prefill_calls = 1, 1
        tokens, sequences, _ = _draw(processors, sequences, logits, stopper, new, streamer)
        stats.prefill_seconds = time.perf_counter() - start
        position, keys = positions[:, -1], valid
        while not stopper.all_done:  # one target call: the last token's forward, then its draw
            start = time.perf_counter()
            mask = additive_mask(keys, torch.ones(B, 1, 1, dtype=torch.bool, device=device), step.dtype)
            keys = torch.cat([keys, torch.ones(B, 1, dtype=torch.bool, device=device)], dim=1)
            position = position + 1
            hidden = step.hidden(tokens[:, None], position[:, None], mask, cache)
            logits = step.logits(hidden[:, -1])
            stats.forward_seconds += time.perf_counter() - start
            tokens, sequences, running = _draw(processors, sequences, logits, stopper, new, streamer)
            stats.verification_seconds += time.perf_counter() - start
            stats.record_step([0] * running)
            stats.nodes += 1  # a token a sequence
    if streamer is not None:
        streamer.end()
    stats.new_tokens = sum(len(row) for row in new)
    return new, stats


def _draw(processors, sequences: Tensor, logits: Tensor, stopper: RowStopper, new: list[list[int]], streamer):
    """Each row's next token from ``logits [B, V]`` under ``processors``, committed (finished rows
    take the pad token, as in generate()): ``(tokens [B], sequences with them, rows that were
    still running)``."""
    scores = processors(sequences, logits)
    tokens = draw_categorical(torch.softmax(scores, dim=-1))
    running = [b for b in range(len(new)) if not stopper.done[b]]
    if stopper.eos:
        tokens = torch.where(torch.tensor(stopper.done, device=tokens.device), stopper.pad, tokens)
    before = len(new[0])
    chosen = tokens.tolist()
    for b in running:
        stopper.commit(b, [chosen[b]], new, scores[b : b + 1])
    if streamer is not None and len(new[0]) > before:
        streamer.put(torch.tensor(new[0][before:]))
    return tokens, torch.cat([sequences, tokens[:, None]], dim=1), len(running)
