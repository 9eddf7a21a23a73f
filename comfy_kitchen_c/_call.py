# SPDX-License-Identifier: Apache-2.0
"""How every op reaches C: the DLPack capsules, the call into the extension that runs the
kernels (_C, or _C_emu on the emulated device), and the facts about the device a call needs.
Shared by ops.py and linear.py (which ops.py re-exports), so neither imports the other."""
from __future__ import annotations

import contextvars
import functools
import os

import torch
import torch.utils.dlpack

from . import _C, faults
from ._kernels import KERNELS

# torch's DLPack export without the Python layer of Tensor.__dlpack__, which costs ~4 us per
# tensor (an op passes up to 7): that layer only adds checks that cannot fail here (gradient,
# conjugate, layout), the producer-stream synchronisation our calls skip anyway (CUDA work is
# ordered by the stream we pass), and a refusal of tensors on another device than the current
# one, which would break ops on a second GPU (the C side sets the device from the capsule).
_to_dlpack = torch.utils.dlpack.to_dlpack


def _capsule(t: torch.Tensor | None):
    if t is None:
        return None
    # A view with the negation bit (torch._neg_view, the imaginary part of a conjugate) shares
    # its base's memory and negates on read: DLPack has no such bit, so export would hand C the
    # raw, un-negated values.  Materialise it (a copy, only for such views).  The conjugate
    # bit exists only on complex tensors, which every op refuses by dtype before export.
    return _to_dlpack(t.resolve_neg() if t.is_neg() else t)


# Inside testing.emulated_capture(): the tensors of every captured call, which the graph keeps
# alive as a CUDA graph's private memory pool keeps the memory of a capture's temporaries.
CAPTURED_TENSORS = contextvars.ContextVar("comfy_kitchen_c_captured_tensors", default=None)


def _run(kernel: str, op: str, device: torch.device, tensors, ints) -> None:
    if tensors[0].numel() == 0:
        # An empty input the op serves (see the checks): its outputs are empty too (or, for a
        # given tensorwise scale, not written), so there is nothing to launch.
        return
    captured = CAPTURED_TENSORS.get()
    if captured is not None:
        captured.extend(tensors)
    stream = faults.current_stream(device.index) if device.type == "cuda" else 0
    # map, not a generator expression: no generator frame per call
    getattr(KERNELS.get(), kernel)(op, *map(_capsule, tensors), *ints, stream, torch.get_num_threads(),
                                   faults.CHECK.get())


# v rounded up to a multiple of m: C's one helper (csrc/math/ckc_inline.h), remembered per argument pair
_round_up = functools.lru_cache(maxsize=4096)(_C.round_up)


def gemm_workspace(device: torch.device) -> torch.Tensor | None:
    """cuBLASLt's workspace for one GPU GEMM, from torch's caching allocator (which serves a nearly
    full GPU from its cache and a CUDA-graph capture from the graph's pool): comfy_kitchen's sizes,
    32 MiB from Hopper on, else 4 MiB (4 MiB on the emulated device and the stand-in driver).
    None when torch cannot have it now: the GEMM then runs on an algorithm that needs none."""
    size = 32 << 20 if device.type == "cuda" and compute_capability(device.index)[0] >= 9 else 4 << 20
    try:
        return torch.empty(size=(size,), dtype=torch.uint8, device=device)
    except torch.OutOfMemoryError:
        return None


def gpu_compute_capability(device: torch.device) -> tuple[int, int] | None:
    """The compute capability a GPU call runs on: the CUDA device's, the stand-in driver's device's
    (comfy_kitchen_c/standin.py), None on the emulated device (whose C references of cuBLASLt's
    GEMMs take every shape)."""
    if device.type == "cuda":
        return compute_capability(device.index)
    return getattr(KERNELS.get(), "compute_capability", None)


def _gpu_path(device: torch.device) -> bool:
    """Whether a call runs the GPU kernels: CUDA tensors, or any tensor on the emulated device."""
    return device.type == "cuda" or KERNELS.get() is not _C


_blas_dirs_set = False


def _blas_search_dirs() -> None:
    """Tells _C where torch's pip-installed CUDA libraries are, for loading cuBLASLt at first use
    (the C side first takes a cuBLASLt already loaded, then the loader's path, then these)."""
    global _blas_dirs_set
    if _blas_dirs_set or not hasattr(KERNELS.get(), "set_blas_search_dirs"):
        return
    torch_dir = os.path.dirname(torch.__file__)
    site = os.path.dirname(torch_dir)
    lib = "bin" if os.name == "nt" else "lib"
    dirs = [os.path.join(site, "nvidia", "cu13", lib), os.path.join(site, "nvidia", "cublas", lib),
            os.path.join(torch_dir, "lib")]
    KERNELS.get().set_blas_search_dirs(os.pathsep.join(d for d in dirs if os.path.isdir(d)))
    _blas_dirs_set = True


@functools.lru_cache(maxsize=None)
def compute_capability(index: int) -> tuple[int, int]:
    """Compute capability of a CUDA device (fixed for the process; torch's query costs ~2 us)."""
    return tuple(torch.cuda.get_device_capability(index))
