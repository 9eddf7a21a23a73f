# SPDX-License-Identifier: Apache-2.0
"""Stand-in of comfy/memory_management.py: read_tensor_file_slice_into with ComfyUI's
signature, branches and call order; comfy-aimdo's copies (HostBuffer.read_file_slice,
read_file_to_device) are a file read plus a torch copy on the given stream."""
import dataclasses
import threading
from typing import NamedTuple

import torch

from comfy.quant_ops import QuantizedTensor

RAM_CACHE_HEADROOM = 0
aimdo_enabled = False


class TensorFileSlice(NamedTuple):
    """What ComfyUI attaches to a file-backed storage as _comfy_tensor_file_slice."""
    file_ref: object
    lock: object
    offset: int
    size: int


def attach_file_slice(tensor, file_obj, offset):
    """Test helper (not ComfyUI's): marks tensor as read from file_obj at offset."""
    tensor.untyped_storage()._comfy_tensor_file_slice = TensorFileSlice(
        file_obj, threading.Lock(), offset, tensor.numel() * tensor.element_size())
    return tensor


def _read(info, into):
    with info.lock:
        info.file_ref.seek(info.offset)
        data = info.file_ref.read(info.size)
    into.view(torch.uint8).reshape(-1)[:info.size].copy_(torch.frombuffer(bytearray(data), dtype=torch.uint8))


def _on(stream):
    if stream is not None and hasattr(stream, "cuda_stream"):
        return torch.cuda.stream(stream)
    import contextlib
    return contextlib.nullcontext()


def read_tensor_file_slice_into(tensor, destination, stream=None, destination2=None):
    if isinstance(tensor, QuantizedTensor):
        # The data through this function again (ComfyUI looks it up as a global); the layout
        # parameters CPU -> pin (blocking), then pin -> device (non-blocking).
        if not read_tensor_file_slice_into(tensor._qdata, destination._qdata if destination is not None else None,
                                           stream=stream,
                                           destination2=destination2._qdata if destination2 is not None else None):
            return False
        if destination is not None:
            dtype = destination._params.orig_dtype
            destination._params.copy_from(tensor._params, non_blocking=False)
            destination._params = dataclasses.replace(destination._params, orig_dtype=dtype)
        if destination2 is not None:
            dtype = destination2._params.orig_dtype
            destination2._params.copy_from(destination._params if destination is not None else tensor._params,
                                           non_blocking=True)
            destination2._params = dataclasses.replace(destination2._params, orig_dtype=dtype)
        return True
    info = getattr(tensor.untyped_storage(), "_comfy_tensor_file_slice", None)
    if info is None:
        return False
    if destination is not None and destination.device.type != "cpu" and destination2 is None:
        destination2, destination = destination, None
    if destination is None and destination2 is None:
        return False
    if destination is None:  # aimdo read_file_to_device: file -> its pinned ring -> device
        staging = torch.empty(info.size, dtype=torch.uint8)
        _read(info, staging)
        with _on(stream):
            destination2.view(torch.uint8).reshape(-1)[:info.size].copy_(staging, non_blocking=True)
        return True
    _read(info, destination)  # aimdo HostBuffer.read_file_slice (or readinto) into the pin
    if destination2 is not None:
        with _on(stream):
            destination2.view(torch.uint8).reshape(-1)[:info.size].copy_(
                destination.view(torch.uint8).reshape(-1)[:info.size], non_blocking=True)
    return True


def vram_aligned_size(tensor):
    if isinstance(tensor, list):
        return sum(vram_aligned_size(t) for t in tensor)
    if isinstance(tensor, QuantizedTensor):
        names, _ = tensor.__tensor_flatten__()
        return vram_aligned_size([getattr(tensor, n) for n in names])
    if tensor is None:
        return 0
    return (tensor.numel() * tensor.element_size() + 1023) // 1024 * 1024


def interpret_gathered_like(tensors, gathered):
    offset, views = 0, []
    for tensor in tensors:
        if tensor is None:
            views.append(None)
            continue
        if isinstance(tensor, QuantizedTensor):
            names, ctx = tensor.__tensor_flatten__()
            templates = {n: getattr(tensor, n) for n in names}
        else:
            templates = {"data": tensor}
        actual = {}
        for name, template in templates.items():
            size = template.numel() * template.element_size()
            actual[name] = gathered[offset:offset + size].view(template.dtype).view(template.shape)
            offset += vram_aligned_size(template)
        views.append(QuantizedTensor.__tensor_unflatten__(actual, ctx, 0, 0) if isinstance(tensor, QuantizedTensor)
                     else actual["data"])
    return views
