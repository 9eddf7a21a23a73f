# SPDX-License-Identifier: Apache-2.0
"""Test helpers.

``emulated_device()`` runs the GPU path of every op on the CPU: inside it, ops
on CPU tensors go through the same Python wrapper, C launchers and CUDA kernel
sources (kernels/<family>.cu) as on a GPU, executed by the emulated device
(csrc/emu) in the extension ``_C_emu``.

``inject(kind, op=None, nth=1)`` arms a fault on the emulated device (see its doc);
``reset_device()`` clears faults, hung streams and the sticky error.

``emulated_capture()`` captures the work issued to the emulated device into a graph, as
``torch.cuda.graph`` does on a GPU, and ``EmulatedGraph.replay()`` runs it again; what CUDA
forbids during a capture fails as it fails there (csrc/emu/emu_graphs.cpp).
"""
from __future__ import annotations

import contextlib
import os

from . import settings
from ._call import CAPTURED_TENSORS
from ._kernels import KERNELS


class EmulatedDeviceMissing(RuntimeError):
    """This build of comfy_kitchen_c has no emulated device (_C_emu)."""


def has_emulated_device() -> bool:
    try:
        _emu()
    except EmulatedDeviceMissing:
        return False
    return True


def _emu():
    try:
        from . import _C_emu
    except ImportError as exc:
        raise EmulatedDeviceMissing(
            "comfy_kitchen_c was built without the emulated device (_C_emu), which is test code: it is "
            "built by development installs (`pip install -e .`, `setup.py build_ext --inplace`) or with "
            "COMFY_KITCHEN_C_EMULATED=1, on Linux and macOS") from exc
    from . import faults
    faults.ensure_flight_dir()  # the emulated device records as a GPU does
    return _C_emu


# CKC_TEST_DEVICE=standin (tests/cuda_standin/run.py): emulated_device() runs the
# driver path on the stand-in CUDA driver instead (comfy_kitchen_c/standin.py), so that the
# suites written for the emulated device run through the real driver code too.
_STANDIN = os.environ.get("CKC_TEST_DEVICE") == "standin"


def emulated_only(what: str) -> None:
    """Skips the calling test under the stand-in driver: `what` is the emulated device's own
    (its fault injection, its GEMM heuristic), which the stand-in models its own way
    (tests/test_standin_driver.py)."""
    if _STANDIN:
        import pytest
        pytest.skip(f"{what} is the emulated device's; under the stand-in driver its own tests cover it")


@contextlib.contextmanager
def emulated_device():
    """Within the block (and this thread or task), ops on CPU tensors run the GPU kernels
    on the emulated device (or, under tests/cuda_standin/run.py, through the stand-in
    CUDA driver, whose kernels are the emulated device's)."""
    if _STANDIN:
        from . import standin
        with standin.driver():
            yield
        return
    token = KERNELS.set(_emu())
    try:
        yield
    finally:
        KERNELS.reset(token)


@contextlib.contextmanager
def host_mapping_refused():
    """Within the block (the whole process), the emulated device refuses to map host memory
    it did not allocate, as Linux >= 6.5 refuses CUDA to pin the file-backed flight record:
    completion marks then go to the ring's pinned words and the mirror copies them into the
    file.  ``COMFY_KITCHEN_C_EMU_REFUSE_HOST_MAPPING=1`` does the same for a whole run."""
    emu = _emu()
    emu.refuse_host_mapping(True)
    try:
        yield
    finally:
        emu.refuse_host_mapping(bool(settings.load().value("COMFY_KITCHEN_C_EMU_REFUSE_HOST_MAPPING")))


@contextlib.contextmanager
def kernels_skipped():
    """Within the block (the whole process), the emulated device checks, logs and admits each
    kernel launch as usual but does not run its blocks: a call's time is then its host path
    (the Python wrapper, the C launchers, the device seam), as ``benchmarks/bench_host.py
    --emulated`` times it.  Results are garbage inside; copies and memsets still run."""
    emu = _emu()
    emu.skip_kernels(True)
    try:
        yield
    finally:
        emu.skip_kernels(False)


@contextlib.contextmanager
def riding_mark_limit(nbytes: int):
    """Within the block (the whole process, real GPU and emulated device alike), ops whose
    tensors hold more than ``nbytes`` get a separate completion mark instead of one riding on
    their last kernel (csrc/diag/marks.h); 0: every mark separate, 2**64 - 1: every mark may
    ride.  ``benchmarks/gpu_check.py`` times both against the flight record off."""
    from . import _C

    modules = [_C] + ([_emu()] if has_emulated_device() else [])
    before = [m.riding_mark_limit(nbytes) for m in modules]
    try:
        yield
    finally:
        for m, b in zip(modules, before):
            m.riding_mark_limit(b)


def device_memory(t):
    """Marks t's storage as the emulated device's memory and returns t: inside
    ``emulated_device()``, ComfyUI's copy points (comfyui_hooks.py) then treat copies into it as
    host-to-device copies, as they would a CUDA tensor's."""
    from .staging_guard import EMULATED_DEVICE_MEMORY
    setattr(t.untyped_storage(), EMULATED_DEVICE_MEMORY, True)
    return t


# ---- fault injection on the emulated device (csrc/emu/emu_streams.cpp) ----

INJECT_KINDS = {"launch": 1, "kernel": 2, "copy": 3, "hang": 4}


