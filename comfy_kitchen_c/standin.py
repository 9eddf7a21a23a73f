# SPDX-License-Identifier: Apache-2.0
"""The stand-in CUDA driver (test code): tests/cuda_standin builds a library that exports the
CUDA driver API and cuBLASLt, holding callers to a real driver's rules, with device memory
being host memory and kernels run by the emulated device.  A process started with
``COMFY_KITCHEN_C_CUDA_DRIVER`` (and ``COMFY_KITCHEN_C_CUBLASLT``) naming it runs `_C`'s real
driver path on CPU tensors inside ``driver()``: the launchers, ``gpu/runtime_cuda.c``,
``gpu/cuda_driver.c`` and ``gpu/blas_cublaslt.c``, as on a GPU.  ``tests/cuda_standin/run.py``
builds it and starts pytest so.

``library()`` is the stand-in's control API (ctypes): faults to inject, streams, captures,
and the refusals it logged (``violations()``)."""
from __future__ import annotations

import contextlib
import contextvars
import ctypes
import functools
import os

from . import _C
from ._kernels import KERNELS

# The stream a call under driver() runs on: 0, the current context's legacy stream (torch's
# default stream), or a handle of Standin.stream_new().
STREAM = contextvars.ContextVar("comfy_kitchen_c_standin_stream", default=0)

INJECT = {"illegal_address": 1, "oom": 2, "hang": 3, "destroy_stream": 4, "blas_failed": 5}


class StandinMissing(RuntimeError):
    """This process was not started with the stand-in driver (tests/cuda_standin/run.py)."""


@functools.lru_cache(maxsize=None)
def library() -> ctypes.CDLL:
    """The stand-in library this process's driver is (its control API)."""
    path = os.environ.get("COMFY_KITCHEN_C_CUDA_DRIVER", "")
    if not path or not os.path.isfile(path):
        raise StandinMissing("COMFY_KITCHEN_C_CUDA_DRIVER names no stand-in driver: run the tests through "
                             "tests/cuda_standin/run.py")
    lib = ctypes.CDLL(path)
    if not hasattr(lib, "ckcsi_standin_marker"):
        raise StandinMissing(f"{path} is not the stand-in driver")
    lib.ckcsi_stream_new.restype = ctypes.c_void_p
    lib.ckcsi_stream_new.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.ckcsi_violations.restype = ctypes.c_size_t
    lib.ckcsi_violations.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    lib.ckcsi_capture_begin.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.ckcsi_capture_end.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64)]
    lib.ckcsi_graph_launch.argtypes = [ctypes.c_uint64, ctypes.c_void_p]
    lib.ckcsi_stream_hung.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.ckcsi_device_sticky.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    lib.cuStreamDestroy_v2.argtypes = [ctypes.c_void_p]
    lib.ckcsi_hang_stream.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.ckcsi_allocated_bytes.restype = ctypes.c_ulonglong
    return lib


def active() -> bool:
    """Whether this process's driver is the stand-in."""
    try:
        library()
    except StandinMissing:
        return False
    return True


def violations() -> list[str]:
    """The refusals the stand-in logged since the last call (cleared): "call: rule"."""
    lib = library()
    size = lib.ckcsi_violations(None, 0)
    buf = ctypes.create_string_buffer(size + 1)
    lib.ckcsi_violations(buf, size + 1)
    return [line for line in buf.value.decode().splitlines() if line]


def inject(kind: str, nth: int = 1) -> None:
    """Arms a fault: the nth launch hits an illegal address (a sticky error from then on), the
    nth cuMemAlloc runs out of memory, the nth launch hangs its stream, the nth launch's
    stream is destroyed after it, the nth cublasLtMatmul fails."""
    library().ckcsi_inject(INJECT[kind], nth)


def reset() -> None:
    """Sticky errors, injected faults, hangs, captures and the refusal log cleared."""
    library().ckcsi_reset()


def sticky(device: int = 0) -> tuple[int, str]:
    why = ctypes.create_string_buffer(400)
    code = library().ckcsi_device_sticky(device, why, 400)
    return code, why.value.decode()


def stream_new(device: int = 0, non_blocking: bool = True) -> int:
    """A stream of device (as torch's side streams, non-blocking by default)."""
    return library().ckcsi_stream_new(device, int(non_blocking))


def hang_stream(stream: int | None = None, device: int = 0) -> None:
    """stream (None: device's legacy stream, torch's default) never completes from now on."""
    library().ckcsi_hang_stream(stream, device)


def memory_full(full: bool = True) -> None:
    """Every cuMemAlloc fails with CUDA_ERROR_OUT_OF_MEMORY (a GPU whose memory torch's cache holds)."""
    library().ckcsi_memory_full(int(full))


def allocated_bytes() -> int:
    """Bytes cuMemAlloc handed out since the process began."""
    return library().ckcsi_allocated_bytes()


def capture_begin(stream: int, mode: str = "global") -> None:
    """cuStreamBeginCapture on stream (a non-legacy one) in mode global, thread_local or relaxed."""
    code = library().ckcsi_capture_begin(stream, {"global": 0, "thread_local": 1, "relaxed": 2}[mode])
    if code:
        raise RuntimeError(f"cuStreamBeginCapture: CUDA error {code}")


def capture_end(stream: int) -> int:
    """cuStreamEndCapture: 0, or the CUDA error (901: the capture was invalidated)."""
    graph = ctypes.c_uint64()
    return library().ckcsi_capture_end(stream, ctypes.byref(graph))


def current_context() -> int:
    """The calling thread's current context (0: none), as the driver says."""
    ctx = ctypes.c_void_p()
    library().cuInit(0)
    library().cuCtxGetCurrent(ctypes.byref(ctx))
    return ctx.value or 0


def set_context(device: int) -> None:
    """Makes device's primary context current on this thread (-1: none), as torch leaves it."""
    library().ckcsi_set_context(device)


class _Kernels:
    """_C, with each op function run on host memory as CUDA device `device`'s memory on the
    stand-in driver: what KERNELS holds inside driver()."""

    def __init__(self, device: int):
        self._flag = _C.CALL_HOST_AS_DEVICE | device << _C.CALL_DEVICE_SHIFT
        cc = library().ckcsi_device_cc(device)
        self.compute_capability = (cc // 10, cc % 10)  # what the ops' cuBLASLt gates read (_call.py)

    def __getattr__(self, name):
        target = getattr(_C, name)
        if name not in _C.OP_FUNCTIONS:
            return target
        flag = self._flag

        def call(op, *args):
            *rest, _stream, threads, check = args
            return target(op, *rest, STREAM.get(), threads, check | flag)

        self.__dict__[name] = call
        return call


@contextlib.contextmanager
def driver(device: int = 0, stream: int | None = None):
    """Within the block (this thread or task), ops on CPU tensors run `_C`'s GPU path through
    the stand-in driver on device `device`, on `stream` (None: the legacy stream)."""
    library()
    token = KERNELS.set(_Kernels(device))
    stream_token = STREAM.set(stream or 0)
    try:
        yield
    finally:
        STREAM.reset(stream_token)
        KERNELS.reset(token)
