# SPDX-License-Identifier: Apache-2.0
"""Parity of the W4A8 / W6A8 ops with comfy_kitchen's eager backend, on the CPU and (the
decode and the dequantizer) on the emulated device.

* The decode to the int8 grid (csrc/math/w4a8.h) is eager's _dequant_int4_grouped_to_int8 bit
  for bit: every code, both scale dtypes, group sizes 4..64, 4 and 6 bits, a codebook of
  eager's, a user's, none; NaN and infinite scales; the MMA-packed records decoded directly
  equal the canonical storage unpack_w4a8_mma_weight gives.
* dequantize_w4a8_int8_weight: before its rotation bit for bit (int8 * s_channel + correction
  in the output dtype); rotated, within the rotation's stated bound (conftest.assert_rotation_close).
* The linears: bit for bit our int8_linear(convrot=True) on eager's decoded int8 weight (so
  their parity is int8_linear's), and against eager's own linear within the bound of an int8
  linear with a rotation (test_int8_linear.assert_activation_close)."""

import pytest
import torch
from comfy_kitchen.backends.eager import w4a8_int8 as EW
from comfy_kitchen.tensor.w4a8_packed import default_w4a8_codebook, unpack_w4a8_mma_weight

import comfy_kitchen_c
import comfy_kitchen_c.ops as ops
from comfy_kitchen_c import _C, linear, w4a8
from comfy_kitchen_c._C import ArgumentError, ArgumentTypeError
from conftest import DTYPE_IDS, FLOAT_DTYPES, assert_bitwise_equal, assert_rotation_close, kernels_of
from test_int8_linear import assert_activation_close

DEVICES = ["cpu", "emulated"]


