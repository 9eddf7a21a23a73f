# SPDX-License-Identifier: Apache-2.0
"""Staging hooks on the points where ComfyUI copies weights to the GPU.

Where the copies happen (ComfyUI and comfy_kitchen as of this writing; the field report's
first traceback is the second point):

1. ``comfy.model_management.cast_to_gathered(tensors, r, non_blocking=False, stream=None,
   r2=None, ...)``: called by comfy/ops.py (``cast_modules_with_vbar``) once to fill a weight's
   pin (CPU to pinned, no stream) and once to send it (``r`` or ``r2`` on the GPU, on an
   offload stream).  Per tensor it first tries (2); when that returns False it copies with
   torch: ``dest_view.copy_(tensor, non_blocking)`` and ``dest2_view.copy_(...)``.
2. ``comfy.memory_management.read_tensor_file_slice_into(tensor, destination, stream=None,
   destination2=None, ...)``: a plain tensor backed by a file goes through comfy-aimdo's own
   copies (``HostBuffer.read_file_slice`` into a pin and on to ``destination2``, or
   ``read_file_to_device``: ``cuMemcpyHtoDAsync`` on ``stream``); a ``QuantizedTensor``
   recurses for its ``_qdata`` (through the module attribute, so through this hook) and then
   copies its layout parameters with ``BaseLayoutParams.copy_from`` (3): CPU to pinned with
   non_blocking=False, pinned to GPU with non_blocking=True.
3. ``comfy_kitchen.tensor.base.BaseLayoutParams.copy_from``: staging_guard.py.
4. The legacy path (``--disable-dynamic-vram``): ``copy_`` on a QuantizedTensor, served by
   ``_handle_copy_`` from comfy_kitchen's dispatch table
   (``comfy_kitchen.tensor.base._DISPATCH_TABLE[aten.copy_.default]``): ``_qdata.copy_`` then
   ``_params.copy_from``.

What the hooks do: copies made by torch on our behalf points (3, 4) become
``comfy_kitchen_c.stage`` copies (checked, recorded, fenceable); copies that comfy-aimdo or
torch already queued (2, and the torch fallback of 1) get a flight record of their own,
queued behind them on their stream (``_C.stage(..., issued=True)``), so a copy that never
completes is the first incomplete record after a lost GPU.  In checking modes ``boundary``
and ``op`` every ``cast_to_gathered`` to the device ends with a fence of its stream: a fault
of one of its copies raises ``StagingFault`` naming that copy.

Each point is replaced as the module attribute (or table entry) ComfyUI looks up at call
time; ``uninstall()`` puts the originals back.  Nothing here imports ComfyUI: ``install()``
hooks what is loaded.
"""
from __future__ import annotations

import contextvars
import threading

import torch

from . import faults, staging_guard
from .staging_guard import device_side
from ._kernels import KERNELS

# ids of the tensors whose device copy a hook already staged or recorded in this cast_to_gathered
_HANDLED: contextvars.ContextVar[set | None] = contextvars.ContextVar("ckc_handled", default=None)
_lock = threading.Lock()
_installed: list[tuple[object, str, object, object]] = []  # (owner, key, original, wrapper)


def _quantized(t) -> bool:
    return hasattr(t, "_qdata") and hasattr(t, "_params")


def _mark_handled(t) -> None:
    handled = _HANDLED.get()
    if handled is not None:
        handled.add(id(t))


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _stream_handle(stream, device_tensor: torch.Tensor) -> tuple[int, int]:
    """(device index, stream) a copy into device_tensor was queued on: stream's, else the
    caller's current one; the emulated device has one stream, 0."""
    if device_tensor.device.type != "cuda":
        return 0, 0
    index = device_tensor.device.index or 0
    if stream is not None:
        return index, int(getattr(stream, "cuda_stream", 0))
    return index, faults.current_stream(index)


def record_issued(dst: torch.Tensor, src: torch.Tensor, stream, op: str) -> None:
    """A flight record (and completion mark) for a copy src -> dst already queued on stream."""
    device, handle = _stream_handle(stream, dst)
    nbytes = min(_nbytes(dst), _nbytes(src))
    what = f"src {faults._describe(src)} -> dst {faults._describe(dst)}"
    KERNELS.get().stage(dst.data_ptr(), src.data_ptr(), nbytes, device, handle, faults.CHECK.get(), True,
                            what, op, True)


def _fence(stream, device_tensor: torch.Tensor, op: str) -> None:
    if faults.CHECK.get() != faults.MODES["launch"]:
        device, handle = _stream_handle(stream, device_tensor)
        KERNELS.get().fence_stream(op, device, handle)


# ---- 2: read_tensor_file_slice_into ------------------------------------------------------------

def _argument(args: tuple, kwargs: dict, position: int, name: str):
    """An optional argument passed by position (after the first two) or by name: the hooks pass
    every call on as it came, so older and newer signatures of ComfyUI's functions both work."""
    return kwargs[name] if name in kwargs else args[position] if len(args) > position else None


def _read_hook(original):
    def read_tensor_file_slice_into(tensor, destination, *args, **kwargs):
        done = original(tensor, destination, *args, **kwargs)
        stream, destination2 = _argument(args, kwargs, 0, "stream"), _argument(args, kwargs, 1, "destination2")
        if not done:
            return done
        _mark_handled(tensor)
        if _quantized(tensor):
            return done  # its _qdata came through this hook, its params through copy_from
        device = destination2 if destination2 is not None else destination
        if device is None or not device_side(device):
            return done  # file to pin only: no device involved
        if destination is not None and not device_side(destination):
            record_issued(device, destination, stream, "aimdo read_file_slice")  # from the pin
        else:
            record_issued(device, tensor, stream, "aimdo read_file_to_device")  # file via aimdo's ring
        return done
    return read_tensor_file_slice_into


