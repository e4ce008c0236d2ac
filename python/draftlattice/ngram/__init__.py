"""Backoff n-gram LMs: loading and scoring (:mod:`.model`) and building them from text (:mod:`.build`).

``NgramLM`` is the model the rescoring core composes with lattices; ``build_lm`` counts, estimates
(Katz, OpenGrm-compatible), prunes and writes LMs, recording the tokenizer they were built over
(``draftlattice.pairing.check_lm_tokenizer`` verifies it).
"""

from __future__ import annotations

from .model import FormatError, LmState, NgramLM, detect_format

__all__ = ["FormatError", "LmState", "NgramLM", "detect_format"]
