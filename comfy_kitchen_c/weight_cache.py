# SPDX-License-Identifier: Apache-2.0
"""Copies derived from a weight, made once per weight instead of once per call.

int8_linear needs two things its caller's tensors may not be: a weight whose K and N
cuBLASLt's int8 GEMM takes (multiples of 16; else a zero-padded copy, linear.py) and its
scale in float32.  Made per call, the padded copy is a `torch.zeros` and a copy of the whole
weight before every GEMM; made once, a call costs a dictionary look-up.

An entry belongs to the caller's tensor object (a weak reference: freed with it) and is valid
while the tensor's storage pointer, shape, strides and version counter are unchanged (an
in-place write, `set_` or `copy_` bumps the counter), so a stale copy is never used.  Not
cached, made per call as before:
* inference tensors (made under `torch.inference_mode()`): they have no version counter, so
  an in-place write could not be seen;
* calls inside a CUDA-graph capture (or the emulated device's): the captured graph must copy
  the weight at each replay, as it did, and a copy made during capture holds nothing until the
  graph is replayed;
* copies that do not fit the budget (`set_linear_memory_limit`'s bound, which the per-call
  copies counted against), the least recently used copies going first.
"""
from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from typing import Callable

import torch

from ._call import CAPTURED_TENSORS


class _Entry:
    __slots__ = ("ref", "key", "copy", "nbytes")

    def __init__(self, ref, key, copy: torch.Tensor):
        self.ref, self.key, self.copy = ref, key, copy
        self.nbytes = copy.numel() * copy.element_size()


# (id of the weight, what was derived) -> entry, least recently used first
_entries: OrderedDict[tuple[int, str], _Entry] = OrderedDict()
_bytes = 0
# Reentrant: a weight freed while the lock is held (the garbage collector runs inside any
# allocation) drops its copy from within the same thread.
_lock = threading.RLock()
stats = {"made": 0, "reused": 0, "uncached": 0}


def _state(t: torch.Tensor):
    """What must be unchanged for a copy of t to stay valid."""
    return t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, t.device, t._version


def _capturing(device: torch.device) -> bool:
    if CAPTURED_TENSORS.get() is not None:
        return True
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def _drop(slot: tuple[int, str], only=None) -> None:
    """Drops the copy in slot (only: if it is that entry)."""
    global _bytes
    with _lock:
        entry = _entries.get(slot)
        if entry is not None and (only is None or entry is only):
            del _entries[slot]
            _bytes -= entry.nbytes


def derived(t: torch.Tensor, what: str, make: Callable[[], torch.Tensor], budget: int) -> torch.Tensor:
    """make() -- a tensor derived from t alone, named `what` -- made once per t while t is
    unchanged (see the module's doc for what is never cached); budget: the bytes all cached
    copies may hold together."""
    if t.is_inference() or _capturing(t.device):
        stats["uncached"] += 1
        return make()
    slot = (id(t), what)
    state = _state(t)
    with _lock:
        entry = _entries.get(slot)
        if entry is not None:
            if entry.ref() is t and entry.key == state:
                _entries.move_to_end(slot)
                stats["reused"] += 1
                return entry.copy
            _drop(slot)  # t changed, or another tensor now has the freed one's id
    copy = make()
    stats["made"] += 1
    _insert(t, slot, state, copy, budget)
    return copy


def _insert(t: torch.Tensor, slot, state, copy: torch.Tensor, budget: int) -> None:
    global _bytes
    entry = _Entry(None, state, copy)
    if entry.nbytes > budget:
        return
    # The callback drops the copy when t is freed; it is bound to this entry (a later entry in
    # the same slot, for a new tensor with the same id, is not dropped by the old one's death).
    entry.ref = weakref.ref(t, lambda _, slot=slot, entry=entry: _drop(slot, entry))
    with _lock:
        while _entries and _bytes + entry.nbytes > budget:
            _drop(next(iter(_entries)))
        _drop(slot)
        _entries[slot] = entry
        _bytes += entry.nbytes


def cached_bytes() -> int:
    """Bytes held by cached copies now."""
    return _bytes


def clear() -> None:
    """Drops every cached copy."""
    global _bytes
    with _lock:
        _entries.clear()
        _bytes = 0
