"""Type conversion shared by the public wrappers: numpy or torch in, numpy out.

The C++ core checks values (shapes against each other, ranges, token ids); the bindings check
what decides a conversion (rank, dtype kind, int32 range). These helpers only turn torch tensors
and sequences into numpy arrays the bindings accept.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_INT32_MAX = np.iinfo(np.int32).max


def is_torch(value: Any) -> bool:
    return type(value).__module__.startswith("torch")


def to_numpy(array: Any, name: str) -> np.ndarray:
    """Returns `array` as a numpy array (torch tensors are detached and moved to the CPU)."""
    if is_torch(array):
        # detach() only when needed: each new tensor object costs microseconds in a decoding step.
        tensor = (array.detach() if array.requires_grad else array).cpu()
        if not tensor.dtype.is_floating_point or tensor.dtype.itemsize >= 4:
            return tensor.numpy()
        return tensor.float().numpy()  # float16 / bfloat16: numpy lacks bfloat16
    try:
        return np.asarray(array)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be an array, got {type(array).__name__}: {error}") from None


def tokens_in(tokens: Any) -> Any:
    """Token ids as the bindings take them: torch tensors become numpy arrays, the rest passes."""
    return to_numpy(tokens, "tokens") if is_torch(tokens) else tokens


def int_array(array: Any, name: str, ndim: int, shape_text: str) -> np.ndarray:
    """A C-contiguous int32 array of rank `ndim` (for the sampling and oracle wrappers)."""
    values = to_numpy(array, name)
    if values.ndim == 1 and ndim == 1 and values.size == 0:
        return np.zeros(0, dtype=np.int32)
    if values.ndim != ndim:
        raise ValueError(f"{name} must have shape {shape_text}, got shape {list(values.shape)}")
    if values.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integer token ids, got dtype {values.dtype}")
    if values.size and (values.min() < -_INT32_MAX - 1 or values.max() > _INT32_MAX):
        bad = values.min() if values.min() < 0 else values.max()
        raise ValueError(f"{name} holds token id {int(bad)} outside int32")
    return np.ascontiguousarray(values, dtype=np.int32)


def context_array(context: Any) -> np.ndarray:
    """Token ids of a context (sequence, numpy or torch, possibly empty) as int32 [n]."""
    if context is None:
        return np.zeros(0, dtype=np.int32)
    values = to_numpy(context, "context")
    if values.size == 0:
        return np.zeros(0, dtype=np.int32)
    return int_array(values, "context", 1, "[n]")
