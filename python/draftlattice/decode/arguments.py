"""What the engine refuses before any work: parts that do not fit the model, inputs it cannot decode.

:class:`~.engine.Engine` calls :func:`check_parts` when it is made and :func:`check_inputs` as a
run starts, before the prefill. Each bad argument is one ValueError (a TypeError for an object of
the wrong kind) that names it, instead of what it would otherwise become: a shape or dtype error
deep in a forward, an index error in the embedding (a device-side assert on a GPU), drafts
rescored by an LM over other words, or output past the model's position table.
``draftlattice.hf.generate`` decodes through the engine, so it refuses the same.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..ngram import NgramLM
from ..pairing import check_lm_for_model
from ..verify.sampled import SAMPLE_RULES


def check_parts(model, heads, drafter, sample_rule: str | None, processors) -> None:
    """The model is a causal LM; the heads (None for a drafter that reads none), the drafter (and
    its LM) and the processors fit it."""
    output_layer = _output_layer(model)
    if heads is not None or getattr(drafter, "reads_heads", True):
        if not callable(getattr(heads, "logits", None)):
            raise TypeError(
                "heads must be draft heads with logits(hidden, model) (draftlattice.hf.DraftHeads), "
                f"got {type(heads).__name__}"
            )
        _check_heads_fit(heads, model, output_layer)
    if not all(callable(getattr(drafter, method, None)) for method in ("propose", "finish")):
        raise TypeError(
            f"drafter must be a draftlattice.decode Drafter (propose, finish), got {type(drafter).__name__}"
        )
    name = getattr(drafter, "name", type(drafter).__name__)
    rules = getattr(drafter, "sample_rules", SAMPLE_RULES)
    if sample_rule is not None and sample_rule not in rules:
        supports = f"sample_rule must be one of {rules}" if rules else "it has no sampling mode"
        raise ValueError(f"the {name} drafter cannot draft for sample_rule {sample_rule!r}: {supports}")
    lm = getattr(drafter, "lm", None)
    if isinstance(lm, NgramLM):
        check_lm_for_model(lm, model)  # an LM over another tokenizer: the same ids are other words
    vocab, drafter_vocab = int(output_layer.weight.shape[0]), getattr(drafter, "vocab_size", None)
    if drafter_vocab is not None and drafter_vocab != vocab:  # a neural drafter's LM
        raise ValueError(f"the {name} drafter's vocabulary ({drafter_vocab}) differs from the model's ({vocab})")
    if processors is not None and not callable(processors):
        raise TypeError(f"processors must be callable (input_ids, scores) -> scores, got {type(processors).__name__}")


def check_step(step, model) -> None:
    """A lean step (``draftlattice.lean.LeanLlama``) built from ``model`` or its twin."""
    if not step.fits(model):
        raise ValueError(
            f"step was built for another model ({len(step.layers)} layers, hidden {step.hidden_size}, "
            f"vocab {step.vocab_size}): build it with LeanLlama(model, weights)"
        )


def check_no_filled_cache(cache) -> None:
    """A lean step decodes into its own static cache: ``cache`` must be None or empty (generate()
    hands over an empty one)."""
    if cache is not None and cache.get_seq_length():
        raise ValueError("a lean step decodes into its own cache: pass no filled cache (past_key_values)")


def check_inputs(model, input_ids, stopper, attention_mask: Tensor | None, position_ids: Tensor | None) -> None:
    """``input_ids [B, P]``: a non-empty batch of the model's token ids, every row with a token,
    none past the position table; the mask, positions and stopper of the same rows."""
    shape = list(getattr(input_ids, "shape", ()))
    if not isinstance(input_ids, Tensor) or input_ids.ndim != 2 or 0 in shape:
        raise ValueError(f"input_ids must be a non-empty [batch, prompt] tensor, got shape {shape}")
    if input_ids.dtype.is_floating_point or input_ids.dtype.is_complex or input_ids.dtype == torch.bool:
        raise TypeError(f"input_ids must hold integer token ids, got {input_ids.dtype}")
    vocab = int(model.get_input_embeddings().weight.shape[0])
    low, high = int(input_ids.min()), int(input_ids.max())
    if low < 0 or high >= vocab:
        raise ValueError(
            f"input_ids hold token {low if low < 0 else high}, outside the model's vocabulary [0, {vocab})"
        )
    for name, other in (("attention_mask", attention_mask), ("position_ids", position_ids)):
        if other is not None and list(other.shape) != shape:
            raise ValueError(f"{name} has shape {list(other.shape)}, input_ids {shape}")
    lengths = attention_mask.sum(-1) if attention_mask is not None else torch.full((shape[0],), shape[1])
    if bool((lengths == 0).any()):
        raise ValueError(
            f"row {int((lengths == 0).nonzero()[0])} of attention_mask has no token: every row needs a prompt"
        )
    limit = getattr(model.config, "max_position_embeddings", None) or getattr(model.config, "n_positions", None)
    longest = int(lengths.max())
    if limit and longest >= limit:
        raise ValueError(
            f"a prompt of {longest} tokens leaves no position to generate at: the model's position table "
            f"has {limit} (max_position_embeddings)"
        )
    if len(stopper.done) != shape[0]:
        raise ValueError(f"the stopper was made for {len(stopper.done)} rows, input_ids has {shape[0]}")


def _output_layer(model):
    get = getattr(model, "get_output_embeddings", None)
    layer = get() if callable(get) else None
    if layer is None or getattr(model, "config", None) is None:
        raise TypeError(f"model must be a transformers causal LM (*ForCausalLM), got {type(model).__name__}")
    return layer


def _check_heads_fit(heads, model, output_layer) -> None:
    """Heads that say their sizes (DraftHeads) were made for this model, on its output layer's
    device and dtype."""
    hidden, vocab = getattr(heads, "hidden_size", None), getattr(heads, "vocab_size", None)
    model_hidden, model_vocab = getattr(model.config, "hidden_size", None), int(output_layer.weight.shape[0])
    if (hidden is not None and hidden != model_hidden) or (vocab is not None and vocab != model_vocab):
        raise ValueError(
            f"the heads (hidden {hidden}, vocab {vocab}) do not fit the model (hidden {model_hidden}, vocab {model_vocab})"
        )
    parameters = getattr(heads, "parameters", None)
    param = next(parameters(), None) if callable(parameters) else None
    weight = output_layer.weight
    if param is not None and (param.device != weight.device or param.dtype != weight.dtype):
        raise ValueError(
            f"the heads are on {param.device}/{param.dtype} but the model's output layer is on "
            f"{weight.device}/{weight.dtype}: use heads.to(model.device, model.dtype)"
        )
