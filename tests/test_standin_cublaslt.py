# SPDX-License-Identifier: Apache-2.0
"""The stand-in cuBLASLt (tests/cuda_standin/standin_cublaslt.c), built here with gcc into a
shared library together with a fake of the driver side it calls (tests/cuda_standin/lt_harness.c:
work runs on the stream at once, or is recorded as a capture's and replayed, or never runs on a
hung stream; capture refusals, sticky errors, injected failures and compute capabilities are
switchable) and driven through ctypes the way csrc/gpu/blas_cublaslt.c drives cuBLASLt: "TN"
descriptors, a preference with the workspace, reduction mask and pointer alignments, the heuristic,
the algorithm filter, cublasLtMatmul.

Each GEMM is checked against a plain computation: int8 exactly against numpy's int64 product
(wrapped to int32); NVFP4 and MXFP8 bit for bit against their definition (comfy_kitchen's eager
dequantization of each operand, summed in float32 in k's order, as csrc/gpu/blas_emu.c sums) and
against the emulated device itself (comfy_kitchen_c's scaled_mm_nvfp4 / scaled_mm_mxfp8 on it).
Then the refusals a real cuBLASLt makes: IMMA shapes or alignments it cannot take (no algorithm),
block-scaled GEMMs before compute capability 10.0, a cublasLtCreate that a capture forbids, too
small a workspace, misaligned pointers, an algorithm of another problem, injected failures."""
import ctypes
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "tests" / "cuda_standin"
SOURCES = [str(STANDIN / "standin_cublaslt.c"), str(STANDIN / "lt_harness.c")]
WARNINGS = ["-Wall", "-Wextra", "-Werror", "-Wvla", "-Wpedantic"]

pytestmark = pytest.mark.skipif(os.name == "nt" or shutil.which("gcc") is None, reason="needs gcc (Linux)")

# cuBLAS / cuBLASLt values (cublas_api.h, cublasLt.h, library_types.h of CUDA 13.0)
OK, NOT_INITIALIZED, INVALID_VALUE, ARCH_MISMATCH, EXECUTION_FAILED, NOT_SUPPORTED = 0, 1, 7, 8, 13, 15
R_32F, R_16F, R_8I, R_32I, R_16BF, R_8F_E4M3, R_4F_E2M1 = 0, 2, 3, 10, 14, 28, 33
COMPUTE_32F, COMPUTE_32I = 68, 72
OP_N, OP_T = 0, 1
DESC_POINTER_MODE, DESC_TRANSA, DESC_TRANSB, DESC_EPILOGUE, DESC_BIAS_POINTER = 2, 3, 4, 7, 8
DESC_A_SCALE_POINTER, DESC_B_SCALE_POINTER, DESC_BIAS_DATA_TYPE = 17, 18, 26
DESC_A_SCALE_MODE, DESC_B_SCALE_MODE = 31, 32
POINTER_HOST, POINTER_DEVICE, EPILOGUE_BIAS, VEC16_UE4M3, VEC32_UE8M0 = 0, 1, 4, 1, 2
PREF_MAX_WORKSPACE, PREF_REDUCTION_MASK, PREF_ALIGN_A = 1, 3, 5
LAYOUT_ROWS = 2
CONFIG_SPLITK, CONFIG_REDUCTION = 2, 3
INJECT_BLAS_FAILED = 5
STREAM = 0x1000  # any stream the fake takes (0xBAD: an unknown one)
MiB = 1 << 20


