# SPDX-License-Identifier: Apache-2.0
"""int8_linear's GPU path on the emulated device, beyond parity at small shapes
(tests/test_int8_linear.py): the epilogue's grid walk where the chunk has more vectors than
the capped grid has threads (8 outputs per step, or 1), with unaligned per-channel vectors;
the GEMM seam's plan cache, algorithm filter and the caller's workspace (csrc/gpu/blas_plan.c, which the
emulated device runs against heuristic answers the tests make up); and the scales given as
Python numbers, which must never become a host-to-device copy (a synchronization on a GPU,
and an error inside a CUDA-graph capture)."""
import contextlib

import pytest
import torch
from torch.overrides import TorchFunctionMode

from comfy_kitchen_c import ops
from comfy_kitchen_c.testing import emulated_device, emulated_only

from conftest import assert_bitwise_equal

emu = pytest.importorskip("comfy_kitchen_c._C_emu")

# kernels/linear.cu: CKC_EPI_MAX_BLOCKS blocks of CKC_EPI_THREADS threads at most
GRID_THREADS = 1024 * 256
MIB = 1 << 20


def linear_case(m, k, n, out_dtype=torch.bfloat16, bias_dtype=torch.bfloat16, offset=0, seed=0):
    """Arguments of int8_linear; offset > 0 makes weight_scale and bias views that start
    `offset` elements into their storage (not 16-byte aligned)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    w = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
    ws = (torch.rand(n + offset, generator=g) * 0.01 + 0.001)[offset:]
    bias = (torch.randn(n + offset, generator=g) * 4).to(bias_dtype)[offset:]
    return x, w, ws, bias, out_dtype


def on_emulated(*args):
    with emulated_device():
        return ops.int8_linear(*args)


# ---- the epilogue's walk ----

@pytest.mark.parametrize("m,n,offset,out_dtype,bias_dtype", [
    pytest.param(400, 5600, 0, torch.bfloat16, torch.bfloat16, id="vec8-wraps-columns"),
    pytest.param(400, 5600, 1, torch.float32, torch.float16, id="vec8-unaligned-scale-and-bias"),
    pytest.param(120, 2401, 0, torch.float16, torch.float32, id="scalar-wraps"),
])
def test_epilogue_walk_covers_every_output_beyond_the_grid(m, n, offset, out_dtype, bias_dtype):
    """More vectors than the capped grid has threads: every thread takes several steps and
    the (row, column) walk carries columns into rows; bit for bit the CPU path's results."""
    per_row = n // 8 if n % 8 == 0 else n
    assert m * per_row > GRID_THREADS and (GRID_THREADS % per_row) != 0
    args = linear_case(m, 64, n, out_dtype, bias_dtype, offset)
    assert_bitwise_equal(on_emulated(*args), ops.int8_linear(*args), f"emulated vs cpu {m}x{n}")


# ---- the plan cache, the filter and the workspace ----

class OnStream:
    """The emulated module with int8_linear's stream argument replaced (ops pass 0 for CPU
    tensors): the emulated device keeps any number of streams by handle."""

    def __init__(self, stream: int):
        self.stream = stream

    def __getattr__(self, name):
        fn = getattr(emu, name)
        if name != "int8_linear":
            return fn

        def call(*args):
            args = list(args)
            args[-3] = self.stream  # (..., stream, nthreads, check)
            return fn(*args)
        return call


@contextlib.contextmanager
def stream(handle: int):
    token = ops.KERNELS.set(OnStream(handle))
    try:
        yield
    finally:
        ops.KERNELS.reset(token)


DEFAULT_HEURISTIC = [(1, 1 * MIB, 4, 1), (1, 2 * MIB, 1, 0), (1, 0, 1, 0)]  # blas_emu.c's


@pytest.fixture
def blas():
    """A fresh plan cache and the default heuristic answer, restored after."""
    emulated_only("the GEMM heuristic and counters of _C_emu")
    emu.blas_reset(256)
    emu.blas_fake_heuristic(DEFAULT_HEURISTIC)
    yield emu
    emu.blas_fake_capturing(False)
    emu.blas_fake_heuristic(DEFAULT_HEURISTIC)
    emu.blas_reset(256)


def aligned(t: torch.Tensor) -> torch.Tensor:
    """A copy of t that starts on a 256-byte boundary, as CUDA allocations do (the plan's key
    holds the pointers' alignment, up to 256; host allocations vary)."""
    storage = torch.empty(t.numel() * t.element_size() + 256, dtype=torch.uint8)
    start = -storage.data_ptr() % 256
    out = storage[start:start + t.numel() * t.element_size()].view(t.dtype).view(t.shape)
    out.copy_(t)
    return out


