# SPDX-License-Identifier: Apache-2.0
"""The stand-in driver's scenarios (tests/test_standin_driver.py) on a real GPU and driver, where
a GPU can show them without a fault injected: the GEMM's workspace on a GPU whose memory torch's
cache holds, the first op beside another thread's global-mode capture, the first GEMM inside a
capture, fence() on a thread that never touched the GPU, and a thread's current device after an
op on another GPU.  Each first-op scenario runs in a process of its own (a device's first op
happens once per process).  benchmarks/gpu_check.py runs them (step tests)."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

import comfy_kitchen_c as ckc
from comfy_kitchen_c import ops

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
ROOT = Path(__file__).resolve().parent.parent


def linear_args(device, m=64, k=256, n=64):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    w = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
    scale = torch.rand(n, generator=g) * 0.01 + 0.001
    return x.to(device), w.to(device), scale.to(device)


def in_fresh_process(code: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout.strip().splitlines()[-1]


def test_int8_linear_runs_when_torchs_cache_holds_the_gpus_memory_small():
    """The driver has no memory left, torch's cache has it: the GEMM's workspace is torch's, so the
    op runs and gives the CPU path's bits (cuMemAlloc of a workspace of our own would fail)."""
    x, w, scale = linear_args("cuda")
    want = ops.int8_linear(x.cpu(), w.cpu(), scale.cpu())
    held = []
    try:
        while True:
            held.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError:
        pass
    try:
        while True:
            held.append(torch.empty(64 << 20, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError:
        pass
    held.pop()  # room for the op's tensors, in torch's cache only
    held.pop()
    del held
    got = ops.int8_linear(x, w, scale)
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    assert torch.equal(got.cpu(), want)


FIRST_OP_BESIDE_A_CAPTURE = """
import threading, torch
from comfy_kitchen_c import ops
x = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
# torch's own allocations for the op's outputs come from its cache (a cudaMalloc of torch's
# during the other thread's global capture would be torch's to answer for, not ours)
warm = [torch.empty(64, 256, dtype=torch.int8, device="cuda"), torch.empty(64, device="cuda")]
del warm
ready, go = threading.Event(), threading.Event()
result = {}
def capture():
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    y = torch.empty(64, 256, device="cuda")
    with torch.cuda.stream(s):
        with torch.cuda.graph(g, stream=s, capture_error_mode="global"):
            y.copy_(x.float() * 2)
            ready.set()
            go.wait(60)
    g.replay()
    torch.cuda.synchronize()
    result["captured"] = bool(torch.equal(y, x.float() * 2))
t = threading.Thread(target=capture)
t.start()
ready.wait(60)
q, s = ops.quantize_int8_rowwise(x)   # this process's first op, while the capture is open
go.set()
t.join()
torch.cuda.synchronize()
print(result.get("captured"), q.shape[0])
"""


def test_the_first_op_leaves_another_threads_global_capture_intact_small():
    assert in_fresh_process(FIRST_OP_BESIDE_A_CAPTURE) == "True 64"


FIRST_GEMM_IN_A_CAPTURE = """
import torch
from comfy_kitchen_c import ops
g = torch.Generator().manual_seed(3)
x = torch.randn(64, 256, generator=g).to(torch.bfloat16).cuda()
w = torch.randint(-127, 128, (64, 256), generator=g, dtype=torch.int8).cuda()
scale = (torch.rand(64, generator=g) * 0.01 + 0.001).cuda()
ops.quantize_int8_rowwise(x)  # the device's first op outside the capture; its first GEMM inside
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph, capture_error_mode="global"):
    out = ops.int8_linear(x, w, scale)
graph.replay()
torch.cuda.synchronize()
print(bool(torch.equal(out.cpu(), ops.int8_linear(x.cpu(), w.cpu(), scale.cpu()))))
"""


def test_the_first_gemm_inside_a_global_capture_small():
    assert in_fresh_process(FIRST_GEMM_IN_A_CAPTURE) == "True"


def test_fence_on_a_thread_that_never_touched_the_gpu_small():
    src = torch.randn(256, 256).pin_memory()
    dst = torch.empty(256, 256, device="cuda")
    ckc.stage(dst, src)
    errors = []

    def fence():
        try:
            ckc.fence(src)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=fence)
    t.start()
    t.join()
    torch.cuda.synchronize()
    assert errors == [] and torch.equal(dst.cpu(), src)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_an_op_on_another_gpu_leaves_the_threads_current_device_small():
    found = {}

    def work():
        found["before"] = torch.cuda.current_device()
        ops.quantize_int8_rowwise(torch.randn(8, 256, device="cuda:1", dtype=torch.bfloat16))
        found["after"] = torch.cuda.current_device()
        found["allocated_on"] = torch.empty(4, device="cuda").device.index

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert found == {"before": 0, "after": 0, "allocated_on": 0}
