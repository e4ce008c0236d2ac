"""The lean target step: a Llama-architecture forward with a static KV cache and dense, int8 or
int4 weights, run by the decoding engine in place of transformers' forward (see :mod:`.model`),
and the dense step at fixed shapes for CUDA graphs (:mod:`.graphed`)."""

from .cache import StaticCache
from .graphed import GraphedStep
from .linear import WEIGHT_FORMATS
from .model import LeanLlama

__all__ = ["WEIGHT_FORMATS", "GraphedStep", "LeanLlama", "StaticCache"]
