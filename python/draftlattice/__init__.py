"""draftlattice: blockwise parallel speculative decoding with exact lattice rescoring of drafts.

The C++ core (``draftlattice._core``) is private; this package is the public API.
"""

from __future__ import annotations

import logging

from ._core import FormatError
from .datastore import Datastore
from .lattice import Lattice
from .ngram import LmState, NgramLM
from .node_tree import NodeTree, best_nodes, best_nodes_batch
from .rescore import LmMemo, RescoreResult, rescore, rescore_batch
from .sample import DraftSamples, oracle_draft, oracle_drafts, sample_drafts, sample_drafts_batch

__version__ = "0.1.0"

logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = [
    "Datastore",
    "FormatError",
    "LmState",
    "NgramLM",
    "__version__",
    "Lattice",
    "RescoreResult",
    "LmMemo",
    "rescore",
    "rescore_batch",
    "NodeTree",
    "best_nodes",
    "best_nodes_batch",
    "DraftSamples",
    "sample_drafts",
    "sample_drafts_batch",
    "oracle_draft",
    "oracle_drafts",
    "verify",
    "decode",
    "evaluate",
]

# Submodules that need torch: imported on first attribute access, so the core imports without it.
_LAZY_SUBMODULES = {"verify", "decode", "evaluate"}


def __getattr__(name: str):
    if name in _LAZY_SUBMODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
