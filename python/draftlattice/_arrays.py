"""Array conversion shared by the public wrappers: numpy or torch in, checked numpy out."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

_INT32_MAX = np.iinfo(np.int32).max


def to_numpy(array: Any, name: str) -> np.ndarray:
    """Returns `array` as a numpy array (torch tensors are detached and moved to the CPU)."""
    if type(array).__module__.startswith("torch"):
        tensor = array.detach().cpu()
        if not tensor.dtype.is_floating_point or tensor.dtype.itemsize >= 4:
            return tensor.numpy()
        return tensor.float().numpy()  # float16 / bfloat16: numpy lacks bfloat16
    try:
        return np.asarray(array)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{name} must be an array, got {type(array).__name__}: {error}") from None


def float_array(array: Any, name: str, ndim: int, shape_text: str) -> np.ndarray:
    """A C-contiguous float32 array of rank `ndim` (float16/32/64 accepted)."""
    values = to_numpy(array, name)
    if values.ndim != ndim:
        raise ValueError(f"{name} must have shape {shape_text}, got shape {list(values.shape)}")
    if values.dtype.kind != "f":
        raise ValueError(f"{name} must be float16, float32 or float64, got dtype {values.dtype}")
    return np.ascontiguousarray(values, dtype=np.float32)


def int_array(array: Any, name: str, ndim: int, shape_text: str) -> np.ndarray:
    """A C-contiguous int32 array of rank `ndim` of non-negative token ids."""
    values = to_numpy(array, name)
    if values.ndim == 1 and ndim == 1 and values.size == 0:
        return np.zeros(0, dtype=np.int32)
    if values.ndim != ndim:
        raise ValueError(f"{name} must have shape {shape_text}, got shape {list(values.shape)}")
    if values.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integer token ids, got dtype {values.dtype}")
    if values.size and (values.min() < 0 or values.max() > _INT32_MAX):
        bad = values.min() if values.min() < 0 else values.max()
        raise ValueError(f"{name} holds token id {int(bad)} outside [0, {_INT32_MAX}]")
    return np.ascontiguousarray(values, dtype=np.int32)


def positive_int(value: Any, name: str) -> int:
    """`value` as an int >= 1 (bools and floats are rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {name}={value}")
    return int(value)


def context_array(context: Any) -> np.ndarray:
    """Token ids of a context (sequence, numpy or torch, possibly empty) as int32 [n]."""
    if context is None:
        return np.zeros(0, dtype=np.int32)
    values = to_numpy(context, "context")
    if values.size == 0:
        return np.zeros(0, dtype=np.int32)
    return int_array(values, "context", 1, "[n]")
