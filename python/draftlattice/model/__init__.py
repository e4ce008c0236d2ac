"""Blockwise parallel transformer LM with h heads, its KV cache, saving/loading and training."""

from .blockwise import BlockwiseLM, BlockwiseOutput
from .cache import KVCache
from .config import BlockwiseConfig
from .heads import ResidualHead
from .io import save_model

__all__ = ["BlockwiseConfig", "BlockwiseLM", "BlockwiseOutput", "KVCache", "ResidualHead", "save_model"]