def gemm(m, n=48, k=64, seed=0):
    """One int8_linear through the GEMM on the emulated device, checked against the CPU path."""
    x, w, ws, bias, out_dtype = linear_case(m, k, n, seed=seed)
    args = (x, aligned(w), ws, bias, out_dtype)
    assert_bitwise_equal(on_emulated(*args), ops.int8_linear(*args), f"gemm {m}x{k}x{n}")


def test_a_plan_is_made_once_per_shape(blas):
    gemm(64)
    assert (blas.blas_stats()["misses"], blas.blas_stats()["hits"], blas.blas_stats()["entries"]) == (1, 0, 1)
    gemm(64, seed=1)
    gemm(50)  # padded to the same 64 rows: the same problem
    assert (blas.blas_stats()["misses"], blas.blas_stats()["hits"]) == (1, 2)
    gemm(100)  # 128 rows
    gemm(64, n=96)
    gemm(1)  # one row: the GEMV, no GEMM
    s = blas.blas_stats()
    assert (s["misses"], s["hits"], s["entries"]) == (3, 2, 3)


def test_a_full_cache_evicts_round_robin(blas):
    blas.blas_reset(2)
    for m in (32, 64, 96):
        gemm(m)
    s = blas.blas_stats()
    assert (s["misses"], s["evictions"], s["entries"], s["capacity"]) == (3, 1, 2, 2)
    gemm(32)  # evicted: asks again
    gemm(96)  # still cached
    s = blas.blas_stats()
    assert (s["misses"], s["hits"], s["evictions"]) == (4, 1, 2)


def test_the_filter_takes_the_heuristics_order_skipping_split_k_and_reductions(blas):
    gemm(64)
    s = blas.blas_stats()
    # candidate 0 splits K with a reduction: skipped; candidate 1 needs workspace: taken
    assert (s["last_choice"], s["rejected"]) == (1, 1)
    blas.blas_reset()
    blas.blas_fake_heuristic([(1, 0, 2, 0), (1, 0, 1, 3), (0, 0, 1, 0), (1, 64 * MIB, 1, 0), (1, MIB, 0, 0)])
    gemm(64)
    s = blas.blas_stats()
    assert (s["last_choice"], s["rejected"]) == (4, 4)  # split-K, reduction, failed state, too much workspace


def test_no_acceptable_algorithm_is_a_clear_error(blas):
    blas.blas_fake_heuristic([(1, 0, 2, 0), (1, 0, 1, 1)])
    with pytest.raises(RuntimeError, match="no algorithm without split-K or a reduction scheme"):
        on_emulated(*linear_case(64, 64, 48))
    assert blas.blas_stats()["entries"] == 0


def test_the_gemm_runs_on_the_callers_workspace_or_on_none(blas, monkeypatch):
    """The workspace is the caller's (torch's allocator: ops' gemm_workspace), the same on a new
    stream and inside a capture, and nothing of the seam allocates; when torch cannot give one
    (gemm_workspace answers None), the GEMM runs on an algorithm that needs none."""
    from comfy_kitchen_c import linear
    gemm(64)
    assert (blas.blas_stats()["last_workspace"], blas.blas_stats()["last_choice"]) == (4 * MIB, 1)
    blas.blas_fake_capturing(True)
    with stream(9002):  # a stream first met while capturing: the caller's workspace still
        gemm(64)
    assert blas.blas_stats()["last_workspace"] == 4 * MIB
    blas.blas_fake_capturing(False)
    blas.blas_reset()
    monkeypatch.setattr(linear, "gemm_workspace", lambda device: None)
    x, w, ws, b, dt = linear_case(64, 64, 48)
    assert_bitwise_equal(on_emulated(x, w, ws, b, dt), ops.int8_linear(x, w, ws, b, dt), "without a workspace")
    assert (blas.blas_stats()["last_workspace"], blas.blas_stats()["last_choice"]) == (0, 2)


# ---- scales given as Python numbers ----

class NoHostToDevice(TorchFunctionMode):
    """Fails on what would copy a Python value or host tensor to a GPU (a synchronization
    there): torch.tensor/as_tensor, .to()/.cuda()/copy_() and reading a value back."""
    FORBIDDEN = {"tensor", "as_tensor", "to", "cuda", "copy_", "item", "tolist", "__float__"}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in self.FORBIDDEN:
            raise AssertionError(f"{func.__name__} in an op given a number")
        return func(*args, **(kwargs or {}))