def storage(n, k, bits=4, group=16, scale_dtype=torch.float8_e4m3fn, codebook="default", seed=0):
    """Random codes and scales of the storage contract: (qdata, s_rel, s_channel, codebook)."""
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 1 << bits, (n, k), generator=g, dtype=torch.int32)
    from comfy_kitchen.tensor.w4a8_packed import _pack_codes
    qdata = _pack_codes(codes, bits)
    s_rel = (torch.rand(n, k // group, generator=g) * 200 + 1).to(scale_dtype)
    s_channel = torch.rand(n, generator=g) * 0.01 + 1e-4
    cb = {"default": default_w4a8_codebook(), "user": torch.randn(16, generator=g).sort().values * 0.9,
          None: None}[codebook if bits == 4 else None]
    return qdata, s_rel, s_channel, cb


def eager_grid(qdata, s_rel, codebook, group):
    return EW._dequant_int4_grouped_to_int8(qdata, s_rel, codebook, group)


def our_grid(qdata, s_rel, codebook, group, bits):
    out = torch.empty((qdata.shape[0], s_rel.shape[1] * group), dtype=torch.int8)
    return w4a8._decode("test", qdata, s_rel, codebook, None, None, out, group, bits, False)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bits,group", [(4, 4), (4, 8), (4, 16), (4, 32), (6, 16), (6, 64)])
@pytest.mark.parametrize("scale_dtype", [torch.float8_e4m3fn, torch.float32], ids=["e4m3", "f32"])
def test_decode_bit_exact(device, bits, group, scale_dtype):
    for codebook in ("default", "user", None):
        q, s, _, cb = storage(24, 256, bits, group, scale_dtype, codebook)
        ref = eager_grid(q, s, cb, group)
        with kernels_of(device):
            assert_bitwise_equal(our_grid(q, s, cb, group, bits), ref, f"{bits} bits g{group} {codebook}")


@pytest.mark.parametrize("device", DEVICES)
def test_decode_non_finite_and_extreme_scales(device):
    q, s, _, cb = storage(8, 64, 4, 16, torch.float32, None)
    s[0, 0], s[1, 1], s[2, 2], s[3, 3] = float("nan"), float("inf"), -float("inf"), 1e30
    s[4, :] = 0.5  # ties of the rounding: level * 0.5 = k + 0.5
    ref = eager_grid(q, s, None, 16)  # uniform codes: code 8 is level 0, so 0 * inf is NaN -> 0
    with kernels_of(device):
        assert_bitwise_equal(our_grid(q, s, None, 16, 4), ref, "non-finite scales")
    e4 = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).reshape(16, 16)
    q2 = storage(16, 256, 4, 16, torch.float32, None)[0]
    with kernels_of(device):  # every e4m3 scale byte (NaN 0x7F/0xFF included)
        assert_bitwise_equal(our_grid(q2, e4, None, 16, 4), eager_grid(q2, e4, None, 16), "every e4m3 scale")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("bits", [4, 6])
def test_dequantize(device, dtype, bits):
    q, s, sc, cb = storage(32, 512, bits, 16)
    corr = torch.randn(512 // 16, 32).to(dtype) * 0.01 if bits == 4 else None
    for correction in (None, corr):
        ref = EW.dequantize_w4a8_int8_weight(q, s, sc, cb, correction, 16, 64, dtype)
        with kernels_of(device):
            ours = ops.dequantize_w4a8_int8_weight(q, s, sc, cb, correction, 16, 64, dtype)
            # before the rotation, eager's float weight bit for bit: ours rotated is our rotation of it
            unrotated = EW._dequantize_w4a8_int8_weight_from_int8(eager_grid(q, s, cb, 16), sc, correction, 16, dtype)
            assert_bitwise_equal(ours, ops.rotate_int8_convrot_weight(unrotated, 64), f"{dtype} {bits} bits")
        assert_rotation_close(ours, ref, f"dequantize {dtype} {bits} bits correction={correction is not None}")


def test_dequantize_from_eager_quantizer():
    w = torch.randn(48, 256, dtype=torch.bfloat16)
    for bits in (4, 6):
        q, s, sc, corr, cb = EW.quantize_w4a8_int8_weight(w, bits=bits)
        ref = EW.dequantize_w4a8_int8_weight(q, s, sc, cb, corr)
        assert_rotation_close(ops.dequantize_w4a8_int8_weight(q, s, sc, cb, corr), ref, f"{bits} bits")
    q, s, sc, corr, cb = EW.quantize_w4a8_int8_weight(w, symmetric=False, scale_dtype=torch.float32)
    assert corr is not None
    ref = EW.dequantize_w4a8_int8_weight(q, s, sc, cb, corr, output_dtype=torch.float32)
    assert_rotation_close(ops.dequantize_w4a8_int8_weight(q, s, sc, cb, corr, output_dtype=torch.float32), ref,
                          "asymmetric")


def test_dequantize_empty_and_non_contiguous():
    q, s, sc, cb = storage(16, 256)
    empty = ops.dequantize_w4a8_int8_weight(q[:0], s[:0], sc[:0], cb)
    assert empty.shape == (0, 256) and empty.dtype == torch.bfloat16
    qt = q.t().contiguous().t()  # same values, transposed strides
    assert not qt.is_contiguous()
    assert_bitwise_equal(ops.dequantize_w4a8_int8_weight(qt, s, sc, cb), ops.dequantize_w4a8_int8_weight(q, s, sc, cb),
                         "non-contiguous qdata")


ACTS = [(None, {}), ("gelu_tanh", {}), ("swiglu", {}), ("rms_norm", {"eps": 1e-6})]


@pytest.mark.parametrize("m", [1, 5, 40])
@pytest.mark.parametrize("bits", [4, 6])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_linear(m, bits, dtype):
    n, k = 48, 256
    q, s, sc, cb = storage(n, k, bits, 16)
    g = torch.Generator().manual_seed(m)
    x = torch.randn(m, k, generator=g).to(dtype)
    bias = torch.randn(n, generator=g).to(dtype)
    ours = ops.w4a8_int8_linear(x, q, s, sc, cb, None, bias, 16, 64, torch.float32)
    grid = eager_grid(q, s, cb, 16)
    assert_bitwise_equal(ours, ops.int8_linear(x, grid, sc, bias, torch.float32, True, 64), f"m={m} as int8_linear")
    ref = EW.w4a8_int8_linear(x, q, s, sc, cb, None, bias, 16, 64, torch.float32)
    assert_activation_close(ours, ref, f"m={m} {bits} bits {dtype}")


def act_call(act, extra, n, k, m, dtype, seed):
    """x for the activation (two halves for swiglu), and the activation's and residual's arguments."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, 2 * k if act == "swiglu" else k, generator=g, dtype=dtype)
    w = torch.rand(k, generator=g, dtype=dtype) + 0.5 if act == "rms_norm" else None
    res = torch.randn(m, n, generator=g, dtype=dtype)
    rs = torch.rand(n, generator=g, dtype=dtype)
    return x, dict(input_act=act, input_act_weight=w, input_act_eps=extra.get("eps", 0.0), residual=res,
                   residual_scale=rs)


@pytest.mark.parametrize("act,extra", ACTS, ids=[str(a) for a, _ in ACTS])
def test_linear_input_act_and_residual(act, extra):
    n, k, m = 32, 256, 7
    q, s, sc, cb = storage(n, k, 4, 16)
    x, kw = act_call(act, extra, n, k, m, torch.bfloat16, 1)
    w, res, rs = kw["input_act_weight"], kw["residual"], kw["residual_scale"]
    ours = ops.w4a8_int8_linear(x, q, s, sc, cb, None, None, 16, 256, torch.bfloat16, **kw)
    grid = eager_grid(q, s, cb, 16)
    assert_bitwise_equal(ours, ops.int8_linear(x, grid, sc, None, torch.bfloat16, True, 256, act, w,
                                               extra.get("eps", 0.0), res, rs), f"{act}")
    ref = EW.w4a8_int8_linear(x, q, s, sc, cb, None, None, 16, 256, torch.bfloat16, **kw)
    assert_activation_close(ours, ref, f"{act} residual")


def test_linear_with_correction_is_eager_float_path():
    n, k = 32, 256
    q, s, sc, cb = storage(n, k, 4, 16)
    corr = torch.randn(k // 16, n) * 0.01
    x = torch.randn(3, 5, k)
    ours = ops.w4a8_int8_linear(x, q, s, sc, cb, corr, None, 16, 256, torch.float32)
    weight = ops.dequantize_w4a8_int8_weight(q, s, sc, cb, corr, 16, 256, torch.float32)
    assert_bitwise_equal(ours, torch.nn.functional.linear(x, weight), "F.linear on our dequantized weight")
    ref = EW.w4a8_int8_linear(x, q, s, sc, cb, corr, None, 16, 256, torch.float32)
    torch.testing.assert_close(ours, ref, rtol=1e-5, atol=1e-5 * float(ref.abs().max()))


def random_records(n, k, bits, seed=0):
    """Packed MMA records of random bytes, the scales finite e4m3 bytes: a bijection with
    the canonical storage (unpack_w4a8_mma_weight), so every record layout is exercised."""
    g = torch.Generator().manual_seed(seed)
    rec = 512 * bits // 8 + 32
    packed = torch.randint(0, 256, ((n // 16) * (k // 32), rec), generator=g, dtype=torch.int32).to(torch.uint8)
    packed[:, rec - 32:] = torch.randint(0x20, 0x50, (packed.shape[0], 32), generator=g, dtype=torch.int32)
    return packed.reshape(-1).view(torch.int8)


@pytest.mark.parametrize("bits", [4, 6])
@pytest.mark.parametrize("m", [1, 20])
def test_packed_linear(bits, m):
    n, k = 32, 512
    packed = random_records(n, k, bits)
    q, s = unpack_w4a8_mma_weight(packed, n, k)
    sc = torch.rand(n) * 0.01 + 1e-4
    cb = default_w4a8_codebook() if bits == 4 else None
    x = torch.randn(m, k, dtype=torch.bfloat16)
    empty = torch.empty(0, dtype=torch.float8_e4m3fn)
    ours = ops.w4a8_packed_linear(x, packed, empty, sc, cb, None, None, 16, 256, torch.bfloat16)
    assert_bitwise_equal(ours, ops.w4a8_int8_linear(x, q, s, sc, cb, None, None, 16, 256, torch.bfloat16),
                         "packed = canonical")
    ref = EW.w4a8_packed_linear(x, packed, empty, sc, cb, None, None, 16, 256, torch.bfloat16)
    assert_activation_close(ours, ref, f"packed {bits} bits")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bits", [4, 6])
def test_packed_decode(device, bits):
    n, k = 32, 256
    packed = random_records(n, k, bits, seed=3)
    q, s = unpack_w4a8_mma_weight(packed, n, k)
    out = torch.empty((n, k), dtype=torch.int8)
    with kernels_of(device):
        w4a8._decode("test", packed, None, None, None, None, out, 16, bits, True)
    assert_bitwise_equal(out, eager_grid(q, s, None, 16), f"records {bits} bits")


@pytest.fixture
def decode_bytes(monkeypatch):
    """Sets linear.W4A8_DECODE_BYTES, the GPU's decoded part of the weight, for one test."""
    return lambda n: monkeypatch.setattr(linear, "W4A8_DECODE_BYTES", n)


# (m, n, k): one row to the GEMM's padded 16-row block and past it; n a multiple of 16 and not
# (the last part's GEMM then runs past n over zeroed rows)
GPU_SHAPES = [(1, 48, 256), (9, 40, 512), (40, 64, 256), (17, 200, 256)]


@pytest.mark.parametrize("m,n,k", GPU_SHAPES)
@pytest.mark.parametrize("bits,scale_dtype", [(4, torch.float8_e4m3fn), (4, torch.float32), (6, torch.float8_e4m3fn)])
@pytest.mark.parametrize("parts", ["whole", "16 rows"])
def test_linear_on_the_gpu_path_equals_the_cpu(decode_bytes, m, n, k, bits, scale_dtype, parts):
    """w4a8_linear (the codes decoded a part at a time into the scratch, each part's GEMM into
    its accumulator columns) gives the CPU's bits (a decoded weight, then int8_linear): the int32
    sums are exact whatever the parts, and quantizer and epilogue are int8_linear's.  "16 rows":
    a budget of one byte, so every part is one n_align block and the last is cut at n."""
    if parts != "whole":
        decode_bytes(1)
    q, s, sc, cb = storage(n, k, bits, 16, scale_dtype, seed=m)
    g = torch.Generator().manual_seed(n)
    x = torch.randn(m, k, generator=g, dtype=torch.bfloat16)
    bias = torch.randn(n, generator=g, dtype=torch.bfloat16)
    cpu = ops.w4a8_int8_linear(x, q, s, sc, cb, None, bias, 16, 64, torch.bfloat16)
    with kernels_of("emulated"):
        gpu = ops.w4a8_int8_linear(x, q, s, sc, cb, None, bias, 16, 64, torch.bfloat16)
    assert_bitwise_equal(gpu, cpu, f"{m}x{n}x{k} {bits} bits {scale_dtype} {parts}")


def _misaligned(t):
    """t's values at a data pointer 1 byte past an aligned one (the GEMV's byte-wise loads)."""
    buf = torch.empty(t.numel() + 1, dtype=t.dtype)[1:].view(t.shape)
    buf.copy_(t)
    assert buf.data_ptr() % 8 and buf.is_contiguous()
    return buf


@pytest.mark.parametrize("m", [1, 3, 8])
@pytest.mark.parametrize("bits,group", [(4, 4), (4, 8), (4, 16), (4, 64), (6, 16), (6, 32)])
@pytest.mark.parametrize("scale_dtype", [torch.float8_e4m3fn, torch.float32], ids=["e4m3", "f32"])
def test_gemv_on_the_gpu_path_equals_the_cpu(m, bits, group, scale_dtype):
    """Up to 8 rows the canonical codes go through w4a8_gemv_kernel (decoded in registers, the
    fast clamp-and-round of the grid): the CPU's bits for every group size and both widths, with
    K past one step of the 4-deep load loop (2560 = 5 steps of 512) and an odd N."""
    n, k = 37, 2560
    q, s, sc, cb = storage(n, k, bits, group, scale_dtype, seed=m + group)
    g = torch.Generator().manual_seed(bits * group)
    x = torch.randn(m, k, generator=g, dtype=torch.bfloat16)
    bias = torch.randn(n, generator=g, dtype=torch.bfloat16)
    cpu = ops.w4a8_int8_linear(x, q, s, sc, cb, None, bias, group, 256, torch.float32)
    with kernels_of("emulated"):
        gpu = ops.w4a8_int8_linear(x, q, s, sc, cb, None, bias, group, 256, torch.float32)
        misaligned = ops.w4a8_int8_linear(x, _misaligned(q), s, sc, cb, None, bias, group, 256, torch.float32)
    assert_bitwise_equal(gpu, cpu, f"m={m} {bits} bits group {group}")
    assert_bitwise_equal(misaligned, cpu, f"m={m} {bits} bits group {group}, codes 1 byte off alignment")


def test_gemv_on_the_gpu_path_with_non_finite_scales_and_levels():
    """The GEMV's fast grid (clamp, then round by adding 1.5 * 2^23) is taken only where the
    scale and every level are finite; a NaN or infinite scale, a NaN or infinite codebook
    level, and a huge level whose product overflows give math/w4a8.h's values (NaN -> 0)."""
    n, k, m = 16, 512, 2
    q, s, sc, cb = storage(n, k, 4, 16, torch.float32, seed=5)
    s = s.clone()
    s[0, 0], s[1, 3], s[2, 5], s[3, :] = float("nan"), float("inf"), float("-inf"), 1e30
    x = torch.randn(m, k, dtype=torch.bfloat16)
    for book in (cb, torch.tensor([float("nan"), float("inf"), -float("inf"), 3e38] + [0.1 * i for i in range(12)])):
        cpu = ops.w4a8_int8_linear(x, q, s, sc, book)
        with kernels_of("emulated"):
            gpu = ops.w4a8_int8_linear(x, q, s, sc, book)
        assert_bitwise_equal(gpu, cpu, "non-finite scales and levels")


@pytest.mark.parametrize("act,extra", ACTS, ids=[str(a) for a, _ in ACTS])
def test_linear_on_the_gpu_path_with_input_act_and_residual(decode_bytes, act, extra):
    decode_bytes(1)
    n, k, m = 40, 256, 7
    q, s, sc, cb = storage(n, k, 4, 16)
    x, kw = act_call(act, extra, n, k, m, torch.float16, 2)
    cpu = ops.w4a8_int8_linear(x, q, s, sc, cb, None, None, 16, 256, torch.float16, **kw)
    with kernels_of("emulated"):
        gpu = ops.w4a8_int8_linear(x, q, s, sc, cb, None, None, 16, 256, torch.float16, **kw)
    assert_bitwise_equal(gpu, cpu, f"{act} residual")


@pytest.mark.parametrize("bits", [4, 6])
@pytest.mark.parametrize("m", [1, 20])
def test_packed_linear_on_the_gpu_path_equals_the_cpu(decode_bytes, bits, m):
    """The records decoded a part at a time (parts of 16-row records: n_align is 16 or 32)."""
    decode_bytes(1)
    n, k = 48, 512
    packed = random_records(n, k, bits, seed=m)
    sc = torch.rand(n) * 0.01 + 1e-4
    cb = default_w4a8_codebook() if bits == 4 else None
    x = torch.randn(m, k, dtype=torch.bfloat16)
    empty = torch.empty(0, dtype=torch.float8_e4m3fn)
    cpu = ops.w4a8_packed_linear(x, packed, empty, sc, cb, None, None, 16, 256, torch.float32)
    with kernels_of("emulated"):
        gpu = ops.w4a8_packed_linear(x, packed, empty, sc, cb, None, None, 16, 256, torch.float32)
    assert_bitwise_equal(gpu, cpu, f"packed {bits} bits m={m}")


def test_linear_on_the_gpu_path_in_row_chunks(decode_bytes):
    """Rows in chunks (the memory limit) with the weight in parts: each chunk decodes the parts
    again into the same scratch region, ordered by the stream."""
    decode_bytes(1)
    saved = comfy_kitchen_c.linear_memory_limit()
    n, k, m = 40, 256, 70
    q, s, sc, cb = storage(n, k, 4, 16)
    x = torch.randn(m, k, dtype=torch.bfloat16)
    cpu = ops.w4a8_int8_linear(x, q, s, sc, cb, None, None, 16, 256, torch.bfloat16)
    try:
        comfy_kitchen_c.set_linear_memory_limit(16 * 1024)  # a few 16-row blocks per chunk
        with kernels_of("emulated"):
            gpu = ops.w4a8_int8_linear(x, q, s, sc, cb, None, None, 16, 256, torch.bfloat16)
    finally:
        comfy_kitchen_c.set_linear_memory_limit(saved)
    assert_bitwise_equal(gpu, cpu, "row chunks")


@pytest.mark.parametrize("n,k", [(3072, 3072), (5120, 14336), (14336, 5120)])
def test_the_gpu_path_never_holds_the_whole_decoded_weight(n, k):
    """The scratch of a call (C's plan, which the op carves) holds the decoded part within
    W4A8_DECODE_BYTES, not the N x K int8 weight: the format's point is a 4-bit weight in memory."""
    for m in (1, 4096):  # the MMA records (decode_gemv 0) take the GEMM at every m
        scratch, padded = _C.int8_linear_plan(m, k, n, 16, 16, 1, 0, 2, 1, 2**62, linear.W4A8_DECODE_BYTES, 0)
        per_row_codes_and_acc = -(-m // 32) * 32 * (k + 4 + 4 * n)  # rows padded to the GEMM's 32 (CKC_GEMM_ROWS)
        assert padded is None
        assert scratch - per_row_codes_and_acc <= linear.W4A8_DECODE_BYTES + 4096 < n * k, (m, n, k, scratch)
        whole, _ = _C.int8_linear_plan(m, k, n, 16, 16, 1, 0, 2, 1, 2**62, n * k, 0)
        assert whole - per_row_codes_and_acc >= n * k  # the same plan with room for all rows holds them
    # canonical codes, up to 8 rows: the GEMV decodes in registers, no decoded part and no accumulator
    for m in (1, 8):
        scratch, _ = _C.int8_linear_plan(m, k, n, 16, 16, 1, 0, 2, 1, 2**62, linear.W4A8_DECODE_BYTES, 1)
        assert scratch <= m * (k + 4) + 8 * 256, (m, scratch)


def test_the_c_op_refuses_a_group_size_eager_does_not_have():
    """The C op checks its own arguments (the wrapper's checks cannot be its only guard): a
    group of 2 values would give the GEMV a scale per 4, so it is refused by name."""
    q, s, sc, cb = storage(16, 256, group=16)
    codes = (s.view(torch.uint8), cb, (2, 4, 0, 1))
    with kernels_of("emulated"), pytest.raises(ArgumentError, match="argument 'group_size': 2 must be >= 4"):
        linear._linear("w4a8_int8_linear", torch.randn(2, 256), q, sc, None, torch.float32, 256, 0, 256, 16,
                       codes=codes)


@pytest.mark.parametrize("parts", ["whole", "one row"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_correction_on_the_gpu_path(decode_bytes, parts, dtype):
    """On CUDA the correction form dequantizes a part of the rows at a time ("one row": a budget
    of one byte, so each part is one row) and writes each part's F.linear into its columns.  The
    parts are the CPU's dequantized rows bit for bit; each output is then the same K products
    summed in float32, in an order that may depend on the part's width, and rounded once to x's
    dtype with the bias: so the two agree within two float32 sums' error, 2 gamma_(K+1) (S + |b|),
    plus a rounding of each to the dtype, 2 u (S + |b|), S = sum |x_k w_k| (a wrong part, column
    or correction slice is off by a whole term)."""
    if parts != "whole":
        decode_bytes(1)
    n, k = 40, 256
    q, s, sc, cb = storage(n, k, 4, 16)
    g = torch.Generator().manual_seed(1)
    corr = (torch.randn(k // 16, n, generator=g) * 0.01).to(dtype)
    x = torch.randn(3, 5, k, generator=g).to(dtype)
    bias = torch.randn(n, generator=g).to(dtype)
    cpu = ops.w4a8_int8_linear(x, q, s, sc, cb, corr, bias, 16, 64, torch.float32)
    with kernels_of("emulated"):
        gpu = ops.w4a8_int8_linear(x, q, s, sc, cb, corr, bias, 16, 64, torch.float32)
        weight = ops.dequantize_w4a8_int8_weight(q, s, sc, cb, corr, 16, 64, dtype)
    assert_bitwise_equal(weight, ops.dequantize_w4a8_int8_weight(q, s, sc, cb, corr, 16, 64, dtype), "parts")
    mag = x.double().abs() @ weight.double().abs().t() + bias.double().abs()
    u32, unit = 2.0 ** -24, {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11, torch.float32: 2.0 ** -24}[dtype]
    gamma = (k + 1) * u32 / (1 - (k + 1) * u32)
    limit = 2 * (gamma + unit * (1 + gamma)) * mag + 2.0 ** -120
    diff = (gpu.double() - cpu.double()).abs()
    assert bool((diff <= limit).all()), f"{dtype} {parts}: off by {float((diff - limit).max())} past the bound"
    assert not bool((gpu == 0).all())


def test_bad_inputs_name_op_and_argument():
    q, s, sc, cb = storage(16, 256)
    x = torch.randn(2, 256)
    D, L, P = ops.dequantize_w4a8_int8_weight, ops.w4a8_int8_linear, ops.w4a8_packed_linear
    cases = [
        (D, ArgumentTypeError, "dequantize_w4a8_int8_weight: argument 'qdata'", (q.to(torch.uint8), s, sc)),
        (D, ArgumentTypeError, "argument 's_rel'", (q, s.to(torch.bfloat16), sc)),
        (D, ArgumentTypeError, "argument 's_channel'", (q, s, sc.half())),
        (D, ArgumentError, "argument 'qdata': packed row width", (q[:, :100], s, sc)),
        (D, ArgumentError, "argument 'group_size'", (q, s, sc, cb, None, 12)),
        (D, ArgumentError, "argument 'convrot_groupsize'", (q, s, sc, cb, None, 16, 48)),
        (D, ArgumentError, "argument 's_channel'", (q, s, sc[:3])),
        (D, ArgumentError, "argument 'codebook'", (q, s, sc, cb[:8])),
        (D, ArgumentError, "argument 'correction'", (q, s, sc, cb, torch.zeros(3, 16))),
        (D, ArgumentTypeError, "argument 'output_dtype'", (q, s, sc, cb, None, 16, 256, torch.int8)),
        (L, ArgumentError, "w4a8_int8_linear: argument 'x'", (torch.randn(2, 128), q, s, sc, cb)),
        (L, ArgumentTypeError, "argument 'x'", (x.to(torch.int32), q, s, sc, cb)),
        (L, ArgumentError, "argument 'bias'", (x, q, s, sc, cb, None, torch.zeros(3))),
        (L, ArgumentError, "argument 'input_act'", (x, q, s, sc, cb, None, None, 16, 256, torch.bfloat16, "relu")),
        (L, ArgumentError, "argument 'correction'",
         (x, q, s, sc, cb, torch.zeros(16, 16), None, 16, 256, torch.bfloat16, "gelu_tanh")),
        (P, ArgumentError, "w4a8_packed_linear: argument 'qdata'", (x, q.reshape(-1), torch.empty(0), sc, cb)),
        (P, ArgumentError, "argument 's_rel'", (x, q.reshape(-1), s, sc, cb)),
        (P, ArgumentError, "argument 'group_size'", (x, q.reshape(-1), torch.empty(0), sc, cb, None, None, 32)),
    ]
    for fn, exc, words, args in cases:
        with pytest.raises(exc, match=words.replace("(", r"\(")):
            fn(*args)
    six = storage(16, 256, 6, 16)
    with pytest.raises(ArgumentError, match="argument 'codebook': 6-bit"):
        D(six[0], six[1], six[2], cb)
