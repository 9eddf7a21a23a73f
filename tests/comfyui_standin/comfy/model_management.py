# SPDX-License-Identifier: Apache-2.0
"""Stand-in of comfy/model_management.py: MAX_PINNED_MEMORY from RAM at import (ComfyUI's
formula), cast_to_gathered with ComfyUI's signature and call order."""
import contextlib
import os
import platform

import torch

import comfy.memory_management
from comfy.cli_args import args
from comfy.quant_ops import QuantizedTensor

WINDOWS = any(platform.win32_ver())
total_ram = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") / (1024 * 1024)  # MiB, as psutil's total

MAX_PINNED_MEMORY = -1
if not args.disable_pinned_memory:
    ram = total_ram * 1024 * 1024
    if getattr(args, "pinned_memory", None) is not None:
        MAX_PINNED_MEMORY = args.pinned_memory * 1024 ** 3
    elif WINDOWS:
        MAX_PINNED_MEMORY = ram * 0.40
    else:
        MAX_PINNED_MEMORY = max(ram * 0.40, min(ram * 0.90, ram - 4 * 1024 ** 3, ram - 16 * 1024 ** 3))

EXTRA_RESERVED_VRAM = 400 * 1024 * 1024
if args.reserve_vram is not None:
    EXTRA_RESERVED_VRAM = args.reserve_vram * 1024 ** 3


def cast_to_gathered(tensors, r, non_blocking=False, stream=None, r2=None):
    context = torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()
    views = comfy.memory_management.interpret_gathered_like(tensors, r) if r is not None else [None] * len(tensors)
    views2 = comfy.memory_management.interpret_gathered_like(tensors, r2) if r2 is not None else None
    with context:
        for tensor in tensors:
            view = views.pop(0)
            view2 = views2.pop(0) if views2 is not None else None
            if tensor is None:
                continue
            if comfy.memory_management.read_tensor_file_slice_into(tensor, view, stream=stream, destination2=view2):
                continue
            if view is not None:
                view.copy_(tensor, non_blocking=non_blocking)
            if view2 is not None:
                view2.copy_(tensor if view is None else view, non_blocking=non_blocking)


__all__ = ["MAX_PINNED_MEMORY", "QuantizedTensor", "cast_to_gathered", "total_ram"]
