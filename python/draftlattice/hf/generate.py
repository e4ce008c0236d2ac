"""``generate()`` with draftlattice drafting: a ``custom_generate`` for transformers models.

Usage (see :func:`generate`)::

    heads = dlhf.DraftHeads.for_model(model, horizon=4)        # or DraftHeads.from_pretrained
    out = model.generate(input_ids, attention_mask=mask, max_new_tokens=128, do_sample=False,
                         custom_generate=dlhf.generate, draft_heads=heads,
                         draft_lm=NgramLM("lm.dlm"), draft_k=8, draft_p=4, draft_alpha=0.5)

Each step is ONE forward of the base model: it verifies the drafts proposed at the previous step
and, at the last accepted position, gives the hidden state from which the heads propose the
next drafts. Greedy output equals ``generate(do_sample=False)``'s token for token; sampling is
lossless with the decoder's multi-draft rules (``draft_sample``: p sampled drafts and recursive
rejection sampling, the p best drafts and the tree rule, or one draft and block verification).
"""

from __future__ import annotations

import logging
import sys
import time

import torch
from torch import Tensor

from ..verify import block_verify, multi_draft_verify
from .cache import cache_layers, compact, keep_block
from .drafting import SAMPLE_RULES, DraftOptions, Sampling, finish, propose, to_host
from .heads import DraftHeads, output_embeddings
from .stats import DecodingStats, DraftGenerateOutput
from .stopping import RowStopper
from .tokenizer import check_lm_for_model
from .verification import (
    Target,
    chain_accept,
    chain_forward,
    max_position,
    tree_accept,
    tree_forward,
)

logger = logging.getLogger(__name__)

VERIFY_MODES = ("tree", "batch")
# Rows that accept fewer tokens than the batch's longest leave holes in the shared cache;
# compact it when the holes exceed this share of its length (rare: cost amortised).
COMPACT_HOLES = 0.5


def generate(
    model,
    input_ids: Tensor,
    logits_processor=None,
    stopping_criteria=None,
    generation_config=None,
    draft_heads: DraftHeads | None = None,
    draft_lm=None,
    draft_k: int = 8,
    draft_p: int = 4,
    draft_alpha: float = 0.5,
    draft_verify: str = "tree",
    draft_sample: str = "multi",
    draft_sample_alpha: float = 0.2,
    draft_streamer=None,
    streamer=None,
    draft_recorder=None,
    **kwargs,
):
    """Speculative decoding of a transformers causal LM with draftlattice heads and lattices.

    Call it as ``model.generate(..., custom_generate=draftlattice.hf.generate, draft_heads=...)``
    or directly as ``generate(model, input_ids, ..., streamer=...)`` with generate()'s keywords.

    Args:
        draft_heads: :class:`DraftHeads` of this model (required); horizon h gives drafts of
            h - 1 tokens.
        draft_lm: a :class:`draftlattice.NgramLM` over the model's token ids, or None: the
            drafts are then the p best paths of the heads' own top-k lattice.
        draft_k: candidates per head in the lattice (top-k).
        draft_p: drafts verified per step.
        draft_alpha: LM weight in the rescoring (lattice log-prob + alpha * LM log-prob) of the
            p best drafts.
        draft_verify: greedy layout: "tree" (the drafts' trie in one row, tree attention) or
            "batch" (one row per draft). Sampling always verifies one row per draft.
        draft_sample: the lossless rule of ``do_sample=True``, as the decoder's sampling
            verifiers: "multi" (default; ``draft_p`` drafts sampled i.i.d. from the heads'
            processed law, or with ``draft_lm`` from the full-support rescored lattice, recursive
            rejection sampling; with ``draft_p=1``, block verification, which is optimal for one
            draft), "tree" (the ``draft_p`` best drafts as in greedy mode, the exact tree rule)
            or "block" (one sampled draft, block verification).
        draft_sample_alpha: LM weight of sampled lattice drafts (default 0.2; 0 = the heads'
            own law; see ``draftlattice eval tune-sample-alpha``).
        draft_recorder: a :class:`draftlattice.hf.recording.StepRecorder` that records each
            step's lattice, drafts and accepted tokens (greedy decoding; for reports).
        draft_streamer: a transformers streamer fed with the tokens as they are committed.
            transformers' generate() does not hand its own ``streamer=`` to a callable
            ``custom_generate`` (it is a parameter of its default decoding loop), hence this
            keyword; a direct call also accepts ``streamer=``.

    Supported from generate(): ``max_new_tokens``/``max_length``, one or several EOS ids,
    ``pad_token_id``, stopping criteria, logits processors (applied to the target's scores at
    every drafted position, e.g. repetition penalty), ``do_sample`` with temperature / top-k /
    top-p, batches with left padding and an attention mask, ``return_dict_in_generate`` (a
    :class:`DraftGenerateOutput` whose ``draft_stats`` is a :class:`DecodingStats`).
    Beam search, assisted decoding, encoder-decoder models, ``output_scores``/``output_logits``
    /``output_attentions``/``output_hidden_states`` raise ``ValueError``.

    Returns:
        ``[B, prompt + new]`` LongTensor (finished rows padded with ``pad_token_id``), or a
        :class:`DraftGenerateOutput` when ``return_dict_in_generate``.
    """
    if streamer is not None and draft_streamer is not None:
        raise ValueError("pass either streamer= (direct call) or draft_streamer=, not both")
    draft_streamer = draft_streamer if draft_streamer is not None else streamer
    draft_kwargs = {
        "draft_heads": draft_heads,
        "draft_lm": draft_lm,
        "draft_k": draft_k,
        "draft_p": draft_p,
        "draft_alpha": draft_alpha,
        "draft_verify": draft_verify,
        "draft_sample": draft_sample,
        "draft_sample_alpha": draft_sample_alpha,
        "draft_streamer": draft_streamer,
        "draft_recorder": draft_recorder,
    }
    from transformers.generation import LogitsProcessorList, StoppingCriteriaList

    # generate() hands over its prepared lists and config; a user calling directly does not.
    prepared = (
        generation_config is not None
        and isinstance(stopping_criteria, StoppingCriteriaList)
        and isinstance(logits_processor, LogitsProcessorList)
    )
    if not prepared:  # a direct call: let generate() prepare everything, then come back here
        if "assistant_model" in kwargs and kwargs["assistant_model"] is not None:
            raise ValueError("assistant_model cannot be combined with draftlattice drafting (it drafts itself)")
        return model.generate(
            input_ids,
            logits_processor=logits_processor,
            stopping_criteria=stopping_criteria,
            generation_config=generation_config,
            custom_generate=generate,
            **draft_kwargs,
            **kwargs,
        )
    _reject_unsupported(model, generation_config, kwargs)
    with torch.inference_mode():
        return _decode(model, input_ids, logits_processor, stopping_criteria, generation_config, kwargs, **draft_kwargs)


