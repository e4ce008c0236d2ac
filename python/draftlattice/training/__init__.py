"""Training draft heads for a transformers model, and the self-distilled data they learn from.

The path of ``lm_models/recipe/smollm2_heads.py``, in data-flow order:

* :mod:`.distillation_prompts`: chat questions and text openings drawn from an English corpus;
* :mod:`.distill`: the model's own answers to them, written as a distilled corpus
  (:mod:`draftlattice.distilled_corpus`, the on-disk format);
* :mod:`.batches` -> :mod:`.head_loss` -> :mod:`.trainer`: :func:`train_heads` trains
  :class:`draftlattice.hf.DraftHeads` with the base model frozen (``draftlattice hf train-heads``),
  through the full softmax or a candidate-set one (:class:`CandidateSoftmax`), from the trunk
  or from its hidden states cached once (:mod:`.feature_cache`, :class:`FeatureCache`), each
  head's loss optionally gated by the earlier heads' ranks (:mod:`.prefix_gate`, :class:`PrefixGate`);
* :mod:`.head_accuracy`: how often each head's top token is the one the model wrote (held out).
"""

from .distill import distill
from .distillation_prompts import Prompt, distillation_prompts
from .feature_cache import FeatureCache
from .head_accuracy import head_accuracy
from .head_loss import CandidateSoftmax
from .prefix_gate import PrefixGate
from .trainer import TrainResult, train_heads

__all__ = [
    "CandidateSoftmax",
    "FeatureCache",
    "PrefixGate",
    "Prompt",
    "TrainResult",
    "distill",
    "distillation_prompts",
    "head_accuracy",
    "train_heads",
]
