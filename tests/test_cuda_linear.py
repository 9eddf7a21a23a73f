# SPDX-License-Identifier: Apache-2.0
"""int8_linear and scaled_mm_nvfp4 on a real CUDA GPU (tests/test_cuda.py's style; skipped,
with the reason, without a CUDA GPU or a CUDA build).

int8_linear: the GPU path against the CPU path.  The int32 sums are exact on both (cuBLASLt
IMMA or the GEMV's dp4a), the quantizer and the epilogue do the CPU's arithmetic in the same
order, so without an activation the results are bit for bit equal; with one, CUDA's tanhf /
expf (2 ulp) may differ from libm's, and the check is test_int8_linear's activation bound.
Beyond that: the caller's stream, the device guard, padded and misaligned shapes, the memory
bound measured with torch.cuda.max_memory_allocated, and (compute capability 10.0+) the FP4
GEMM against its definition.  Ids with "small" are the compute-sanitizer subset."""
import pytest
import torch

import comfy_kitchen_c
from comfy_kitchen_c import ops

from conftest import assert_bitwise_equal
from test_cuda import SKIP_REASON, SPIN_CYCLES
from test_int8_linear import assert_activation_close, make
from test_scaled_mm_nvfp4 import assert_close_to_reference
from test_scaled_mm_nvfp4 import make as make_fp4

pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or "")


@pytest.fixture
def gpu() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device())


def to(device, *tensors):
    return tuple(t.to(device) if isinstance(t, torch.Tensor) else t for t in tensors)


CASES = [
    # (m, k, n, dtype, scale, bias, group, act)
    pytest.param(1, 3072, 3072, torch.bfloat16, "channel", True, 0, None, id="small-gemv"),
    pytest.param(1, 67, 9, torch.float16, "scalar", False, 0, None, id="small-gemv-tail"),
    pytest.param(3, 100, 30, torch.bfloat16, "scalar", True, 0, None, id="small-padded"),
    pytest.param(64, 67, 17, torch.float32, "column", False, 0, None, id="small-odd"),
    pytest.param(257, 512, 96, torch.bfloat16, "channel", True, 256, None, id="small-convrot"),
    pytest.param(33, 256, 40, torch.bfloat16, "channel", True, 16, "gelu_tanh", id="small-gelu"),
    pytest.param(33, 256, 40, torch.float16, "channel", False, 256, "swiglu", id="small-swiglu"),
    pytest.param(4096, 3072, 5120, torch.bfloat16, "channel", True, 256, None, id="dit"),
]


@pytest.mark.parametrize("m,k,n,dtype,scale,bias,group,act", CASES)
def test_int8_linear_matches_the_cpu_path(gpu, m, k, n, dtype, scale, bias, group, act):
    x, w, ws, b = make(m, k, n, dtype, scale, bias, act=act)
    args = (x, w, ws, b, torch.bfloat16, group > 0, group or 256, act)
    cpu = ops.int8_linear(*args)
    out = ops.int8_linear(*to(gpu, *args)).cpu()
    if act is None:
        assert_bitwise_equal(out, cpu, "cuda vs cpu")
    else:
        assert_activation_close(out, cpu, f"cuda vs cpu ({act})")


def test_int8_linear_misaligned_weight_small(gpu):
    x, _, ws, b = make(6, 64, 32, torch.bfloat16, "channel", bias=True)
    storage = torch.randint(-127, 128, (32 * 64 + 1,), dtype=torch.int8)
    w = storage[1:].view(32, 64)
    for rows in (x, x[:1]):
        cpu = ops.int8_linear(rows, w, ws, b)
        w_gpu = storage.to(gpu)[1:].view(32, 64)
        assert w_gpu.data_ptr() % 16 != 0
        assert_bitwise_equal(ops.int8_linear(*to(gpu, rows), w_gpu, *to(gpu, ws, b)).cpu(), cpu, "misaligned")


