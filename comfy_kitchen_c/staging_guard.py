# SPDX-License-Identifier: Apache-2.0
"""Checked staging of comfy_kitchen's quantized-weight parameters.

ComfyUI copies a ``QuantizedTensor``'s layout parameters (its scale; NVFP4's block scales
too) to the GPU with ``BaseLayoutParams.copy_from(src, non_blocking=True)``
(comfy/memory_management.py:32 -> comfy_kitchen/tensor/base.py ``copy_from``, the call
in the field report's first traceback): a torch ``copy_`` from a pinned host buffer that
nothing records or fences, so ComfyUI may reuse or unregister the buffer while the copy
is in flight.  ``install_staging_guard()`` sends those host-to-device copies through
``comfy_kitchen_c.stage``, which records them in the flight record, says what the host
memory is, and lets ``comfy_kitchen_c.fence(src)`` wait for them before the buffer is
reused.

Only tensor fields copied from a CPU tensor into a CUDA tensor of the same dtype and
shape are staged.  Everything else keeps comfy_kitchen's behaviour: a call with no such
field goes to the original ``copy_from`` unchanged; in a call with one, the other tensor
fields are copied with ``Tensor.copy_`` and the other fields assigned, as the original
does, in field order.  (A dtype or shape change would make ``copy_`` convert or broadcast
through a temporary host tensor, which ``fence(src)`` could not track, so those copies
stay with torch.)  Subclasses that override ``copy_from`` are not affected; none does in
comfy_kitchen.

``device_side(t)`` decides what is device memory: a CUDA tensor, or, inside
``testing.emulated_device()``, a CPU tensor whose storage ``testing.device_memory`` marked
as the emulated device's (its memory is host memory).  comfyui_hooks.py uses the same rule
for ComfyUI's other copy points.
"""
from __future__ import annotations

import dataclasses
import threading

import torch

from . import faults

_lock = threading.Lock()
_installed = None  # (BaseLayoutParams, its original copy_from, our wrapper) while installed


def _layout_params_class():
    try:
        from comfy_kitchen.tensor.base import BaseLayoutParams
    except ImportError as exc:
        raise ImportError("the staging guard patches comfy_kitchen's BaseLayoutParams.copy_from; "
                          f"comfy_kitchen cannot be imported ({exc})") from exc
    return BaseLayoutParams


EMULATED_DEVICE_MEMORY = "_ckc_emulated_device_memory"  # attribute of an untyped storage (testing.device_memory)


def device_side(t) -> bool:
    """Whether t is device memory: CUDA, or the emulated device's while it runs the ops."""
    if not isinstance(t, torch.Tensor):
        return False
    if t.device.type == "cuda":
        return True
    if t.device.type != "cpu":
        return False
    from . import _C
    from ._kernels import KERNELS
    return KERNELS.get() is not _C and getattr(t.untyped_storage(), EMULATED_DEVICE_MEMORY, False)


def is_staged(dst, src) -> bool:
    """Whether copying src into dst is a host-to-device copy that stage() takes as is."""
    return (isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor)
            and device_side(dst) and src.device.type == "cpu" and not device_side(src)
            and dst.dtype == src.dtype and dst.shape == src.shape)


def _guarded(original):
    """copy_from that stages host-to-device tensor fields and otherwise acts as original."""

    def copy_from(self, src, non_blocking: bool = False) -> None:
        tensor_fields = self._tensor_fields()
        if not any(is_staged(getattr(self, name, None), getattr(src, name, None)) for name in tensor_fields):
            return original(self, src, non_blocking)
        # The original's loop (base.py copy_from), with the staged copies swapped in: it
        # has no per-field hook to wrap.
        for field in dataclasses.fields(self):
            src_val = getattr(src, field.name)
            if field.name in tensor_fields:
                dst = getattr(self, field.name)
                if is_staged(dst, src_val):
                    faults.stage(dst, src_val, non_blocking)  # looked up per call
                else:
                    dst.copy_(src_val, non_blocking=non_blocking)
            else:
                object.__setattr__(self, field.name, src_val)
        return None

    copy_from.__doc__ = original.__doc__
    copy_from.__name__ = original.__name__
    copy_from.__qualname__ = original.__qualname__
    copy_from.__wrapped__ = original
    return copy_from


def install_staging_guard() -> bool:
    """Routes comfy_kitchen's ``BaseLayoutParams.copy_from`` host-to-device copies through
    ``comfy_kitchen_c.stage``.  Returns False when the guard was already installed (a
    second call changes nothing).  Raises ImportError without comfy_kitchen."""
    global _installed
    cls = _layout_params_class()
    with _lock:
        if _installed is not None:
            return False
        original = cls.__dict__["copy_from"]
        wrapper = _guarded(original)
        cls.copy_from = wrapper
        _installed = (cls, original, wrapper)
        return True


def uninstall_staging_guard() -> bool:
    """Puts comfy_kitchen's own ``copy_from`` back (the very function object).  Returns
    False when the guard was not installed.  Raises RuntimeError when something else
    replaced ``copy_from`` after the guard, since restoring would drop that too."""
    global _installed
    with _lock:
        if _installed is None:
            return False
        cls, original, wrapper = _installed
        if cls.__dict__.get("copy_from") is not wrapper:
            raise RuntimeError("BaseLayoutParams.copy_from was replaced after install_staging_guard(); "
                               "remove that patch first")
        cls.copy_from = original
        _installed = None
        return True
