"""Drafters: turn the heads' outputs at the current position into drafts of the next block."""

from .base import Drafter, Drafts
from .lattice import LatticeDrafter
from .neural import NeuralDrafter
from .oracle import OracleDrafter
from .vanilla import VanillaDrafter

__all__ = ["Drafter", "Drafts", "LatticeDrafter", "NeuralDrafter", "OracleDrafter", "VanillaDrafter"]
