# SPDX-License-Identifier: Apache-2.0
"""Scenarios run through `_C`'s real driver path on the stand-in CUDA driver, each in a process
of its own (the driver is opened once per process, and a device's first op happens once):
tests/test_standin_driver.py starts them with tests/cuda_standin/run.py's environment and reads
the one JSON line each prints.

    python3 tests/standin_scenarios.py NAME     (in that environment)

Each returns what the test asserts on: the exception an op raised (class, op, detected_by,
message), what the stand-in refused (its log of broken driver rules), what it allocated."""
from __future__ import annotations

import json
import os
import sys
import threading

os.environ.setdefault("COMFY_KITCHEN_C_HANG_MS", "50")
os.environ.setdefault("COMFY_KITCHEN_C_HANG_RAISE_MS", "300")

import torch  # noqa: E402

import comfy_kitchen_c as ckc  # noqa: E402
from comfy_kitchen_c import ops, standin  # noqa: E402

SCENARIOS = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def raised(call) -> dict:
    """What call() raised: its class and, for a CudaFault, where the fault was attributed."""
    try:
        call()
    except Exception as e:  # noqa: BLE001 - the class is the result
        return {"type": type(e).__name__, "op": getattr(e, "op", None), "detected_by": getattr(e, "detected_by", None),
                "message": str(e)[:600]}
    return {"type": None}


def quantize():
    return ops.quantize_int8_rowwise(torch.randn(8, 256, dtype=torch.bfloat16))


def linear(m=64, k=256, n=64):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    w = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
    scale = torch.rand(n, generator=g) * 0.01 + 0.001
    return x, w, scale


# ---- finding 1: a failed capture query ----

@scenario
def sticky_fault_then_checked_op():
    """An earlier kernel hit an illegal address (a sticky error from then on); the next op, in
    boundary mode, asks whether its stream is captured and must report the fault, blamed on
    the op that caused it, not refuse as if captured."""
    with standin.driver():
        x = torch.randn(8, 256, dtype=torch.bfloat16)
        q, s = ops.quantize_int8_rowwise(x)
        standin.inject("illegal_address", 1)
        ops.quantize_int8_rowwise(x)  # its kernel faults; launch mode queues and returns
        with ckc.checking("boundary"):
            result = raised(lambda: ops.dequantize_int8_simple(q, s))
    return {**result, "refused": standin.violations()}


@scenario
def destroyed_stream():
    """The op's stream was destroyed (by its owner) after its last use: a clear error about the
    stream, not a capture refusal."""
    stream = standin.stream_new(0)
    with standin.driver(stream=stream):
        x = torch.randn(8, 256, dtype=torch.bfloat16)
        standin.inject("destroy_stream", 1)
        ops.quantize_int8_rowwise(x)
        result = raised(lambda: ops.quantize_int8_rowwise(x))
    return {**result, "refused": standin.violations()}


# ---- finding 2: cuBLASLt's workspace ----

@scenario
def gemm_with_the_driver_out_of_memory():
    """Every cuMemAlloc fails (torch's cache holds the GPU's memory): int8_linear still runs,
    on torch's memory, and gives the CPU path's bits."""
    x, w, scale = linear()
    want = ops.int8_linear(x, w, scale)
    with standin.driver():
        quantize()  # the device's first op: its one-time set-up is not what this is about
        standin.memory_full(True)
        result = raised(lambda: ops.int8_linear(x, w, scale))
        got = ops.int8_linear(x, w, scale) if result["type"] is None else None
    return {**result, "equal": got is not None and torch.equal(got, want), "refused": standin.violations()}


@scenario
def gemm_on_many_streams():
    """A caller that makes a new stream per call: the driver memory our GEMMs take stays bounded."""
    x, w, scale = linear()
    with standin.driver():
        ops.int8_linear(x, w, scale)
    before = standin.allocated_bytes()
    for _ in range(8):
        with standin.driver(stream=standin.stream_new(0)):
            ops.int8_linear(x, w, scale)
    return {"grew": standin.allocated_bytes() - before, "refused": standin.violations()}


# ---- finding 3: the first op on a device ----