def test_the_guard_catches_a_host_copy():
    with pytest.raises(AssertionError, match="tensor in an op"):
        with NoHostToDevice():
            torch.tensor([0.5], dtype=torch.float32)


@pytest.mark.parametrize("value", [0.05, 3], ids=["float", "int"])
def test_nvfp4_scales_given_as_numbers_make_no_host_copy(value):
    x = torch.randn(32, 64).to(torch.bfloat16)
    as_tensor = torch.tensor([float(value)], dtype=torch.float32)
    with emulated_device():
        want_q, want_s = ops.quantize_nvfp4(x, as_tensor)
        want_d = ops.dequantize_nvfp4(want_q, as_tensor, want_s, torch.bfloat16)
        with NoHostToDevice():
            q, s = ops.quantize_nvfp4(x, value)
            d = ops.dequantize_nvfp4(q, value, s, torch.bfloat16)
            r, rs = ops.quantize_and_rotate_nvfp4(x, value, 16)
    assert_bitwise_equal(q, want_q, "quantize_nvfp4")
    assert_bitwise_equal(s.view(torch.uint8), want_s.view(torch.uint8), "block scales")
    assert_bitwise_equal(d, want_d, "dequantize_nvfp4")
    assert r.shape == q.shape and rs.shape == s.shape


def test_tensorwise_scale_given_as_a_number_makes_no_host_copy():
    x = torch.randn(8, 64).to(torch.bfloat16)
    with emulated_device():
        want_q, want_s = ops.quantize_int8_tensorwise(x, torch.tensor(0.02))
        with NoHostToDevice():
            q, s = ops.quantize_int8_tensorwise(x, 0.02)
    assert s.dtype == torch.float32 and s.shape == () and float(s) == float(want_s)
    assert_bitwise_equal(q, want_q, "quantize_int8_tensorwise")


def test_a_bug_planted_in_the_emulated_gemm_fails_the_comparison(blas):
    """The emulated GEMM is a reference of its own (blas_emu.c), not the CPU path's: a bug planted
    in it (each sum missing its last term) makes the emulated int8_linear differ from the CPU's,
    so `gemm`'s comparison can fail; removed, they agree again."""
    gemm(64)
    blas.blas_plant(1)
    try:
        with pytest.raises(AssertionError):
            gemm(64)
    finally:
        blas.blas_plant(0)
    gemm(64)
    with pytest.raises(ValueError, match="blas_plant: argument 'bug'"):
        blas.blas_plant(2)


# ---- the few-row GEMV (kernels/linear.cu: up to CKC_LINEAR_GEMV_ROWS rows, no GEMM) ----

@pytest.mark.parametrize("m", [1, 2, 3, 5, 8])
# K: under one step of the warp (64), scalar tails (250, 1040), and the steps a lane issues
# CKC_GEMV_DEPTH at a time: once, then one alone, then a tail (2568); twice exactly (4096).
@pytest.mark.parametrize("k,n", [(64, 48), (250, 9), (1040, 40), (2568, 12), (4096, 5)])
def test_few_rows_take_the_gemv_bit_for_bit(blas, m, k, n):
    """Up to 8 rows: the GEMV (each weight row read once for every row), no GEMM and no padded
    weight copy, whatever K's alignment (a scalar tail past the 16-code steps); the CPU path's
    bits, with the residual form's rows where they belong."""
    from comfy_kitchen_c import weight_cache

    x, w, ws, bias, out_dtype = linear_case(m, k, n, seed=m)
    g = torch.Generator().manual_seed(k + n)
    residual = torch.randn(m, n, generator=g).to(torch.bfloat16)
    rscale = torch.rand(n, generator=g)
    before = dict(weight_cache.stats)
    with emulated_device():
        got = ops.int8_linear(x, w, ws, bias, out_dtype, residual=residual, residual_scale=rscale)
    want = ops.int8_linear(x, w, ws, bias, out_dtype, residual=residual, residual_scale=rscale)
    assert_bitwise_equal(got, want, f"gemv {m}x{k}x{n}")
    assert blas.blas_stats()["misses"] == 0  # no GEMM plan was asked for
    assert weight_cache.stats["made"] == before["made"]  # the weight read as it is


def test_nine_rows_take_the_gemm(blas):
    gemm(9)
    assert blas.blas_stats()["misses"] == 1