def _reject_unsupported(model, config, kwargs) -> None:
    if getattr(model.config, "is_encoder_decoder", False):
        raise ValueError("draftlattice.hf.generate supports decoder-only causal LMs, not encoder-decoder models")
    # generate() does not forward assistant_model to a custom_generate callable: read it from
    # generate()'s frame, so combining the two fails loudly instead of silently ignoring one.
    caller = sys._getframe(2).f_locals
    if caller.get("assistant_model") is not None or getattr(config, "prompt_lookup_num_tokens", None):
        raise ValueError("assistant_model / prompt_lookup_num_tokens cannot be combined with draftlattice drafting")
    if config.num_beams and config.num_beams > 1:
        raise ValueError(f"beam search (num_beams={config.num_beams}) is not supported by draftlattice.hf.generate")
    for flag in ("output_scores", "output_logits", "output_attentions", "output_hidden_states"):
        if getattr(config, flag, False):
            raise ValueError(f"{flag}=True is not supported by draftlattice.hf.generate")
    if getattr(model.config, "final_logit_softcapping", None) or getattr(model.config, "logit_scale", None):
        raise ValueError(
            f"{type(model).__name__} transforms its logits after the output projection "
            "(soft-capping / scaling); draftlattice heads read lm_head(hidden) and do not support it"
        )


