"""Drafters: turn the heads' outputs at the accepted position into drafts of the next block."""

from .base import Drafter, Proposal, SampledDrafts, Sampling, to_host, topk_lattice
from .lattice import LatticeDrafter, pbest_paths
from .lookup import ContextLookup
from .neural import NeuralDrafter
from .oracle import OracleDrafter

__all__ = [
    "ContextLookup",
    "Drafter",
    "LatticeDrafter",
    "NeuralDrafter",
    "OracleDrafter",
    "Proposal",
    "SampledDrafts",
    "Sampling",
    "pbest_paths",
    "to_host",
    "topk_lattice",
]
