"""Blockwise parallel decoding: the target protocol, the loop, drafters, sampling settings and run
statistics."""

from .drafters import Drafter, Drafts, LatticeDrafter, NeuralDrafter, OracleDrafter, VanillaDrafter
from .loop import BlockwiseDecoder, DecodeResult
from .reference import greedy_decode
from .sampling import SamplingConfig
from .stats import DecodeStats
from .target import BlockwiseTarget

__all__ = [
    "BlockwiseDecoder",
    "BlockwiseTarget",
    "DecodeResult",
    "DecodeStats",
    "Drafter",
    "Drafts",
    "LatticeDrafter",
    "NeuralDrafter",
    "OracleDrafter",
    "SamplingConfig",
    "VanillaDrafter",
    "greedy_decode",
]
