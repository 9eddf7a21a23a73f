# SPDX-License-Identifier: Apache-2.0
"""Faults surface where they happen: checking modes, checked staging, the flight record.

Checking modes (``COMFY_KITCHEN_C_CHECK`` or ``with checking(mode):``, per thread/task):

* ``launch`` (default): every launch is checked at once; a fault the device reports
  later is blamed, through the flight record, on the earliest work that did not complete.
* ``boundary``: also, before each op, the work queued on its stream is fenced and waited on
  under the watchdog (a failure is a ``StagingFault``: it happened before the op started).
* ``op``: also, after each op, its stream is fenced (a failure is a ``KernelFault`` of the op).

``stage(dst, src)`` copies host memory to the device on the current stream, recorded in the
flight record, and says what the source memory is; ``fence(src)`` waits until every copy from
that host memory has completed.  The C side is csrc/diag/ (checked.h describes the checks).
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import platform
import sys
import time

import torch

from . import _C, flight, settings
from ._C import ArgumentError, ArgumentTypeError
from ._kernels import KERNELS

MODES = {"launch": 0, "boundary": 1, "op": 2}
# Record files kept in the flight directory (the newest; this process's included).
KEEP_RECORDS = 16


def _mode_from_env() -> int:
    """COMFY_KITCHEN_C_CHECK as loaded now (settings.py; its default when it is refused)."""
    return MODES[settings.load().value("COMFY_KITCHEN_C_CHECK")]


# The caller's current CUDA stream of a device index, as the int the C side takes (ops and
# staged copies run on it): torch's raw getter (the one Triton and torch's generated code call)
# where it exists (it builds no torch.cuda.Stream object), else the public API.
current_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda index: torch.cuda.current_stream(index).cuda_stream)


# The mode every op passes to C (ops._run).
CHECK = contextvars.ContextVar("comfy_kitchen_c_check", default=_mode_from_env())


@contextlib.contextmanager
def checking(mode: str):
    """Within the block (this thread or task), ops and stage run under checking mode
    ``launch``, ``boundary`` or ``op``."""
    if mode not in MODES:
        raise ArgumentError(f"checking: argument 'mode': expected one of {', '.join(MODES)}, got {mode!r}")
    token = CHECK.set(MODES[mode])
    try:
        yield
    finally:
        CHECK.reset(token)


def check_mode() -> str:
    """The checking mode in effect here."""
    code = CHECK.get()
    return next(name for name, value in MODES.items() if value == code)


# ---- flight record ------------------------------------------------------------------------

_flight_dir: str | None = None  # the folder of this process's record, until ensure_flight_dir() made it


def configure_flight(package_version: str) -> None:
    """Where this process's flight record goes: the file is created at its first record,
    which also removes the oldest record files of its folder so that KEEP_RECORDS remain
    (csrc/diag/flight_prune.c); importing the package deletes nothing, and creates the folder
    only where a GPU can record (a CUDA build on a machine with an NVIDIA driver installed, or
    COMFY_KITCHEN_C_CUDA_DRIVER naming one; asked without starting the driver): without one
    nothing is written, and the emulated device (test code) makes it when it first loads.
    ``COMFY_KITCHEN_C_FLIGHT=0`` records no ops and keeps the staged copies' records in memory."""
    global _flight_dir
    python = platform.python_version()
    if not settings.value("COMFY_KITCHEN_C_FLIGHT"):
        _C.flight_configure(None, False, python, package_version, flight.PREFIX, flight.SUFFIX, 0)
        return
    directory = flight.default_dir()
    path = os.path.join(directory, f"{flight.PREFIX}{time.time_ns() // 1_000_000:013d}-{os.getpid()}{flight.SUFFIX}")
    _flight_dir = directory
    if _C.HAS_CUDA and _nvidia_driver_installed() and not ensure_flight_dir():
        path = None  # unwritable: the record stays in memory
    _C.flight_configure(path, True, python, package_version, flight.PREFIX, flight.SUFFIX, KEEP_RECORDS)