@scenario
def first_op_behind_a_hung_default_stream():
    """Torch's default stream never completes (a hung kernel of the model): the first op on the
    device queues its work and returns; nothing blocks on that stream before a hang record."""
    standin.hang_stream(None, 0)
    with standin.driver():
        result = raised(quantize)
    return {**result, "refused": standin.violations()}


@scenario
def first_op_beside_a_global_capture():
    """Another thread captures a stream in global mode (torch's default): the first op on the
    device, on another stream, neither fails nor invalidates that capture."""
    captured = standin.stream_new(0)
    began = threading.Event()
    done = threading.Event()
    ended = {}

    def capture():
        standin.set_context(0)
        standin.capture_begin(captured, "global")
        began.set()
        done.wait(60)
        ended["code"] = standin.capture_end(captured)

    t = threading.Thread(target=capture)
    t.start()
    began.wait(60)
    with standin.driver(stream=standin.stream_new(0)):
        result = raised(quantize)
    done.set()
    t.join()
    return {**result, "capture_end": ended.get("code"), "refused": standin.violations()}


# ---- finding 4: fence() on a thread with no current context ----

@scenario
def fence_on_a_thread_without_a_context():
    """A staged copy whose completion never lands (its stream hangs after the copy): fence() on
    a fresh thread (no current context) must see the hang, not call the copy faulted."""
    src = torch.randn(64, 64)
    dst = torch.empty_like(src)
    result = {}
    with standin.driver():
        quantize()
        standin.inject("hang", 1)  # the copy's completion mark
        ckc.stage(dst, src)

        def fence():
            result.update(raised(lambda: ckc.fence(src)))

        t = threading.Thread(target=fence)
        t.start()
        t.join()
    return {**result, "refused": standin.violations()}


# ---- finding 6: faults inside cuBLASLt ----

@scenario
def gemm_after_a_kernel_fault():
    """int8_linear's quantizer kernel hits an illegal address: cuBLASLt then fails, and the op
    reports the device fault, attributed, not a plain cuBLASLt error."""
    x, w, scale = linear()
    with standin.driver():
        quantize()
        ops.int8_linear(x, w, scale)
        standin.inject("illegal_address", 1)
        result = raised(lambda: ops.int8_linear(x, w, scale))
    return {**result, "refused": standin.violations()}


@scenario
def gemm_failing_on_its_own():
    """cuBLASLt fails with no fault on the device: cuBLASLt's own error, named, not a device fault."""
    x, w, scale = linear()
    with standin.driver():
        ops.int8_linear(x, w, scale)
        standin.inject("blas_failed", 1)
        result = raised(lambda: ops.int8_linear(x, w, scale))
    return {**result, "refused": standin.violations()}


@scenario
def first_gemm_inside_a_capture():
    """The device's first GEMM happens inside this thread's global-mode capture: cuBLASLt's handle
    is made without breaking the capture."""
    x, w, scale = linear()
    stream = standin.stream_new(0)
    with standin.driver(stream=stream):
        quantize()  # the device's first op (its set-up is finding 3's)
        standin.capture_begin(stream, "global")
        result = raised(lambda: ops.int8_linear(x, w, scale))
        code = standin.capture_end(stream)
    return {**result, "capture_end": code, "refused": standin.violations()}


# ---- finding 7: the thread's current context ----

@scenario
def an_op_leaves_the_threads_context_as_it_found_it():
    """A thread with no current context runs an op on device 1: afterwards it still has none (the
    CUDA runtime would otherwise take device 1 for this thread's current device)."""
    found = {}

    def work():
        found["before"] = standin.current_context()
        with standin.driver(device=1):
            found.update(raised(quantize))
        found["after"] = standin.current_context()

    t = threading.Thread(target=work)
    t.start()
    t.join()
    return {**found, "refused": standin.violations()}


# ---- findings 5 and 8: drivers and architectures ----

@scenario
def an_op_on_this_driver():
    """One op of each kernel family's first fatbin on the configured GPU and driver."""
    with standin.driver():
        result = raised(quantize)
    return {**result, "refused": standin.violations()}


def main(name: str) -> None:
    result = SCENARIOS[name]()
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