def test_int8_linear_on_the_current_stream_small(gpu):
    """On a side stream whose input is written late on that stream: a GEMM or kernel on any
    other stream would read zeros."""
    x, w, ws, b = make(64, 256, 48, torch.bfloat16, "channel", bias=True)
    side = torch.cuda.Stream(gpu)
    xs = torch.zeros_like(x, device=gpu)
    src = x.to(gpu)
    side.wait_stream(torch.cuda.current_stream(gpu))
    with torch.cuda.stream(side):
        torch.cuda._sleep(SPIN_CYCLES)
        xs.copy_(src)
        out = ops.int8_linear(xs, *to(gpu, w, ws, b))
    side.synchronize()
    assert_bitwise_equal(out.cpu(), ops.int8_linear(x, w, ws, b), "side stream")


def test_int8_linear_extra_memory_stays_under_the_bound(gpu):
    """M x N int32 would be 960 MiB here; with a 64 MiB bound the peak extra allocation of a
    call (beyond its inputs and output) stays under 64 MiB."""
    saved = comfy_kitchen_c.linear_memory_limit()
    comfy_kitchen_c.set_linear_memory_limit(64 << 20)
    try:
        m, k, n = 16384, 3072, 15360
        x = torch.randn(m, k, device=gpu, dtype=torch.bfloat16)
        w = torch.randint(-127, 128, (n, k), device=gpu, dtype=torch.int8)
        ws = torch.rand(n, device=gpu) * 0.01
        out = ops.int8_linear(x, w, ws)  # warm-up: cuBLASLt handle and workspace
        del out
        torch.cuda.synchronize(gpu)
        before = torch.cuda.memory_allocated(gpu)
        torch.cuda.reset_peak_memory_stats(gpu)
        out = ops.int8_linear(x, w, ws)
        torch.cuda.synchronize(gpu)
        extra = torch.cuda.max_memory_allocated(gpu) - before - out.numel() * out.element_size()
        assert extra <= 64 << 20, f"{extra / 2**20:.1f} MiB extra"
    finally:
        comfy_kitchen_c.set_linear_memory_limit(saved)


@pytest.mark.skipif(SKIP_REASON is None and torch.cuda.get_device_capability() < (10, 0),
                    reason="the block-scaled FP4 GEMM needs compute capability 10.0")
@pytest.mark.parametrize("m,n,k", [pytest.param(4, 16, 64, id="small"), pytest.param(256, 5120, 3072, id="dit")])
def test_scaled_mm_nvfp4_on_cublaslt(gpu, m, n, k):
    qa, qb, pa, pb, sa, sb, bias = make_fp4(m, n, k, torch.bfloat16, bias=True)
    out = ops.scaled_mm_nvfp4(*to(gpu, qa, qb, pa, pb, sa, sb, bias), torch.bfloat16).cpu()
    assert_close_to_reference(out, qa, qb, sa, sb, pa * pb, bias, torch.bfloat16, "cuBLASLt FP4")


# ---- the epilogue's vector path, the GEMM plans and workspaces, no synchronization ----

@pytest.mark.parametrize("out_dtype,bias_dtype", [(torch.bfloat16, torch.bfloat16), (torch.float32, torch.float16)])
def test_int8_linear_unaligned_scale_and_bias_small(gpu, out_dtype, bias_dtype):
    """Per-channel scales and a bias that start 4 and 2 bytes into their storage: the epilogue
    loads them element by element, its accumulator and output 16 bytes at a time."""
    x, w, _, _ = make(70, 256, 48, torch.bfloat16, "channel")
    ws = (torch.rand(49) * 0.01 + 0.001)[1:]
    b = (torch.randn(49) * 4).to(bias_dtype)[1:]
    cpu = ops.int8_linear(x, w, ws, b, out_dtype)
    ws_g, b_g = torch.rand(49, device=gpu)[1:], torch.randn(49, device=gpu).to(bias_dtype)[1:]
    ws_g.copy_(ws)
    b_g.copy_(b)
    assert ws_g.data_ptr() % 16 and b_g.data_ptr() % 16
    out = ops.int8_linear(*to(gpu, x, w), ws_g, b_g, out_dtype).cpu()
    assert_bitwise_equal(out, cpu, "unaligned scale and bias")


