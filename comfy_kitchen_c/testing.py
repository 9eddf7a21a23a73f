"""Test helpers.

``emulated_device()`` runs the GPU path of every op on the CPU: inside it, ops
on CPU tensors go through the same Python wrapper, C launchers and CUDA kernel
sources (kernels/<family>.cu) as on a GPU, executed by the emulated device
(kernels/emu) in the extension ``_C_emu``.
"""
from __future__ import annotations

import contextlib

from . import ops


@contextlib.contextmanager
def emulated_device():
    """Within the block (and this thread or task), ops on CPU tensors run the GPU kernels
    on the emulated device."""
    try:
        from . import _C_emu
    except ImportError as exc:  # Windows builds have no emulated device yet
        raise RuntimeError("comfy_kitchen_c was built without the emulated device (_C_emu); "
                           "it is built on Linux and macOS") from exc
    token = ops.KERNELS.set(_C_emu)
    try:
        yield
    finally:
        ops.KERNELS.reset(token)
