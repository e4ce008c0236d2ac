"""A fake accelerator on the CPU: catches host allocations the way a CUDA target would, without a GPU.

Inside :class:`FakeDevice`, every tensor carries a tag, ``device`` or ``host``. The weights of the
modules it is given (a transformers model, its draft heads) are tagged ``device`` and
``tensor.device`` answers ``meta`` for ``device`` tensors, so the model claims to live on ``meta``.
Code that asks for that device (``torch.zeros(..., device=x.device)``, ``t.to(model.device)``)
gets a CPU tensor tagged ``device``; the computation itself runs on the CPU, so results are real.
What a CUDA run would reject is recorded as a violation:

* a factory call (``torch.tensor``, ``zeros``, ``full``, ``arange``, ...) without ``device=``:
  the tensor lands on the host by default, not by decision;
* an operation mixing ``device`` and ``host`` tensors (other than 0-dim host scalars, which CUDA
  accepts);
* ``.numpy()`` of a ``device`` tensor (CUDA tensors must be moved to the host first).

``.cpu()`` / ``.to("cpu")`` and ``torch.from_numpy`` make host tensors on purpose (the C++ core
works on the host); moving them back with ``.to(device)`` is what the engine must do.

Some host work is deliberate and documented (the engine's host transfers: a token tree built from
host drafts, the committed token lists, a seed from torch's global CPU generator). ``host_work``
names those functions (``"path/suffix.py:function"``, a reason each): a factory call inside one of
them is recorded in ``host_allocations``, not as a violation; mixing and ``.numpy()`` are
violations everywhere.
"""

from __future__ import annotations

import os
import traceback

import torch
from torch.overrides import TorchFunctionMode

FAKE = torch.device("meta")
_TAG = "_fake_device_tag"
_FACTORIES = {
    "tensor",
    "as_tensor",
    "zeros",
    "ones",
    "full",
    "empty",
    "arange",
    "rand",
    "randn",
    "randint",
    "randperm",
    "eye",
    "linspace",
    "scalar_tensor",
}
_DEVICE_GETTER = torch._C.TensorBase.device


def _tag(t: torch.Tensor) -> str:
    return getattr(t, _TAG, "host")  # tensors made outside the mode (or by from_numpy) are host


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from _tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors(item)


def _is_fake(device) -> bool:
    return device is not None and not isinstance(device, torch.dtype) and torch.device(device) == FAKE


class FakeDevice(TorchFunctionMode):
    """Context manager; ``violations`` lists what a real accelerator would have rejected."""

    def __init__(self, *modules: torch.nn.Module, host_work: dict[str, str] | None = None) -> None:
        super().__init__()
        self.violations: list[str] = []
        self.host_allocations: list[str] = []  # factory calls inside ``host_work`` functions
        self.host_work = dict(host_work or {})
        for module in modules:
            for t in [*module.parameters(), *module.buffers()]:
                setattr(t, _TAG, "device")

    def _flag(self, message: str, deliberate_here: bool = False) -> None:
        frames = [
            f for f in traceback.extract_stack() if "_fake_device" not in f.filename and "/torch/" not in f.filename
        ]
        where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
        if deliberate_here and self._in_host_work(frames):
            self.host_allocations.append(f"{message} at {where}")
        else:
            self.violations.append(f"{message} at {where}")

    def _in_host_work(self, frames) -> bool:
        """Whether the innermost function (comprehensions and lambdas belong to the function
        around them) is one of ``host_work``."""
        for frame in reversed(frames):
            if frame.name.startswith("<") and frame.name != "<module>":
                continue
            path = frame.filename.replace(os.sep, "/")
            return any(
                path.endswith(site.rsplit(":", 1)[0]) and frame.name == site.rsplit(":", 1)[1]
                for site in self.host_work
            )
        return False

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        name = getattr(func, "__name__", "")
        if name == "__get__" and getattr(func, "__self__", None) is _DEVICE_GETTER:
            return FAKE if _tag(args[0]) == "device" else func(*args, **kwargs)
        if name == "to" or name == "cuda":
            return self._move(func, name, args, kwargs)
        if name == "cpu":
            return self._retag(func(*args, **kwargs), "host", args)
        if name == "numpy" and _tag(args[0]) == "device":
            self._flag("numpy() of a device tensor")
        inputs = list(_tensors(args)) + list(_tensors(kwargs))
        if _is_fake(kwargs.get("device")):
            kwargs["device"] = "cpu"
            return self._retag(func(*args, **kwargs), "device", inputs)
        tags = {_tag(t) for t in inputs if _tag(t) == "device" or t.dim() > 0}
        if len(tags) > 1:
            self._flag(f"{name} mixes device and host tensors")
        if name in _FACTORIES and not inputs and "device" not in kwargs:
            self._flag(f"torch.{name} created a host tensor", deliberate_here=True)  # device="cpu" is deliberate
        return self._retag(func(*args, **kwargs), "device" if "device" in tags else "host", [])

    def _move(self, func, name, args, kwargs):
        tensor, rest = args[0], list(args[1:])
        target = "device" if name == "cuda" else None
        if "device" in kwargs:
            device = kwargs.pop("device")
            target = "device" if _is_fake(device) else "host"
        elif rest and isinstance(rest[0], (str, torch.device)):
            target = "device" if _is_fake(rest[0]) else "host"
            rest = rest[1:]
        elif rest and isinstance(rest[0], torch.Tensor):
            other = rest.pop(0)
            target = _tag(other)
            rest = [other.dtype, *rest]
        if name == "cuda":
            return self._retag(tensor.clone(), "device", [tensor])
        out = torch.Tensor.to(tensor, *rest, **kwargs)
        return self._retag(out, target or _tag(tensor), [tensor])

    @staticmethod
    def _retag(out, tag: str, inputs):
        if isinstance(out, torch.Tensor):
            if any(out is t for t in inputs) and _tag(out) != tag:
                out = out.clone()  # a real move makes a new tensor; keep the input's tag intact
            setattr(out, _TAG, tag)
        elif isinstance(out, (list, tuple)):
            for t in out:
                if isinstance(t, torch.Tensor):
                    setattr(t, _TAG, tag)
        return out