def _nvidia_driver_installed() -> bool:
    """Whether this machine has an NVIDIA driver the GPU kernels could use, from the files the driver
    installs (Linux: its /proc entry or device node; WSL: the GPU paravirtualisation node; Windows:
    nvcuda.dll), or COMFY_KITCHEN_C_CUDA_DRIVER naming one.  Not _C.cuda_driver(): that starts the
    driver (cuInit), which importing the package must not do (a process that forks afterwards)."""
    if settings.value("COMFY_KITCHEN_C_CUDA_DRIVER"):
        return True
    if sys.platform == "win32":
        system = os.environ.get("SystemRoot", r"C:\Windows")
        return os.path.exists(os.path.join(system, "System32", "nvcuda.dll"))
    return any(os.path.exists(p) for p in ("/proc/driver/nvidia/version", "/dev/nvidiactl", "/dev/dxg"))


def ensure_flight_dir() -> bool:
    """Makes the flight record's folder before the first record can be written (a record the C side
    cannot create a file for stays in memory); False where it cannot be made."""
    global _flight_dir
    if _flight_dir is None:
        return True
    try:
        os.makedirs(_flight_dir, exist_ok=True)
    except OSError:
        return False
    _flight_dir = None
    return True


def record_path() -> str | None:
    """This process's flight-record file (None before its first record, or in memory only)."""
    return _C.flight_path()


# ---- staging ------------------------------------------------------------------------------

def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _describe(t: torch.Tensor) -> str:
    return f"{t.dtype}[{', '.join(map(str, t.shape))}]".replace("torch.", "")


def _host_tensor(op: str, name: str, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise ArgumentTypeError(f"{op}: argument '{name}': expected a tensor, got {type(t).__name__}")
    if t.device.type != "cpu":
        raise ArgumentTypeError(f"{op}: argument '{name}': expected host (CPU) memory, got {t.device}")
    if not t.is_contiguous():
        raise ArgumentError(f"{op}: argument '{name}': expected a contiguous tensor")


def stage(dst: torch.Tensor, src: torch.Tensor, non_blocking: bool = True) -> str:
    """Copies host tensor src into device tensor dst on the current stream, checked under the
    checking mode and recorded in the flight record; returns what src's memory is: "pinned",
    "registered", "pageable", "file-mapped" or "unknown".  With non_blocking=False (or in mode
    ``op``) waits for the copy.  Inside ``testing.emulated_device()`` dst is a CPU tensor and
    the copy goes through the emulated device."""
    op = "stage"
    _host_tensor(op, "src", src)
    if not isinstance(dst, torch.Tensor):
        raise ArgumentTypeError(f"{op}: argument 'dst': expected a tensor, got {type(dst).__name__}")
    kernels = KERNELS.get()
    if dst.is_cuda and kernels is _C:
        device = dst.device.index
        stream = current_stream(device)
    elif dst.device.type == "cpu" and kernels is not _C:
        device, stream = 0, 0  # the emulated device's memory is host memory, its stream 0
    else:
        raise ArgumentTypeError(f"{op}: argument 'dst': expected a CUDA tensor, got {dst.device}")
    if not dst.is_contiguous():
        raise ArgumentError(f"{op}: argument 'dst': expected a contiguous tensor")
    if _nbytes(dst) != _nbytes(src):
        raise ArgumentError(f"{op}: argument 'dst': {_nbytes(dst)} bytes, but src has {_nbytes(src)}")
    tensors = f"src {_describe(src)} -> dst {_describe(dst)}"
    return kernels.stage(dst.data_ptr(), src.data_ptr(), _nbytes(src), device, stream, CHECK.get(),
                         bool(non_blocking), tensors)


def fence(src) -> None:
    """Waits until every staged copy from src's host memory has completed (under the
    watchdog), so that the memory may be reused, unregistered or freed.  Raises
    StagingFault when such a copy failed, HangSuspected when it does not complete."""
    _host_tensor("fence", "src", src)
    KERNELS.get().fence(src.data_ptr(), _nbytes(src))

