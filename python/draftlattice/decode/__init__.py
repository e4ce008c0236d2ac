"""The one decoding engine (:mod:`.engine`) and its parts: drafters, the verification forward's
layouts, cache rollback, stopping, statistics, step observers and the checks of its arguments."""

from .drafters import ContextLookup, Drafter, LatticeDrafter, NeuralDrafter, OracleDrafter, Sampling
from .engine import Engine
from .recording import StepObserver, StepRecorder
from .stats import DecodeStats
from .stopping import RowStopper

__all__ = [
    "ContextLookup",
    "DecodeStats",
    "Drafter",
    "Engine",
    "LatticeDrafter",
    "NeuralDrafter",
    "OracleDrafter",
    "RowStopper",
    "Sampling",
    "StepObserver",
    "StepRecorder",
]