def _check_options(model, heads, lm, k, p, alpha, verify, sample_rule, sample_alpha) -> DraftOptions:
    if not isinstance(heads, DraftHeads):
        raise ValueError(  # noqa: TRY004 (the project's convention: ValueError for bad arguments)
            "draft_heads is required: DraftHeads.for_model(model, horizon=4) or "
            f"DraftHeads.from_pretrained(folder, model); got {type(heads).__name__}"
        )
    lm_head = output_embeddings(model)
    if heads.hidden_size != model.config.hidden_size or heads.vocab_size != lm_head.weight.shape[0]:
        raise ValueError(
            f"draft_heads (hidden {heads.hidden_size}, vocab {heads.vocab_size}) do not fit the model "
            f"(hidden {model.config.hidden_size}, vocab {lm_head.weight.shape[0]})"
        )
    head_param = next(heads.parameters())
    if head_param.device != lm_head.weight.device or head_param.dtype != lm_head.weight.dtype:
        raise ValueError(
            f"draft_heads are on {head_param.device}/{head_param.dtype} but the model's output layer is "
            f"on {lm_head.weight.device}/{lm_head.weight.dtype}: use heads.to(model.device, model.dtype)"
        )
    for name, value in (("draft_k", k), ("draft_p", p)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    for name, value in (("draft_alpha", alpha), ("draft_sample_alpha", sample_alpha)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    if verify not in VERIFY_MODES:
        raise ValueError(f"draft_verify must be one of {VERIFY_MODES}, got {verify!r}")
    if sample_rule not in SAMPLE_RULES:
        raise ValueError(f"draft_sample must be one of {SAMPLE_RULES}, got {sample_rule!r}")
    if lm is not None:
        from ..ngram import NgramLM

        if not isinstance(lm, NgramLM):
            raise ValueError(f"draft_lm must be a draftlattice.NgramLM or None, got {type(lm).__name__}")
        check_lm_for_model(lm, model)
    if sample_rule == "multi" and p == 1:
        sample_rule = "block"  # one draft: block verification accepts at least as much (Sun et al. 2024)
    return DraftOptions(lm, k, p, float(alpha), sample_rule, float(sample_alpha))


def _sampling_settings(processors) -> tuple[float, int | None, float | None]:
    """Temperature / top-k / top-p of generate()'s warpers, for the heads' proposal law."""
    from transformers.generation.logits_process import (
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    temperature, top_k, top_p = 1.0, None, None
    for proc in processors:
        if isinstance(proc, TemperatureLogitsWarper):
            temperature = float(proc.temperature)
        elif isinstance(proc, TopKLogitsWarper):
            top_k = int(proc.top_k)
        elif isinstance(proc, TopPLogitsWarper):
            top_p = float(proc.top_p)
    return temperature, top_k, top_p


def _decode(
    model,
    input_ids,
    processors,
    criteria,
    config,
    model_kwargs,
    draft_heads,
    draft_lm,
    draft_k,
    draft_p,
    draft_alpha,
    draft_verify,
    draft_sample,
    draft_sample_alpha,
    draft_streamer,
    draft_recorder,
):
    do_sample = bool(config.do_sample)
    recorder = draft_recorder if not do_sample else None  # steps of greedy decoding only
    options = _check_options(
        model, draft_heads, draft_lm, draft_k, draft_p, draft_alpha, draft_verify, draft_sample, draft_sample_alpha
    )
    lm_head = output_embeddings(model)
    device, dtype = lm_head.weight.device, lm_head.weight.dtype
    input_ids = input_ids.to(device)
    B, P = input_ids.shape
    if draft_streamer is not None and B > 1:
        raise ValueError(f"a streamer supports batch size 1 only, got batch size {B}")
    cache = model_kwargs.get("cache", model_kwargs.get("past_key_values"))
    if cache is None:  # use_cache=False: drafting needs a cache all the same
        from transformers import DynamicCache

        cache = DynamicCache()
    cache_layers(cache)  # refuse caches that cannot be rolled back, before any work
    target = Target(model, cache, dtype, processors, max_position(model, config.max_length))
    attention_mask = model_kwargs.get("attention_mask")
    kv_valid = (
        torch.ones(B, P, dtype=torch.bool, device=device)
        if attention_mask is None
        else attention_mask.to(device).bool()
    )
    position_ids = model_kwargs.get("position_ids")
    if position_ids is None:
        position_ids = (kv_valid.long().cumsum(-1) - 1).clamp(min=0)
    position_ids = position_ids.to(device)
    stopper = RowStopper(criteria, config, input_ids)
    sampling = Sampling(*_sampling_settings(processors)) if do_sample else None
    stats = DecodingStats()
    rows_host = input_ids.tolist()
    valid_host = kv_valid.tolist()
    contexts = [[t for t, ok in zip(row, ok_row) if ok] for row, ok_row in zip(rows_host, valid_host)]
    valid_count = [sum(ok_row) for ok_row in valid_host]  # valid cache slots per row
    if draft_streamer is not None:
        draft_streamer.put(input_ids.cpu())

    # Prefill: the model's own masking (2-D mask or none), as generate() calls it.
    start = time.perf_counter()
    z = target.hidden(input_ids, position_ids, attention_mask)[:, -1]
    stats.target_calls += 1
    scores = processors(input_ids, lm_head(z).float())
    root = torch.multinomial(scores.softmax(-1), 1).squeeze(1) if do_sample else scores.argmax(-1)
    head_logits = draft_heads.logits(z, model)
    if recorder is not None:
        recorder.lattice(head_logits)
    proposal = propose(head_logits, options, sampling)
    first, *draft_host = to_host([root, *proposal.to_host])
    stats.verification_seconds += time.perf_counter() - start
    positions = position_ids[:, -1].cpu() + 1  # root (= first token) positions, on the host
    new_tokens: list[list[int]] = [[] for _ in range(B)]
    for b, token in enumerate(first.tolist()):
        stopper.commit(b, [token], new_tokens, scores[b : b + 1])
    _stream(draft_streamer, new_tokens, [0])

    while not stopper.all_done:
        start = time.perf_counter()
        ctx = [contexts[b] + new_tokens[b] for b in range(B)]
        drafts, sampled = finish(proposal, draft_host, options, ctx, sampling, device)
        stats.drafting_seconds += time.perf_counter() - start

        start = time.perf_counter()
        past = cache.get_seq_length()
        sequences = (
            [torch.tensor(rows_host[b] + new_tokens[b]).to(device, non_blocking=True) for b in range(B)]
            if processors
            else []
        )
        if do_sample:
            forward = chain_forward(target, kv_valid, root, drafts, positions, sequences)
            accepted = chain_accept(forward, drafts, *_verify_sampled(forward, drafts, sampled))
        elif draft_verify == "tree":
            forward = tree_forward(target, kv_valid, root, drafts, positions, sequences)
            accepted = tree_accept(forward)
        else:
            forward = chain_forward(target, kv_valid, root, drafts, positions, sequences)
            accepted = chain_accept(forward, drafts)
        stats.target_calls += 1
        if recorder is not None:
            roots = root.tolist()
        head_logits = draft_heads.logits(accepted.z_last, model)
        proposal = propose(head_logits, options, sampling)
        # The step's one device->host transfer: accepted lengths and tokens, and the next drafts.
        accepted_host, *draft_host = to_host(
            [torch.cat([accepted.num.unsqueeze(1), accepted.tokens], dim=1), *proposal.to_host]
        )
        num_host = accepted_host[:, 0].tolist()
        keep = max(num_host) + 1
        keep_block(cache, past, accepted.cache_rows, accepted.slots[:, :keep])
        arange = torch.arange(keep, device=device)
        kv_valid = torch.cat([kv_valid, arange < (accepted.num + 1).unsqueeze(1)], dim=1)
        valid_count = [count + n + 1 for count, n in zip(valid_count, num_host)]
        if kv_valid.shape[1] - max(valid_count) > COMPACT_HOLES * kv_valid.shape[1]:
            kv_valid = compact(cache, kv_valid, max(valid_count))
        stats.verification_seconds += time.perf_counter() - start

        active = [b for b in range(B) if not stopper.done[b]]
        stats.accepted.append([num_host[b] for b in active])
        before = [len(new_tokens[b]) for b in range(B)]
        for b in active:
            committed = accepted_host[b, 1 : num_host[b] + 2].tolist()
            if recorder is not None:
                recorder.step(b, roots[b], drafts[b], num_host[b], committed, options.lm is not None)
            stopper.commit(b, committed, new_tokens, accepted.scores[b])
        if recorder is not None:
            recorder.lattice(head_logits)
        _stream(draft_streamer, new_tokens, before)
        positions = positions + accepted_host[:, 0] + 1
        root = accepted.tokens.gather(1, accepted.num.unsqueeze(1)).squeeze(1)

    if recorder is not None:
        for b in range(B):
            recorder.finish(b, int(root[b]))
    if draft_streamer is not None:
        draft_streamer.end()
    stats.new_tokens = sum(len(t) for t in new_tokens)
    sequences = stopper.output(input_ids, new_tokens)
    logger.debug("draftlattice.hf.generate: %s", stats.summary())
    if config.return_dict_in_generate:
        return DraftGenerateOutput(sequences=sequences, draft_stats=stats)
    return sequences


def _verify_sampled(forward, drafts, sampled):
    """``(num [B], next [B], best [B] or None)`` of the sampling rule: block verification of one
    sampled draft, recursive rejection over several (q given), or the tree rule (no q)."""
    B, p, g = drafts.shape
    probs = forward.scores.softmax(-1).view(B, p, g + 1, -1)
    if sampled is not None and p == 1:
        num, nxt = block_verify(sampled.tokens[:, 0], sampled.q[:, 0], probs[:, 0])
        return num, nxt, None
    drafts = drafts.to(probs.device, non_blocking=True)
    result = multi_draft_verify(drafts, probs, None, None if sampled is None else sampled.q)
    return result.num_accepted, result.next_token, result.best_draft


def _stream(streamer, new_tokens: list[list[int]], before: list[int]) -> None:
    if streamer is not None and len(new_tokens[0]) > before[0]:
        streamer.put(torch.tensor(new_tokens[0][before[0] :]))
