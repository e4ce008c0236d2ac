"""Checks of numeric command-line arguments, run before a command does any work.

Each raises ``ValueError`` naming the option and the value given, which ``main`` prints as one
``draftlattice: error:`` line.
"""

from __future__ import annotations

import math


def at_least(option: str, value: int | float, minimum: int | float) -> None:
    if not value >= minimum:  # also refuses nan
        raise ValueError(f"{option} must be >= {minimum}, got {value}")


def positive(option: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{option} must be a finite number > 0, got {value}")


def finite(option: str, value: float, minimum: float = 0.0) -> None:
    if not (math.isfinite(value) and value >= minimum):
        raise ValueError(f"{option} must be a finite number >= {minimum}, got {value}")


def fraction(option: str, value: float) -> None:
    """``0 < value <= 1``."""
    if not 0 < value <= 1:
        raise ValueError(f"{option} must be in (0, 1], got {value}")
