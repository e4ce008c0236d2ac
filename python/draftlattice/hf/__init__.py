"""draftlattice for Hugging Face transformers causal LMs (``pip install draftlattice[hf]``).

Three lines add lattice-rescored multi-head drafting to a model's own ``generate()``::

    import draftlattice.hf as dlhf
    heads = dlhf.DraftHeads.for_model(model, horizon=4)   # or DraftHeads.from_pretrained(dir, model)
    out = model.generate(input_ids, max_new_tokens=128, custom_generate=dlhf.generate, draft_heads=heads)

* :class:`DraftHeads`: heads 2..h on the model's final hidden state (save/load, fixed format).
* :func:`generate`: the ``custom_generate`` (also callable directly); it maps generate()'s
  arguments onto draftlattice's one decoding engine (:mod:`draftlattice.decode`).

Heads are trained by :func:`draftlattice.training.train_heads` (``draftlattice hf train-heads``).
"""

from ..decode.stats import DecodeStats
from ..pairing import check_lm_for_model, model_tokenizer_sha256
from ..tokenizer import folder_tokenizer
from .generate import DraftGenerateOutput, generate
from .heads import DraftHeads

__all__ = [
    "DecodeStats",
    "DraftGenerateOutput",
    "DraftHeads",
    "check_lm_for_model",
    "folder_tokenizer",
    "generate",
    "model_tokenizer_sha256",
]
