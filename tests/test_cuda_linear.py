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
