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
from dataclasses import dataclass

import torch
from torch import Tensor
from transformers.generation.utils import GenerateDecoderOnlyOutput

from ..decode import plain_loop
from ..decode.drafters import LatticeDrafter, Sampling
from ..decode.drafters.copy_keywords import NO_COPY, CopyKeywords
from ..decode.drafters.lookup import LOOKUP_TOKENS
from ..decode.engine import Engine
from ..decode.forward import LAYOUTS
from ..decode.stats import DecodeStats
from ..decode.stopping import RowStopper
from ..verify.sampled import SAMPLE_RULES
from .heads import DraftHeads, output_embeddings

logger = logging.getLogger(__name__)


@dataclass
class DraftGenerateOutput(GenerateDecoderOnlyOutput):
    """transformers' ``GenerateDecoderOnlyOutput`` plus ``draft_stats`` (:class:`DecodeStats`).

    ``past_key_values`` is None: the cache holds masked holes where rows accepted fewer tokens
    than others, so it cannot be reused as an ordinary cache.
    """

    draft_stats: DecodeStats | None = None


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
    draft_nodes: int | None = None,
    draft_alpha: float = 0.5,
    draft_verify: str = "tree",
    draft_sample: str = "multi",
    draft_sample_alpha: float = 0.2,
    draft_lookup: int = 0,
    draft_lookup_tokens: int = LOOKUP_TOKENS,
    draft_datastore=None,
    draft_retrieval: int = 0,
    draft_streamer=None,
    draft_step=None,
    streamer=None,
    draft_recorder=None,
    **kwargs,
):
    """Speculative decoding of a transformers causal LM with draftlattice heads and lattices.

    Call it as ``model.generate(..., custom_generate=draftlattice.hf.generate, draft_heads=...)``
    or directly as ``generate(model, input_ids, ..., streamer=...)`` with generate()'s keywords.

    Args:
        draft_heads: :class:`DraftHeads` of this model; horizon h gives drafts of h - 1 tokens.
            None with ``draft_lookup``: the draft copied from the context alone (greedy, or
            ``draft_sample="tree"``; tree layout), no heads run; a step without a copy is a plain
            decoding step. None without
            ``draft_lookup`` but with ``draft_step``: no drafts, plain greedy decoding or plain
            sampling on that step (where no draft pays on the CPU; sampling draws as generate()
            draws, :mod:`draftlattice.decode.plain_loop`).
        draft_lm: a :class:`draftlattice.NgramLM` over the model's token ids, or None: the
            drafts are then the p best paths of the heads' own top-k lattice.
        draft_k: candidates per head in the lattice (top-k).
        draft_p: drafts verified per step.
        draft_nodes: verify the tree of the lattice's ``draft_nodes`` best prefixes
            (:mod:`draftlattice.node_tree`: the node budget where acceptance is likeliest)
            instead of its ``draft_p`` best drafts; None (default): the p best. Greedy decoding
            or ``draft_sample="tree"``.
        draft_alpha: LM weight in the rescoring (lattice log-prob + alpha * LM log-prob) of the
            p best drafts.
        draft_verify: verification layout: "tree" (the drafts' trie in one row, tree attention;
            sampling rules read it as chains) or "batch" (one row per draft, the cache repeated).
        draft_sample: the lossless rule of ``do_sample=True`` (:mod:`draftlattice.verify.sampled`):
            "multi" (default; ``draft_p`` drafts sampled i.i.d. from the heads'
            processed law, or with ``draft_lm`` from the full-support rescored lattice, recursive
            rejection sampling; with ``draft_p=1``, block verification, which is optimal for one
            draft), "tree" (the ``draft_p`` best drafts as in greedy mode, the exact tree rule),
            "block" (one sampled draft, block verification) or "token" (one sampled draft,
            token-by-token speculative sampling).
        draft_sample_alpha: LM weight of sampled lattice drafts (default 0.2; 0 = the heads'
            own law; tuned by ``bench/tune_sample_alpha.py``,
            :func:`draftlattice.apps.tune_sampling.tune_sample_alpha`).
        draft_lookup: also verify a draft copied from the context (prompt lookup): what followed
            an earlier occurrence of the context's final n tokens, n from ``draft_lookup`` down to
            1 (:func:`draftlattice.decode.drafters.lookup.continuation`; 0, the default: off).
            Greedy decoding, ``draft_sample="tree"``, or ``"multi"`` (the copy, as long as the
            sampled drafts, joins them with a one-hot law).
        draft_lookup_tokens: longest copied draft (it may be longer than the heads' drafts).
        draft_datastore: a :class:`draftlattice.Datastore` of the model's own answers (needs
            ``draft_lookup``): where the context has no copy, the copied draft is what followed
            its last tokens in the datastore (REST-style retrieval) instead.
        draft_retrieval: with ``draft_datastore``, where the context has a copy, also verify the
            datastore's continuation of up to this many tokens beside it (0, the default: only
            where the context has none). Greedy decoding or ``draft_sample="tree"``.
        draft_recorder: a :class:`draftlattice.decode.recording.StepObserver`, e.g. a
            ``StepRecorder`` that records each step's lattice, drafts and accepted tokens
            (greedy decoding; for reports).
        draft_step: a lean target step built from this model
            (``draftlattice.lean.LeanLlama(model, weights="dense"|"int8"|"int4")``: static KV
            cache, few ops per layer, quantized weights) that runs the target's forward instead
            of the model's own, or None. Greedy output then equals that step's own greedy
            decoding (``LeanLlama.greedy``), the quantized model's in int8/int4.
        draft_streamer: a transformers streamer fed with the tokens as they are committed.
            transformers' generate() does not hand its own ``streamer=`` to a callable
            ``custom_generate`` (it is a parameter of its default decoding loop), hence this
            keyword; a direct call also accepts ``streamer=``.

    Supported from generate(): ``max_new_tokens``/``max_length``, one or several EOS ids,
    ``pad_token_id``, stopping criteria, logits processors (applied to the target's scores at
    every drafted position, e.g. repetition penalty), ``do_sample`` with temperature / top-k /
    top-p, batches with left padding and an attention mask, ``return_dict_in_generate`` (a
    :class:`DraftGenerateOutput` whose ``draft_stats`` is a :class:`~draftlattice.decode.DecodeStats`).
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
        "draft_nodes": draft_nodes,
        "draft_alpha": draft_alpha,
        "draft_verify": draft_verify,
        "draft_sample": draft_sample,
        "draft_sample_alpha": draft_sample_alpha,
        "draft_lookup": draft_lookup,
        "draft_lookup_tokens": draft_lookup_tokens,
        "draft_datastore": draft_datastore,
        "draft_retrieval": draft_retrieval,
        "draft_streamer": draft_streamer,
        "draft_recorder": draft_recorder,
        "draft_step": draft_step,
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


def _drafter(heads, verify, sample_rule, lattice: dict) -> LatticeDrafter:
    if not isinstance(heads, DraftHeads):
        raise ValueError(  # noqa: TRY004 (the project's convention: ValueError for bad arguments)
            "draft_heads is required (or draft_lookup, to draft copies of the context alone, or draft_step alone, "
            "for plain decoding on it): DraftHeads.for_model(model, horizon=4) or "
            f"DraftHeads.from_pretrained(folder, model); got {type(heads).__name__}"
        )
    if verify not in LAYOUTS:
        raise ValueError(f"draft_verify must be one of {LAYOUTS}, got {verify!r}")
    if sample_rule not in SAMPLE_RULES:
        raise ValueError(f"draft_sample must be one of {SAMPLE_RULES}, got {sample_rule!r}")
    try:  # the heads, the LM and the prompt are checked against the model by the Engine
        return LatticeDrafter(**lattice)
    except ValueError as error:  # name the keyword the user passed
        raise ValueError(f"draft_{error}") from None


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


def _stopper(criteria, config, input_ids: Tensor) -> RowStopper:
    """generate()'s stopping criteria as a :class:`RowStopper`: ``MaxLengthCriteria`` and
    ``EosTokenCriteria`` natively, any other criterion called per committed token."""
    from transformers.generation.stopping_criteria import EosTokenCriteria, MaxLengthCriteria

    max_new, eos, others = float("inf"), set(), []
    for criterion in criteria or []:
        if isinstance(criterion, MaxLengthCriteria):
            max_new = min(max_new, criterion.max_length - input_ids.shape[1])
        elif isinstance(criterion, EosTokenCriteria):
            eos |= set(torch.as_tensor(criterion.eos_token_id).reshape(-1).tolist())
        else:
            others.append(criterion)
    pad = getattr(config, "_pad_token_tensor", None)
    if pad is None:
        pad = getattr(config, "pad_token_id", None)
    if pad is None and eos:
        pad = min(eos)
    pad = int(torch.as_tensor(pad).reshape(-1)[0]) if pad is not None else 0
    return RowStopper(input_ids, max_new, eos, others, pad)


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
    draft_nodes,
    draft_alpha,
    draft_verify,
    draft_sample,
    draft_sample_alpha,
    draft_lookup,
    draft_lookup_tokens,
    draft_datastore,
    draft_retrieval,
    draft_streamer,
    draft_recorder,
    draft_step,
):
    do_sample = bool(config.do_sample)
    copy = CopyKeywords(draft_lookup, draft_lookup_tokens, draft_datastore, draft_retrieval)
    copy.check(do_sample, draft_sample)
    if draft_heads is None and draft_nodes is not None:
        raise ValueError("draft_nodes shapes the tree of the heads' lattice: it needs draft_heads")
    if draft_heads is None and not draft_lookup and draft_step is not None and do_sample:
        input_ids = input_ids.to(output_embeddings(model).weight.device)
        stopper = _stopper(criteria, config, input_ids)
        new_tokens, stats = plain_loop.run(
            draft_step, model, input_ids, stopper, processors, model_kwargs, draft_streamer
        )
        return _output(config, stopper.output(input_ids, new_tokens), stats)
    if draft_heads is None and draft_lookup:
        drafter = copy.alone(draft_lm, draft_verify, do_sample, draft_sample)
    elif draft_heads is None and draft_step is not None:
        drafter = NO_COPY.alone(draft_lm, draft_verify, do_sample)  # plain steps on draft_step
    else:
        lattice = dict(lm=draft_lm, k=draft_k, p=draft_p, alpha=draft_alpha, sample_alpha=draft_sample_alpha)
        drafter = _drafter(draft_heads, draft_verify, draft_sample, {**lattice, "nodes": draft_nodes})
    if draft_lookup and draft_heads is not None:
        drafter = copy.joined(drafter, draft_sample, do_sample)
    if draft_streamer is not None and input_ids.shape[0] > 1:
        raise ValueError(f"a streamer supports batch size 1 only, got batch size {input_ids.shape[0]}")
    engine = Engine(
        model,
        draft_heads,
        drafter,
        layout=draft_verify,
        sample_rule=draft_sample if do_sample else None,
        sampling=Sampling(*_sampling_settings(processors)) if do_sample else None,
        processors=processors,
        observer=None if do_sample else draft_recorder,  # steps of greedy decoding only
        streamer=draft_streamer,
        step=draft_step,
    )
    input_ids = input_ids.to(output_embeddings(model).weight.device)
    stopper = _stopper(criteria, config, input_ids)
    new_tokens, stats = engine.run(
        input_ids,
        stopper,
        model_kwargs.get("attention_mask"),
        model_kwargs.get("position_ids"),
        model_kwargs.get("cache", model_kwargs.get("past_key_values")),
        config.max_length,
    )
    return _output(config, stopper.output(input_ids, new_tokens), stats)


def _output(config, sequences: Tensor, stats: DecodeStats):
    logger.debug("draftlattice.hf.generate: %s", stats.summary())
    if config.return_dict_in_generate:
        return DraftGenerateOutput(sequences=sequences, draft_stats=stats)
    return sequences
