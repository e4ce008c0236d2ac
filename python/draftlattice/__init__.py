"""draftlattice: blockwise parallel speculative decoding with exact lattice rescoring of drafts.

The C++ core (``draftlattice._core``) is private; this package is the public API.
"""

from __future__ import annotations

import logging

from ._core import FormatError
from .ngram import LmState, NgramLM
from .lattice import Lattice
from .rescore import RescoreResult, rescore, rescore_batch
from .sample import DraftSamples, oracle_draft, oracle_drafts, sample_drafts, sample_drafts_batch

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "FormatError",
    "LmState",
    "NgramLM",
    "__version__",
    "Lattice",
    "RescoreResult",
    "rescore",
    "rescore_batch",
    "DraftSamples",
    "sample_drafts",
    "sample_drafts_batch",
    "oracle_draft",
    "oracle_drafts",
]