def reset_device() -> None:
    """Disarms every injected fault and resets the emulated device: hung streams and the
    sticky error are cleared, work that never completed is dropped."""
    _emu().reset_device()


@contextlib.contextmanager
def inject(kind: str, op: str | None = None, nth: int = 1):
    """Within the block, the emulated device fails the nth kernel launch made by op (any op
    when None; ``op="stage"`` for staged copies):

    * ``launch``: the launch is refused at once (LaunchError).
    * ``kernel``: the kernel runs nothing and the device holds a sticky fault, reported at
      the next fence or launch, as CUDA reports asynchronous errors.
    * ``copy``: the nth staged copy copies nothing; sticky fault as for ``kernel``.
    * ``hang``: that kernel (or copy) and all later work on its stream never complete:
      events after it never signal, completion marks never land.

    On exit the device is reset (``reset_device()``).  Use inside ``emulated_device()``."""
    if kind not in INJECT_KINDS:
        raise ValueError(f"inject: argument 'kind': expected one of {', '.join(INJECT_KINDS)}, got {kind!r}")
    if isinstance(nth, bool) or not isinstance(nth, int) or nth < 1:
        raise ValueError(f"inject: argument 'nth': expected an integer >= 1, got {nth!r}")
    emu = _emu()
    emu.reset_device()
    emu.inject(INJECT_KINDS[kind], op, nth)
    try:
        yield
    finally:
        emu.reset_device()


# ---- CUDA graphs on the emulated device (csrc/emu/emu_graphs.cpp) ----

CAPTURE_MODES = {"global": 0, "thread_local": 1, "relaxed": 2}


class EmulatedGraph:
    """Work captured on the emulated device (emulated_capture); replay() runs it again on
    the emulated stream, as torch.cuda.CUDAGraph.replay().  Only the device's work is
    captured: torch's own CPU computations in the block ran once, at capture."""

    def __init__(self):
        self._emu = _emu()
        self.handle = None
        self.tensors = []  # what the captured work reads and writes: kept alive with the graph

    def replay(self) -> None:
        if self.handle is None:
            raise RuntimeError("EmulatedGraph.replay: the capture has not ended")
        self._emu.graph_launch(self.handle, 0)

    def __del__(self):
        if getattr(self, "handle", None) is not None:
            self._emu.graph_destroy(self.handle)


@contextlib.contextmanager
def emulated_capture(mode: str = "thread_local"):
    """Inside emulated_device(): the work the block issues to the emulated device is captured
    into the yielded EmulatedGraph (nothing runs), with CUDA's capture mode `mode` (ComfyUI
    captures with "thread_local"; torch's default is "global").  A call CUDA forbids during
    the capture (a wait for the stream, an allocation of device or pinned memory, ...) fails
    and invalidates the capture: its end raises CaptureError."""
    if mode not in CAPTURE_MODES:
        raise ValueError(f"emulated_capture: argument 'mode': expected one of {', '.join(CAPTURE_MODES)}, "
                         f"got {mode!r}")
    emu = _emu()
    graph = EmulatedGraph()
    emu.capture_begin(0, CAPTURE_MODES[mode])
    token = CAPTURED_TENSORS.set(graph.tensors)
    try:
        yield graph
    except BaseException:
        try:
            emu.capture_end(0)
        except Exception:  # noqa: BLE001 - the block's own exception is the one to see
            pass
        raise
    finally:
        CAPTURED_TENSORS.reset(token)
    graph.handle = emu.capture_end(0)


# ---- cross-stream hazards on the emulated device (csrc/emu/emu_hazards.cpp) ----

class StreamHazards:
    """The emulated device's cross-stream hazard detector, on while the ``stream_hazards()``
    block runs.  Ops on the emulated device run on stream 0 (the compute stream); ``copy``
    stages a host tensor into emulated device memory on any stream (an offload stream);
    ``record`` and ``wait`` are cudaEventRecord and cudaStreamWaitEvent.  ``reports()``
    returns (and clears) what the detector saw: a kernel reading memory a copy on another
    stream wrote without an event ordering it, a copy overwriting memory a kernel on another
    stream still reads, and work an op issued on a stream other than its caller's."""

    COMPUTE = 0  # the stream ops use on the emulated device (_call._run)

    def __init__(self, emu):
        self._emu = emu

    def copy(self, dst, src, stream: int) -> None:
        """Stages src (host) into dst (emulated device memory) on stream, as ComfyUI's offload copy."""
        from .faults import CHECK
        nbytes = src.numel() * src.element_size()
        self._emu.stage(dst.data_ptr(), src.data_ptr(), nbytes, 0, stream, CHECK.get(), True,
                        f"offload {tuple(src.shape)} {src.dtype}")

    def record(self, stream: int) -> int:
        return self._emu.hazard_record(stream)

    def wait(self, stream: int, event: int) -> None:
        self._emu.hazard_wait(stream, event)

    def reports(self) -> list[str]:
        return [line for line in self._emu.hazards_take().splitlines() if line]


@contextlib.contextmanager
def stream_hazards():
    """Inside emulated_device(): the cross-stream hazard detector is on for the block (yields a
    StreamHazards); on exit it is off and cleared."""
    emu = _emu()
    emu.hazards_track(True)
    try:
        yield StreamHazards(emu)
    finally:
        emu.hazards_track(False)