def test_int8_linear_plan_is_reused_small(gpu):
    """The second call of a shape asks cuBLASLt's heuristic nothing: its plan is cached."""
    from comfy_kitchen_c import _C

    x, w, ws, b = to(gpu, *make(64, 256, 48, torch.bfloat16, "channel", bias=True))
    ops.int8_linear(x, w, ws, b)
    before = _C.blas_stats()
    for _ in range(3):
        ops.int8_linear(x, w, ws, b)
    after = _C.blas_stats()
    assert after["misses"] == before["misses"] and after["hits"] == before["hits"] + 3
    # the workspace is torch's (comfy_kitchen's sizes): 32 MiB from Hopper on, else 4 MiB
    assert after["last_choice"] >= 0 and after["last_workspace"] == (32 if torch.cuda.get_device_capability(gpu)[0]
                                                                     >= 9 else 4) << 20


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_int8_linear_plans_are_per_device_small():
    from comfy_kitchen_c import _C

    args = make(64, 256, 48, torch.bfloat16, "channel")
    for index in (0, 1):
        with torch.cuda.device(index):
            ops.int8_linear(*to(torch.device("cuda", index), *args))
    before = _C.blas_stats()
    for index in (0, 1):
        with torch.cuda.device(index):
            ops.int8_linear(*to(torch.device("cuda", index), *args))
    assert _C.blas_stats()["hits"] == before["hits"] + 2 and _C.blas_stats()["misses"] == before["misses"]


def test_scales_given_as_numbers_do_not_synchronize_small(gpu):
    x = torch.randn(32, 64, device=gpu).to(torch.bfloat16)
    want_q, want_s = ops.quantize_nvfp4(x, torch.tensor(0.05, device=gpu))
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        q, s = ops.quantize_nvfp4(x, 0.05)
        d = ops.dequantize_nvfp4(q, 0.05, s, torch.bfloat16)
        t, ts = ops.quantize_int8_tensorwise(x, 0.02)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert_bitwise_equal(q.cpu(), want_q.cpu(), "quantize_nvfp4 with a number")
    assert_bitwise_equal(d.cpu(), ops.dequantize_nvfp4(want_q, torch.tensor(0.05, device=gpu), want_s,
                                                       torch.bfloat16).cpu(), "dequantize_nvfp4 with a number")
    assert float(ts) == pytest.approx(0.02) and t.dtype == torch.int8


def test_int8_linear_is_captured_in_a_cuda_graph_small(gpu):
    """Captured on a stream it never ran on (torch's capture stream): the GEMM's workspace comes
    from torch's allocator (the graph's pool), nothing of ours allocates device memory, and the
    replay gives the eager bits."""
    from comfy_kitchen_c import _C

    x, w, ws, b = to(gpu, *make(96, 512, 64, torch.bfloat16, "channel", bias=True))
    want = ops.int8_linear(x, w, ws, b, torch.bfloat16, True, 256)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = ops.int8_linear(x, w, ws, b, torch.bfloat16, True, 256)
        q, s = ops.quantize_nvfp4(x, 0.05)
    graph.replay()
    torch.cuda.synchronize()
    assert_bitwise_equal(out.cpu(), want.cpu(), "int8_linear from a CUDA graph")
    assert_bitwise_equal(q.cpu(), ops.quantize_nvfp4(x, 0.05)[0].cpu(), "quantize_nvfp4 from a CUDA graph")
    assert _C.blas_stats()["last_workspace"] > 0  # the capture's GEMM had torch's workspace