class Algo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class Result(ctypes.Structure):
    _fields_ = [("algo", Algo), ("workspace_size", ctypes.c_size_t), ("state", ctypes.c_int),
                ("waves", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


def build(out: Path, flags=("-std=c11", "-O2")) -> ctypes.CDLL:
    subprocess.run(["gcc", *flags, *WARNINGS, "-fPIC", "-shared", "-fvisibility=hidden", "-DCKCSI_LT_HARNESS",
                    f"-I{ROOT / 'csrc'}", *SOURCES, "-o", str(out), "-lpthread", "-lm"], check=True,
                   capture_output=True, text=True)
    lib = ctypes.CDLL(str(out))
    vp, sz, i = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
    protos = {
        "cublasLtGetVersion": (sz, []),
        "cublasLtCreate": (i, [ctypes.POINTER(vp)]),
        "cublasLtDestroy": (i, [vp]),
        "cublasLtMatmulDescCreate": (i, [ctypes.POINTER(vp), i, i]),
        "cublasLtMatmulDescDestroy": (i, [vp]),
        "cublasLtMatmulDescSetAttribute": (i, [vp, i, vp, sz]),
        "cublasLtMatmulDescGetAttribute": (i, [vp, i, vp, sz, ctypes.POINTER(sz)]),
        "cublasLtMatrixLayoutCreate": (i, [ctypes.POINTER(vp), i, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int64]),
        "cublasLtMatrixLayoutDestroy": (i, [vp]),
        "cublasLtMatrixLayoutGetAttribute": (i, [vp, i, vp, sz, ctypes.POINTER(sz)]),
        "cublasLtMatmulPreferenceCreate": (i, [ctypes.POINTER(vp)]),
        "cublasLtMatmulPreferenceDestroy": (i, [vp]),
        "cublasLtMatmulPreferenceSetAttribute": (i, [vp, i, vp, sz]),
        "cublasLtMatmulAlgoGetHeuristic": (i, [vp] * 7 + [i, ctypes.POINTER(Result), ctypes.POINTER(i)]),
        "cublasLtMatmulAlgoConfigGetAttribute": (i, [ctypes.POINTER(Algo), i, vp, sz, ctypes.POINTER(sz)]),
        "cublasLtMatmulAlgoCheck": (i, [vp] * 6 + [ctypes.POINTER(Algo), ctypes.POINTER(Result)]),
        "cublasLtMatmul": (i, [vp] * 13 + [vp, sz, vp]),
        "lt_harness_reset": (None, []),
        "lt_harness_set_device": (None, [i]),
        "lt_harness_set_cc": (None, [i, i]),
        "lt_harness_set_sticky": (None, [i, i]),
        "lt_harness_set_capture_refuses": (None, [i]),
        "lt_harness_set_stream": (None, [i, i]),
        "lt_harness_inject": (None, [i, i]),
        "lt_harness_replay": (i, []),
        "lt_harness_counter": (i, [i]),
        "lt_harness_last_refusal": (ctypes.c_char_p, []),
    }
    for name, (res, args) in protos.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    return build(tmp_path_factory.mktemp("standin_cublaslt") / "liblt.so")


def buffer(nbytes: int, offset: int = 0, align: int = 256) -> np.ndarray:
    """nbytes of host memory ("device memory" here) whose address is offset past a multiple of align."""
    raw = np.zeros(nbytes + 2 * align, dtype=np.uint8)
    start = (-raw.ctypes.data) % align + offset
    return raw[start:start + nbytes]


def ptr(a) -> int:
    return a.ctypes.data if isinstance(a, np.ndarray) else a.data_ptr()


def alignment(p: int) -> int:
    a = 256
    while a > 1 and p % a:
        a //= 2
    return a


class Lt:
    """The stand-in through ctypes, with the objects of one test (destroyed at its end)."""

    def __init__(self, lib):
        self.lib = lib
        self.owned = []

    def last(self) -> str:
        return self.lib.lt_harness_last_refusal().decode()

    def create(self):
        h = ctypes.c_void_p()
        assert self.lib.cublasLtCreate(ctypes.byref(h)) == OK, self.last()
        return h.value

    def set(self, fn, obj, attr, value, ctype=ctypes.c_int32):
        v = ctype(value)
        return fn(obj, attr, ctypes.byref(v), ctypes.sizeof(v))

    def desc(self, compute, scale, **attrs):
        d = ctypes.c_void_p()
        assert self.lib.cublasLtMatmulDescCreate(ctypes.byref(d), compute, scale) == OK
        self.owned.append((self.lib.cublasLtMatmulDescDestroy, d.value))
        for attr, (value, ctype) in attrs.items():
            assert self.set(self.lib.cublasLtMatmulDescSetAttribute, d.value, globals()[attr], value, ctype) == OK, \
                self.last()
        return d.value

    def layout(self, dtype, rows, cols, ld):
        layout = ctypes.c_void_p()
        assert self.lib.cublasLtMatrixLayoutCreate(ctypes.byref(layout), dtype, rows, cols, ld) == OK
        self.owned.append((self.lib.cublasLtMatrixLayoutDestroy, layout.value))
        return layout.value

    def pref(self, workspace=32 * MiB, mask=None, align=(256, 256, 256, 256)):
        p = ctypes.c_void_p()
        assert self.lib.cublasLtMatmulPreferenceCreate(ctypes.byref(p)) == OK
        self.owned.append((self.lib.cublasLtMatmulPreferenceDestroy, p.value))
        setp = self.lib.cublasLtMatmulPreferenceSetAttribute
        assert self.set(setp, p.value, PREF_MAX_WORKSPACE, workspace, ctypes.c_uint64) == OK
        if mask is not None:
            assert self.set(setp, p.value, PREF_REDUCTION_MASK, mask, ctypes.c_uint32) == OK
        for i, a in enumerate(align):
            assert self.set(setp, p.value, PREF_ALIGN_A + i, a, ctypes.c_uint32) == OK
        return p.value

    def heuristic(self, handle, plan, pref, requested=16):
        results = (Result * requested)()
        count = ctypes.c_int(-1)
        status = self.lib.cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a, plan.b, plan.c, plan.c, pref,
                                                         requested, results, ctypes.byref(count))
        return status, list(results[:max(count.value, 0)])

    def config(self, algo, attr):
        v, written = ctypes.c_int32(), ctypes.c_size_t()
        assert self.lib.cublasLtMatmulAlgoConfigGetAttribute(ctypes.byref(algo), attr, ctypes.byref(v), 4,
                                                              ctypes.byref(written)) == OK
        assert written.value == 4
        return v.value

    def check(self, handle, plan, algo):
        r = Result()
        status = self.lib.cublasLtMatmulAlgoCheck(handle, plan.desc, plan.a, plan.b, plan.c, plan.c,
                                                  ctypes.byref(algo), ctypes.byref(r))
        return status, r

    def close(self):
        for destroy, obj in reversed(self.owned):
            assert destroy(obj) == OK, self.last()


@pytest.fixture
def lt(lib):
    lib.lt_harness_reset()
    session = Lt(lib)
    yield session
    session.close()


class Plan:
    """blas_cublaslt.c's lt_describe_tn: row-major x[m, k] times w[n, k] into out[m, n] is, in
    cuBLASLt's column-major view, D[n, m] = W^T[n, k] . X[k, m] with A = w, B = x ("TN")."""

    def __init__(self, lt, compute, scale, in_type, out_type, m, n, k, ldw, ldx, ldc, **attrs):
        self.desc = lt.desc(compute, scale, DESC_TRANSA=(OP_T, ctypes.c_int32), DESC_TRANSB=(OP_N, ctypes.c_int32),
                            **attrs)
        self.a = lt.layout(in_type, k, n, ldw)
        self.b = lt.layout(in_type, k, m, ldx)
        self.c = lt.layout(out_type, n, m, ldc)


def filtered(results, ws_bytes):
    """blas_plan.c's filter: the heuristic's order, no split-K, no reduction scheme, workspace that fits."""
    return [r for r in results if r.state == OK and r.workspace_size <= ws_bytes]


def matmul(lt, handle, plan, alpha, w, x, out, algo, ws=None, ws_bytes=0, beta=None, stream=STREAM):
    """cublasLtMatmul as blas_cublaslt.c calls it: A = the weight, B = the activation, C = D = out."""
    alpha_p = alpha if isinstance(alpha, int) else ctypes.addressof(alpha)
    beta_p = beta if isinstance(beta, int) else ctypes.addressof(beta)
    return lt.lib.cublasLtMatmul(handle, plan.desc, alpha_p, ptr(w), plan.a, ptr(x), plan.b, beta_p, ptr(out),
                                 plan.c, ptr(out), plan.c, None if algo is None else ctypes.addressof(algo),
                                 None if ws is None else ptr(ws), ws_bytes, stream)


# ---- the handle, attributes, objects ----

def test_version_and_create(lt):
    assert 130000 <= lt.lib.cublasLtGetVersion() < 140000
    h = lt.create()
    assert lt.lib.cublasLtDestroy(h) == OK
    assert lt.lib.cublasLtDestroy(h) == NOT_INITIALIZED  # destroyed twice


def test_create_refusals(lt):
    h = ctypes.c_void_p()
    lt.lib.lt_harness_set_capture_refuses(1)
    assert lt.lib.cublasLtCreate(ctypes.byref(h)) == NOT_INITIALIZED
    assert lt.last().startswith("cublasLtCreate: not permitted while a stream capture is active")
    lt.lib.lt_harness_set_capture_refuses(0)
    lt.lib.lt_harness_set_device(-1)
    assert lt.lib.cublasLtCreate(ctypes.byref(h)) == NOT_INITIALIZED
    assert "CUDA_ERROR_INVALID_CONTEXT" in lt.last()
    lt.lib.lt_harness_set_device(0)
    lt.lib.lt_harness_set_sticky(0, 700)
    assert lt.lib.cublasLtCreate(ctypes.byref(h)) == NOT_INITIALIZED
    lt.lib.lt_harness_set_sticky(0, 0)
    assert lt.lib.cublasLtCreate(ctypes.byref(h)) == OK
    assert lt.lib.cublasLtDestroy(h.value) == OK


def test_attributes_are_validated_and_stored(lt):
    d = lt.desc(COMPUTE_32F, R_32F)
    setd, getd = lt.lib.cublasLtMatmulDescSetAttribute, lt.lib.cublasLtMatmulDescGetAttribute
    assert lt.set(setd, d, 9, 0) == INVALID_VALUE and "unknown attribute 9" in lt.last()
    assert lt.set(setd, d, 99, 0) == INVALID_VALUE
    assert lt.set(setd, d, DESC_TRANSA, OP_T, ctypes.c_int64) == INVALID_VALUE  # 8 bytes for an int32_t
    assert setd(d, DESC_TRANSA, None, 4) == INVALID_VALUE
    assert lt.set(setd, d, DESC_TRANSA, 7) == INVALID_VALUE  # not a cublasOperation_t
    assert lt.set(setd, d, DESC_BIAS_POINTER, 0x1234, ctypes.c_int32) == INVALID_VALUE  # a pointer is 8 bytes
    assert lt.set(setd, d, DESC_TRANSA, OP_T) == OK
    v, written = ctypes.c_int32(), ctypes.c_size_t()
    assert getd(d, DESC_TRANSA, ctypes.byref(v), 4, ctypes.byref(written)) == OK and (v.value, written.value) == (1, 4)
    assert getd(d, DESC_BIAS_POINTER, None, 0, ctypes.byref(written)) == OK and written.value == 8
    assert getd(d, DESC_BIAS_POINTER, None, 0, None) == INVALID_VALUE
    assert getd(d, DESC_TRANSA, ctypes.byref(v), 8, None) == INVALID_VALUE
    p = lt.pref()
    setp = lt.lib.cublasLtMatmulPreferenceSetAttribute
    assert lt.set(setp, p, 2, 0) == INVALID_VALUE
    assert lt.set(setp, p, PREF_MAX_WORKSPACE, 1, ctypes.c_uint32) == INVALID_VALUE  # uint64_t
    layout = lt.layout(R_8I, 12, 5, 16)
    rows = ctypes.c_uint64()
    assert lt.lib.cublasLtMatrixLayoutGetAttribute(layout, LAYOUT_ROWS, ctypes.byref(rows), 8, None) == OK
    assert rows.value == 12
    gone = ctypes.c_void_p()
    assert lt.lib.cublasLtMatrixLayoutCreate(ctypes.byref(gone), R_8I, 4, 4, 4) == OK
    assert lt.lib.cublasLtMatrixLayoutDestroy(gone) == OK
    assert lt.lib.cublasLtMatrixLayoutDestroy(gone) == INVALID_VALUE and "destroyed twice" in lt.last()
    assert lt.lib.cublasLtMatrixLayoutGetAttribute(gone, LAYOUT_ROWS, ctypes.byref(rows), 8, None) == INVALID_VALUE


# ---- int8 x int8 -> int32 (IMMA) ----

def int8_case(lt, m, n, k, ldw=None, ldx=None, ldc=None, offsets=(0, 0, 0), seed=0):
    ldw, ldx, ldc = ldw or k, ldx or k, ldc or n
    rng = np.random.default_rng(seed)
    w = buffer(n * ldw, offsets[0]).view(np.int8).reshape(n, ldw)
    x = buffer(m * ldx, offsets[1]).view(np.int8).reshape(m, ldx)
    out = buffer(4 * m * ldc, offsets[2]).view(np.int32).reshape(m, ldc)
    w[...] = rng.integers(-128, 128, size=w.shape)
    x[...] = rng.integers(-128, 128, size=x.shape)
    out[...] = -7  # sentinel
    plan = Plan(lt, COMPUTE_32I, R_32I, R_8I, R_32I, m, n, k, ldw, ldx, ldc)
    pref = lt.pref(workspace=4 * MiB, mask=0, align=(alignment(ptr(w)), alignment(ptr(x)), alignment(ptr(out)),
                                                      alignment(ptr(out))))
    return w, x, out, plan, pref


def int8_expected(w, x, n, k, alpha=1, beta=0, c=None):
    acc = x[:, :k].astype(np.int64) @ w[:n, :k].astype(np.int64).T
    y = alpha * acc + (beta * c[:, :n].astype(np.int64) if beta else 0)
    return (y & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def test_int8_gemm_exact(lt):
    h = lt.create()
    m, n, k = 6, 12, 40
    w, x, out, plan, pref = int8_case(lt, m, n, k, ldw=48, ldx=44, ldc=16)
    status, results = lt.heuristic(h, plan, pref)
    assert status == OK and results
    assert all(lt.config(r.algo, CONFIG_SPLITK) <= 1 and lt.config(r.algo, CONFIG_REDUCTION) == 0 for r in results)
    chosen = filtered(results, 4 * MiB)[0]
    assert chosen.workspace_size > 0  # the heuristic's first: a workspace algorithm (blas_emu.c's default too)
    ws = buffer(4 * MiB)
    one, zero = ctypes.c_int32(1), ctypes.c_int32(0)
    assert matmul(lt, h, plan, one, w, x, out, chosen.algo, ws, 4 * MiB, beta=zero) == OK, lt.last()
    np.testing.assert_array_equal(out[:, :n], int8_expected(w, x, n, k))
    assert (out[:, n:] == -7).all()  # the padding columns are not D's
    # device pointer mode, alpha and beta read when the GEMM runs, C read with beta != 0
    lt.lib.cublasLtMatmulDescSetAttribute(plan.desc, DESC_POINTER_MODE, ctypes.byref(ctypes.c_int32(POINTER_DEVICE)), 4)
    ab = buffer(8).view(np.int32)
    ab[:] = [3, -2]
    before = out.copy()
    assert matmul(lt, h, plan, ptr(ab), w, x, out, chosen.algo, ws, 4 * MiB, beta=ptr(ab) + 4) == OK, lt.last()
    np.testing.assert_array_equal(out[:, :n], int8_expected(w, x, n, k, 3, -2, before))


def test_int8_sums_wrap_like_int32(lt):
    h = lt.create()
    m, n, k = 4, 4, 1 << 17
    w, x, out, plan, pref = int8_case(lt, m, n, k)
    w[...] = -128
    x[...] = -128
    x[1, :8] = 0  # one row just below 2^31
    status, results = lt.heuristic(h, plan, pref)
    algo = filtered(results, 0)[0]
    assert matmul(lt, h, plan, ctypes.c_int32(1), w, x, out, algo.algo, beta=ctypes.c_int32(0)) == OK, lt.last()
    np.testing.assert_array_equal(out, int8_expected(w, x, n, k))
    assert out[0, 0] == -(1 << 31)


@pytest.mark.parametrize("what", ["k", "n", "ld", "align", "transpose"])
def test_imma_requirements_unmet_give_no_algorithm(lt, what):
    h = lt.create()
    m, n, k = 8, 16, 32
    kw = {"k": dict(k=34), "n": dict(n=18), "ld": dict(ldc=18)}.get(what, {})
    w, x, out, plan, pref = int8_case(lt, m, kw.get("n", n), kw.get("k", k), ldc=kw.get("ldc"))
    if what == "align":
        pref = lt.pref(workspace=4 * MiB, mask=0, align=(256, 2, 256, 256))
    if what == "transpose":
        # "NN": A as n x k, not transposed (a consistent problem, just not one IMMA runs)
        assert lt.set(lt.lib.cublasLtMatmulDescSetAttribute, plan.desc, DESC_TRANSA, OP_N) == OK
        plan.a = lt.layout(R_8I, n, k, n)
    status, results = lt.heuristic(h, plan, pref)
    assert (status, len(results)) == (NOT_SUPPORTED, 0)
    assert {"k": "multiples of 4", "n": "multiples of 4", "ld": "multiples of 4", "align": "aligned to only 2 bytes",
            "transpose": '"TN"'}[what] in lt.last()


def test_heuristic_candidates_and_the_preference(lt):
    h = lt.create()
    w, x, out, plan, _ = int8_case(lt, 64, 64, 256)
    status, every = lt.heuristic(h, plan, lt.pref(workspace=32 * MiB))  # default mask: every reduction scheme
    assert status == OK
    splits = [(lt.config(r.algo, CONFIG_SPLITK), lt.config(r.algo, CONFIG_REDUCTION), r.workspace_size)
              for r in every]
    assert splits[0][0] > 1 and splits[0][1] != 0  # the heuristic's first splits K, with a reduction scheme
    assert any(s == 1 and ws > 0 for s, _, ws in splits) and any(s == 1 and ws == 0 for s, _, ws in splits)
    assert splits[0][2] == 4 * 64 * 64 * 4  # split-K 4's partial sums in int32
    status, two = lt.heuristic(h, plan, lt.pref(workspace=32 * MiB), requested=2)
    assert status == OK and [bytes(r.algo.data) for r in two] == [bytes(r.algo.data) for r in every[:2]]
    _, masked = lt.heuristic(h, plan, lt.pref(workspace=32 * MiB, mask=0))
    assert masked and all(lt.config(r.algo, CONFIG_SPLITK) == 1 and lt.config(r.algo, CONFIG_REDUCTION) == 0
                          for r in masked)
    _, small = lt.heuristic(h, plan, lt.pref(workspace=MiB))
    assert small and all(r.workspace_size <= MiB for r in small) and len(small) < len(every)
    _, none = lt.heuristic(h, plan, lt.pref(workspace=0))
    assert none and all(r.workspace_size == 0 for r in none)
    assert lt.heuristic(h, plan, lt.pref(), requested=0)[0] == INVALID_VALUE
    again = lt.heuristic(h, plan, lt.pref(workspace=32 * MiB))[1]
    assert [bytes(r.algo.data) for r in again] == [bytes(r.algo.data) for r in every]  # deterministic


def test_algo_check(lt):
    h = lt.create()
    w, x, out, plan, pref = int8_case(lt, 8, 16, 64)
    results = lt.heuristic(h, plan, pref)[1]
    status, r = lt.check(h, plan, results[0].algo)
    assert status == OK and r.workspace_size == results[0].workspace_size
    other = Plan(lt, COMPUTE_32I, R_32I, R_8I, R_32I, 8, 16, 64, 68, 64, 16)  # lda: 4-byte aligned rows only
    assert lt.check(h, other, results[0].algo)[0] == INVALID_VALUE
    assert lt.check(h, plan, Algo())[0] == INVALID_VALUE  # zeros: no algorithm
    fp4 = Plan(lt, COMPUTE_32F, R_32F, R_4F_E2M1, R_16BF, 8, 16, 64, 64, 64, 16,
               DESC_A_SCALE_MODE=(VEC16_UE4M3, ctypes.c_int32), DESC_B_SCALE_MODE=(VEC16_UE4M3, ctypes.c_int32))
    assert lt.check(h, fp4, results[0].algo)[0] == INVALID_VALUE  # an int8 algorithm on an FP4 problem
    v = ctypes.c_int64()
    assert lt.lib.cublasLtMatmulAlgoConfigGetAttribute(ctypes.byref(results[0].algo), CONFIG_SPLITK, ctypes.byref(v),
                                                       8, None) == INVALID_VALUE


def test_matmul_refusals(lt):
    h = lt.create()
    m, n, k = 8, 16, 64
    w, x, out, plan, pref = int8_case(lt, m, n, k)
    results = lt.heuristic(h, plan, pref)[1]
    with_ws = next(r for r in results if r.workspace_size > 0)
    without = next(r for r in results if r.workspace_size == 0)
    one, zero = ctypes.c_int32(1), ctypes.c_int32(0)
    ws = buffer(with_ws.workspace_size)
    assert matmul(lt, h, plan, one, w, x, out, with_ws.algo, ws, with_ws.workspace_size - 1, zero) == INVALID_VALUE
    assert "workspace" in lt.last()
    assert matmul(lt, h, plan, one, w, x, out, with_ws.algo, None, with_ws.workspace_size, zero) == INVALID_VALUE
    assert (out == -7).all()
    assert matmul(lt, h, plan, one, w, x, out, without.algo, None, 0, zero) == OK  # no workspace needed, none given
    np.testing.assert_array_equal(out, int8_expected(w, x, n, k))
    # pointers as aligned as the preference promised (256: the algorithm relies on 16)
    w8 = buffer(w.nbytes, offset=8).view(np.int8).reshape(w.shape)
    w8[...] = w
    assert matmul(lt, h, plan, one, w8, x, out, without.algo, None, 0, zero) == INVALID_VALUE
    assert "16-byte alignment" in lt.last()
    # injected failure: this call fails, the next runs
    out[...] = -7
    lt.lib.lt_harness_inject(INJECT_BLAS_FAILED, 1)
    assert matmul(lt, h, plan, one, w, x, out, without.algo, None, 0, zero) == EXECUTION_FAILED
    assert (out == -7).all() and "injected" in lt.last()
    assert matmul(lt, h, plan, one, w, x, out, without.algo, None, 0, zero) == OK
    # the stream refuses the work: a bad stream, a sticky fault
    assert matmul(lt, h, plan, one, w, x, out, without.algo, None, 0, zero, stream=0xBAD) == EXECUTION_FAILED
    lt.lib.lt_harness_set_stream(3, 700)
    assert matmul(lt, h, plan, one, w, x, out, without.algo, None, 0, zero) == EXECUTION_FAILED
    # another device's handle, no context
    lt.lib.lt_harness_set_stream(0, 0)
    lt.lib.lt_harness_set_device(1)
    assert matmul(lt, h, plan, one, w, x, out, without.algo, None, 0, zero) == INVALID_VALUE
    lt.lib.lt_harness_set_device(-1)
    assert matmul(lt, h, plan, one, w, x, out, without.algo, None, 0, zero) == NOT_INITIALIZED


def test_hung_and_captured_streams(lt):
    h = lt.create()
    m, n, k = 8, 16, 64
    w, x, out, plan, pref = int8_case(lt, m, n, k)
    algo = filtered(lt.heuristic(h, plan, pref)[1], 0)[0].algo
    lt.lib.lt_harness_set_stream(2, 0)  # hung: queued, never runs
    assert matmul(lt, h, plan, ctypes.c_int32(1), w, x, out, algo, beta=ctypes.c_int32(0)) == OK
    assert (out == -7).all() and lt.lib.lt_harness_counter(3) == 1
    # captured: device-mode alpha read at each replay, host-mode alpha at the call
    lt.lib.lt_harness_set_stream(1, 0)
    assert lt.set(lt.lib.cublasLtMatmulDescSetAttribute, plan.desc, DESC_POINTER_MODE, POINTER_DEVICE) == OK
    ab = buffer(8).view(np.int32)
    ab[:] = [1, 0]
    assert matmul(lt, h, plan, ptr(ab), w, x, out, algo, beta=ptr(ab) + 4) == OK
    assert (out == -7).all()
    ab[0] = 5
    assert lt.lib.lt_harness_replay() == 1
    np.testing.assert_array_equal(out, int8_expected(w, x, n, k, 5))


# ---- block-scaled NVFP4 and MXFP8 ----

E = pytest.importorskip("comfy_kitchen.backends.eager.quantization")


def quantized(fmt, rows, k, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, k, generator=g) * 3
    x[:, ::7] *= 20
    if fmt == "nvfp4":
        pts = (x.abs().max() / (448 * 6)).reshape(())
        q, s = E.quantize_nvfp4(x, pts, 0.0, False, True)
        one = torch.ones((), dtype=torch.float32)
        return q, s.view(torch.uint8), E.dequantize_nvfp4(q, one, s, torch.float32), pts
    q, s = E.quantize_mxfp8(x)
    return q.view(torch.uint8), s.view(torch.uint8), E.dequantize_mxfp8(q, s, torch.float32), None


def definition(da, db, alpha, bias, out_dtype, split_k=1):
    """blas_emu.c's GEMM from eager's decoded operands: float32 sums in k's order from +0 (per K chunk
    for a split-K algorithm, the chunks' sums added in order), then alpha * sum + bias (0 without
    one), rounded once to out_dtype."""
    a, b = da.numpy(), db.numpy()
    k = a.shape[1]
    chunk = -(-k // split_k)
    total = None
    for t0 in range(0, k, chunk):
        acc = np.zeros((a.shape[0], b.shape[0]), dtype=np.float32)
        for t in range(t0, min(t0 + chunk, k)):
            acc += a[:, t, None] * b[None, :, t]
        total = acc if total is None else total + acc
    y = np.float32(alpha) * total
    y = y + (bias.float().numpy()[None, :] if bias is not None else np.float32(0.0))
    return torch.from_numpy(y).to(out_dtype)


FORMATS = {"nvfp4": (R_4F_E2M1, VEC16_UE4M3), "mxfp8": (R_8F_E4M3, VEC32_UE8M0)}
DTYPES = {torch.bfloat16: R_16BF, torch.float16: R_16F, torch.float32: R_32F}


def scaled_gemm(lt, h, fmt, qa, qb, sa, sb, out, alpha, bias=None, bias_type=None, device_alpha=True, split=False,
                ws_bytes=32 * MiB, bias_ptr=None):
    """blas_cublaslt.c's scaled_describe, scaled_algo and scaled_gemm: returns (status, refusal)."""
    in_type, mode = FORMATS[fmt]
    m, n, k = out.shape[0], out.shape[1], qa.shape[1] * (2 if fmt == "nvfp4" else 1)
    out_type = DTYPES[out.dtype]
    c = ctypes.c_int32
    attrs = dict(DESC_POINTER_MODE=(POINTER_DEVICE if device_alpha else POINTER_HOST, c),
                 DESC_A_SCALE_MODE=(mode, c), DESC_B_SCALE_MODE=(mode, c),
                 DESC_A_SCALE_POINTER=(ptr(sb), ctypes.c_void_p), DESC_B_SCALE_POINTER=(ptr(sa), ctypes.c_void_p))
    if bias is not None:
        attrs.update(DESC_EPILOGUE=(EPILOGUE_BIAS, c),
                     DESC_BIAS_POINTER=(bias_ptr or ptr(bias), ctypes.c_void_p),
                     DESC_BIAS_DATA_TYPE=(bias_type if bias_type is not None else out_type, c))
    plan = Plan(lt, COMPUTE_32F, R_32F, in_type, out_type, m, n, k, k, k, n, **attrs)
    pref = lt.pref(workspace=ws_bytes, mask=None if split else 0,
                   align=(alignment(ptr(qb)), alignment(ptr(qa)), alignment(ptr(out)), alignment(ptr(out))))
    status, results = lt.heuristic(h, plan, pref)
    if status != OK:
        return status, lt.last()
    algo = results[0] if split else filtered(results, ws_bytes)[0]
    assert (lt.config(algo.algo, CONFIG_SPLITK) > 1) == split
    ws = buffer(max(algo.workspace_size, 1))
    # alpha and beta: blas_cublaslt.c's alpha_beta on the device, or (device_alpha False) on the host
    ab = torch.tensor([alpha, 0.0], dtype=torch.float32)
    alpha_p, beta_p = ptr(ab), ptr(ab) + 4
    status = lt.lib.cublasLtMatmul(h, plan.desc, alpha_p, ptr(qb), plan.a, ptr(qa), plan.b, beta_p, ptr(out), plan.c,
                                   ptr(out), plan.c, ctypes.addressof(algo.algo), ptr(ws), algo.workspace_size, STREAM)
    return status, lt.last()


def bits(t):
    return t.view(torch.int16) if t.element_size() == 2 else t.view(torch.int32)


CASES = [(1, 8, 64, torch.bfloat16, True), (5, 16, 64, torch.float16, False), (130, 24, 128, torch.float32, True),
         (33, 40, 96, torch.bfloat16, False)]


@pytest.fixture(scope="module")
def emulated():
    """comfy_kitchen_c's emulated device (blas_emu.c's GEMMs), or None where this checkout's build
    cannot be imported (the definition is still checked).  Under tests/cuda_standin/run.py its
    "emulated device" is the stand-in itself: nothing to compare with."""
    if os.environ.get("COMFY_KITCHEN_C_TEST_DEVICE") == "standin":
        return None
    try:
        from comfy_kitchen_c import mxfp8, ops
        from comfy_kitchen_c.testing import emulated_device
    except Exception:  # noqa: BLE001 - any import failure: no emulated device to compare with
        return None
    return ops, mxfp8, emulated_device


def test_the_emulated_device_is_there_to_compare_with(emulated):
    """Says (as a skip) when test_block_scaled_gemm_bit_exact checked the definition only."""
    if emulated is None:
        pytest.skip("comfy_kitchen_c's emulated device is not importable here (or this run is through the "
                    "stand-in): the block-scaled GEMMs were checked against their definition only")


@pytest.mark.parametrize("fmt", ["nvfp4", "mxfp8"])
def test_block_scaled_gemm_bit_exact(lt, fmt, emulated):
    h = lt.create()
    for i, (m, n, k, out_dtype, with_bias) in enumerate(CASES):
        if fmt == "nvfp4" and k % 32:
            continue
        qa, sa, da, pa = quantized(fmt, m, k, 2 * i)
        qb, sb, db, pb = quantized(fmt, n, k, 2 * i + 1)
        alpha = float(pa * pb) if fmt == "nvfp4" else 1.0
        # cuBLASLt's FP8 bias types: bf16 for bf16 and f32 outputs, f16 for f16
        bias_dtype = torch.float16 if out_dtype == torch.float16 else torch.bfloat16
        g = torch.Generator().manual_seed(100 + i)
        bias = (torch.randn(n, generator=g) * 2).to(bias_dtype) if with_bias else None
        out = torch.full((m, n), float("nan"), dtype=out_dtype)
        status, why = scaled_gemm(lt, h, fmt, qa, qb, sa, sb, out, alpha, bias, DTYPES[bias_dtype],
                                  device_alpha=fmt == "nvfp4")
        assert status == OK, why
        what = f"{fmt} {m}x{n}x{k} {out_dtype}"
        ref = definition(da, db, alpha, bias, out_dtype)
        assert torch.equal(bits(out), bits(ref)), what
        if emulated is None:
            continue
        ops, mxfp8, emulated_device = emulated
        with emulated_device():
            if fmt == "nvfp4":
                emu = ops.scaled_mm_nvfp4(qa, qb, pa, pb, sa.view(torch.float8_e4m3fn), sb.view(torch.float8_e4m3fn),
                                          bias, out_dtype, alpha=torch.tensor(alpha, dtype=torch.float32))
            else:
                emu = mxfp8.scaled_mm_mxfp8(qa.view(torch.float8_e4m3fn), qb.view(torch.float8_e4m3fn),
                                            sa.view(torch.float8_e8m0fnu), sb.view(torch.float8_e8m0fnu), bias,
                                            out_dtype)
        assert torch.equal(bits(out), bits(emu.to(out_dtype))), f"{what}: not the emulated device's bits"


def test_split_k_algorithm_sums_per_chunk(lt):
    h = lt.create()
    m, n, k = 7, 16, 256
    qa, sa, da, pa = quantized("nvfp4", m, k, 1)
    qb, sb, db, pb = quantized("nvfp4", n, k, 2)
    out = torch.zeros((m, n), dtype=torch.float32)
    status, why = scaled_gemm(lt, h, "nvfp4", qa, qb, sa, sb, out, 1.0, split=True)
    assert status == OK, why
    assert torch.equal(bits(out), bits(definition(da, db, 1.0, None, torch.float32, split_k=4)))


def test_block_scaled_refusals(lt):
    h = lt.create()
    m, n, k = 4, 16, 64
    qa, sa, _, _ = quantized("nvfp4", m, k, 3)
    qb, sb, _, _ = quantized("nvfp4", n, k, 4)
    out = torch.zeros((m, n), dtype=torch.float32)
    # an f32 bias for an f32 output: cuBLASLt's FP8 / block-scaled GEMMs take a bf16 one
    bias = torch.ones(n, dtype=torch.float32)
    status, why = scaled_gemm(lt, h, "nvfp4", qa, qb, sa, sb, out, 1.0, bias, R_32F)
    assert status == NOT_SUPPORTED and "CUDA_R_16BF" in why
    # compute capability 9.0: no block-scaled algorithm; 12.0 has them
    lt.lib.lt_harness_set_cc(0, 90)
    status, why = scaled_gemm(lt, h, "nvfp4", qa, qb, sa, sb, out, 1.0)
    assert status == NOT_SUPPORTED and "compute capability 10.0" in why
    lt.lib.lt_harness_set_cc(0, 120)
    assert scaled_gemm(lt, h, "nvfp4", qa, qb, sa, sb, out, 1.0)[0] == OK
    # k of 16 values (8 bytes a row): cuBLASLt's block-scaled rows are 16-byte aligned
    qa16, sa16, _, _ = quantized("nvfp4", m, 16, 5)
    qb16, sb16, _, _ = quantized("nvfp4", n, 16, 6)
    status, why = scaled_gemm(lt, h, "nvfp4", qa16, qb16, sa16, sb16, out, 1.0)
    assert status == NOT_SUPPORTED and "16 bytes" in why


@pytest.mark.parametrize("fmt, byte, words", [("nvfp4", 0x80, "UE4M3 is unsigned"), ("mxfp8", 255, "NaN on a GPU"),
                                              ("mxfp8", 0, "2^-127 on a GPU")])
def test_scale_bytes_a_gpu_reads_otherwise_are_logged(lt, fmt, byte, words):
    """The GEMM runs as on the emulated device, and the scale byte a GPU would read differently is logged."""
    h = lt.create()
    m, n, k = 4, 16, 64
    qa, sa, _, _ = quantized(fmt, m, k, 21)
    qb, sb, _, _ = quantized(fmt, n, k, 22)
    sa[0, 0] = byte if fmt == "mxfp8" else sa[0, 0] | byte
    out = torch.zeros((m, n), dtype=torch.bfloat16)
    before = lt.lib.lt_harness_counter(0)
    status, _ = scaled_gemm(lt, h, fmt, qa, qb, sa, sb, out, 1.0)
    assert status == OK
    assert lt.lib.lt_harness_counter(0) == before + 1 and words in lt.last()


def test_a_cached_algorithm_meets_a_less_aligned_bias(lt):
    """blas_cublaslt.c's scaled_algo keys its cache on the operands' alignments but not the bias's:
    an algorithm chosen with an aligned bias pointer, reused with a bias 2 bytes past one, is one a
    real cuBLASLt may refuse (the heuristic reads the bias pointer's alignment, cublasLt.h)."""
    h = lt.create()
    m, n, k = 4, 16, 64
    qa, sa, _, _ = quantized("nvfp4", m, k, 7)
    qb, sb, _, _ = quantized("nvfp4", n, k, 8)
    out = torch.zeros((m, n), dtype=torch.bfloat16)
    storage = buffer(2 * (n + 8)).view(np.uint16)
    aligned_bias = storage[:n]
    c = ctypes.c_int32
    attrs = dict(DESC_POINTER_MODE=(POINTER_HOST, c), DESC_A_SCALE_MODE=(VEC16_UE4M3, c),
                 DESC_B_SCALE_MODE=(VEC16_UE4M3, c), DESC_A_SCALE_POINTER=(ptr(sb), ctypes.c_void_p),
                 DESC_B_SCALE_POINTER=(ptr(sa), ctypes.c_void_p), DESC_EPILOGUE=(EPILOGUE_BIAS, c),
                 DESC_BIAS_POINTER=(ptr(aligned_bias), ctypes.c_void_p), DESC_BIAS_DATA_TYPE=(R_16BF, c))
    plan = Plan(lt, COMPUTE_32F, R_32F, R_4F_E2M1, R_16BF, m, n, k, k, k, n, **attrs)
    status, results = lt.heuristic(h, plan, lt.pref(workspace=0, mask=0))
    assert status == OK
    one, zero = ctypes.c_float(1.0), ctypes.c_float(0.0)

    def run():
        return lt.lib.cublasLtMatmul(h, plan.desc, ctypes.addressof(one), ptr(qb), plan.a, ptr(qa), plan.b,
                                     ctypes.addressof(zero), ptr(out), plan.c, ptr(out), plan.c,
                                     ctypes.addressof(results[0].algo), None, 0, STREAM)

    assert run() == OK
    shifted = storage[1:n + 1]
    assert lt.set(lt.lib.cublasLtMatmulDescSetAttribute, plan.desc, DESC_BIAS_POINTER, ptr(shifted),
                  ctypes.c_void_p) == OK
    assert run() == INVALID_VALUE and "bias" in lt.last()


def test_algo_check_arch_mismatch(lt):
    h = lt.create()
    m, n, k = 4, 16, 64
    c = ctypes.c_int32
    plan = Plan(lt, COMPUTE_32F, R_32F, R_4F_E2M1, R_16BF, m, n, k, k, k, n,
                DESC_A_SCALE_MODE=(VEC16_UE4M3, c), DESC_B_SCALE_MODE=(VEC16_UE4M3, c))
    status, results = lt.heuristic(h, plan, lt.pref())
    assert status == OK
    lt.lib.lt_harness_set_cc(0, 90)
    assert lt.check(h, plan, results[0].algo)[0] == ARCH_MISMATCH


@pytest.mark.skipif(not Path("/proc/cpuinfo").exists() or " fma " not in Path("/proc/cpuinfo").read_text(),
                    reason="needs a CPU with FMA to show that the build's flags cannot fuse the sums")
def test_sums_are_not_fused_whatever_the_flags(tmp_path):
    """Built with -ffp-contract=fast for an FMA machine, the GEMM keeps blas_emu.c's separate roundings."""
    lib = build(tmp_path / "liblt_fast.so", ("-std=gnu11", "-O3", "-march=x86-64-v3", "-ffp-contract=fast"))
    lib.lt_harness_reset()
    session = Lt(lib)
    try:
        h = session.create()
        m, n, k = 9, 16, 256
        qa, sa, da, pa = quantized("nvfp4", m, k, 11)
        qb, sb, db, pb = quantized("nvfp4", n, k, 12)
        out = torch.zeros((m, n), dtype=torch.float32)
        alpha = float(pa * pb)
        status, why = scaled_gemm(session, h, "nvfp4", qa, qb, sa, sb, out, alpha)
        assert status == OK, why
        assert torch.equal(bits(out), bits(definition(da, db, alpha, None, torch.float32)))
    finally:
        session.close()