# ---- 1: cast_to_gathered -----------------------------------------------------------------------

def _gather_hook(original, memory_management):
    def cast_to_gathered(tensors, r, *args, **kwargs):
        stream, r2 = _argument(args, kwargs, 1, "stream"), _argument(args, kwargs, 2, "r2")
        token = _HANDLED.set(set())
        try:
            result = original(tensors, r, *args, **kwargs)
            handled = _HANDLED.get()
        finally:
            _HANDLED.reset(token)
        target = r2 if r2 is not None else r
        if target is None or not device_side(target):
            return result
        # The torch fallback copies ComfyUI made for plain tensors: record them, from their source
        # (the pin r when r2 is the device, else the tensor itself).
        views = memory_management.interpret_gathered_like(tensors, target)
        sources = memory_management.interpret_gathered_like(tensors, r) if r2 is not None and r is not None \
            else tensors
        for tensor, view, source in zip(tensors, views, sources):
            if tensor is None or id(tensor) in handled or _quantized(tensor) or view is None:
                continue
            if isinstance(source, torch.Tensor) and source.device.type == "cpu" and not device_side(source):
                record_issued(view, source, stream, "torch copy_ (cast_to_gathered)")
        _fence(stream, target, "cast_to_gathered")
        return result
    return cast_to_gathered


# ---- 4: copy_ on a QuantizedTensor (legacy path) ----------------------------------------------

def _copy_hook(original):
    def handle_copy_(qt, args, kwargs):
        dst, src = args[0], args[1]
        if not (_quantized(src) and getattr(dst, "_layout_cls", None) == getattr(src, "_layout_cls", None)
                and staging_guard.is_staged(dst._qdata, src._qdata) and dst._qdata.is_contiguous()
                and src._qdata.is_contiguous()):
            return original(qt, args, kwargs)
        import dataclasses

        from . import stage
        # comfy_kitchen's _handle_copy_ with the qdata copy staged (its params go through the
        # copy_from guard); the same checks, order and result.
        non_blocking = kwargs.get("non_blocking", len(args) >= 3)
        orig_dtype = dst._params.orig_dtype
        stage(dst._qdata, src._qdata, non_blocking)
        dst._params.copy_from(src._params, non_blocking=non_blocking)
        dst._params = dataclasses.replace(dst._params, orig_dtype=orig_dtype)
        _mark_handled(src)
        return dst
    return handle_copy_


# ---- install / uninstall -----------------------------------------------------------------------

def _points():
    """(owner, key, make_wrapper) for every copy point that is loaded."""
    import sys
    points = []
    memory = sys.modules.get("comfy.memory_management")
    model = sys.modules.get("comfy.model_management")
    if memory is not None and hasattr(memory, "read_tensor_file_slice_into"):
        points.append((memory, "read_tensor_file_slice_into", _read_hook))
    if model is not None and memory is not None and hasattr(model, "cast_to_gathered"):
        points.append((model, "cast_to_gathered", lambda original: _gather_hook(original, memory)))
    base = sys.modules.get("comfy_kitchen.tensor.base")
    table = getattr(base, "_DISPATCH_TABLE", None)
    if table is not None and torch.ops.aten.copy_.default in table:
        points.append((table, torch.ops.aten.copy_.default, _copy_hook))
    return points


def _get(owner, key):
    return owner[key] if isinstance(owner, dict) else getattr(owner, key)


def _set(owner, key, value) -> None:
    if isinstance(owner, dict):
        owner[key] = value
    else:
        setattr(owner, key, value)


def _name(owner, key) -> str:
    if isinstance(owner, dict):
        return "QuantizedTensor.copy_ (comfy_kitchen _handle_copy_)"
    return f"{owner.__name__}.{key}"


def install() -> list[str]:
    """Hooks every loaded copy point (and comfy_kitchen's copy_from, when it is installed);
    returns their names.  A second call hooks only points loaded since."""
    names = []
    with _lock:
        done = {(id(owner), key) for owner, key, _, _ in _installed}
        for owner, key, make in _points():
            if (id(owner), key) in done:
                continue
            original = _get(owner, key)
            wrapper = make(original)
            wrapper.__wrapped__ = original
            _set(owner, key, wrapper)
            _installed.append((owner, key, original, wrapper))
            names.append(_name(owner, key))
    try:
        if staging_guard.install_staging_guard():
            names.append("BaseLayoutParams.copy_from")
    except ImportError:
        pass  # no comfy_kitchen: nothing of its to guard
    return names


def installed() -> list[str]:
    with _lock:
        return [_name(owner, key) for owner, key, _, _ in _installed]


def uninstall() -> None:
    """Puts the originals back (those nothing replaced after us; RuntimeError names the others)."""
    with _lock:
        kept = []
        for owner, key, original, wrapper in reversed(_installed):
            if _get(owner, key) is wrapper:
                _set(owner, key, original)
            else:
                kept.append(_name(owner, key))
        _installed.clear()
    staging_guard.uninstall_staging_guard()
    if kept:
        raise RuntimeError(f"replaced after the hooks were installed, left as they are: {', '.join(kept)}")
