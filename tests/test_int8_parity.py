# SPDX-License-Identifier: Apache-2.0
"""Parity of the int8 ops with comfy_kitchen's eager backend, on CPU.

Non-rotated quantization and every dequantization are bit-exact.  Rotated ops
are held to the tolerances in conftest.py (the rotation's summation order)."""
import pytest
import torch

from comfy_kitchen.tensor.int8_utils import _build_hadamard

import comfy_kitchen_c.ops as ops
from conftest import (DTYPE_IDS, FLOAT_DTYPES, assert_bitwise_equal, assert_rotated_quant_close,
                      assert_rotation_close)
from inputs import CASES

SHAPES = [(64, 512), (1, 1024), (7, 256)]  # several rows, one row, K equal to the group size
GROUPS = [4, 16, 64, 256, 1024]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("shape", SHAPES)
def test_quantize_rowwise_bit_exact(eager, dtype, case, shape):
    x = CASES[case](*shape, dtype)
    q, s = ops.quantize_int8_rowwise(x)
    q_ref, s_ref = eager.quantize_int8_rowwise(x)
    assert_bitwise_equal(s, s_ref, "scale")
    assert_bitwise_equal(q, q_ref, "codes")


def test_quantize_rowwise_any_rank_bit_exact(eager):
    """x of any rank goes to the C op in its own shape (a non-contiguous one copied first); q
    and scale come back as eager's, stochastic noise included."""
    x = CASES["normal"](2 * 3 * 5, 96, torch.bfloat16).reshape(2, 3, 5, 96)
    for rows in (x, x[0], x[0, 0], x[0, 0, 0], x.transpose(1, 2)):
        for seed in (0, 7):
            q, s = ops.quantize_int8_rowwise(rows, seed)
            q_ref, s_ref = eager.quantize_int8_rowwise(rows, seed)
            assert_bitwise_equal(s, s_ref, f"scale {tuple(rows.shape)} seed {seed}")
            assert_bitwise_equal(q, q_ref, f"codes {tuple(rows.shape)} seed {seed}")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
def test_quantize_tensorwise_bit_exact(eager, dtype, case):
    x = CASES[case](48, 320, dtype)
    for scale in (None, "recalculate", 0.05, torch.tensor(0.2, dtype=torch.bfloat16)):
        q, s = ops.quantize_int8_tensorwise(x, scale)
        q_ref, s_ref = eager.quantize_int8_tensorwise(x, scale)
        assert_bitwise_equal(s, s_ref, f"scale ({scale!r})")
        assert_bitwise_equal(q, q_ref, f"codes ({scale!r})")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_stochastic_rounding_matches_eager_noise(eager, dtype):
    x = CASES["normal"](33, 256, dtype)
    for seed in (1, 123):
        assert_bitwise_equal(ops.quantize_int8_rowwise(x, seed)[0], eager.quantize_int8_rowwise(x, seed)[0],
                             f"rowwise seed {seed}")
        assert_bitwise_equal(ops.quantize_int8_tensorwise(x, None, seed)[0],
                             eager.quantize_int8_tensorwise(x, None, seed)[0], f"tensorwise seed {seed}")
    assert not torch.equal(ops.quantize_int8_rowwise(x, 1)[0], ops.quantize_int8_rowwise(x, 2)[0])
    # <= 0 and None disable it
    plain = ops.quantize_int8_rowwise(x)[0]
    assert torch.equal(ops.quantize_int8_rowwise(x, 0)[0], plain)
    assert torch.equal(ops.quantize_int8_rowwise(x, -5)[0], plain)
    assert torch.equal(ops.quantize_int8_rowwise(x, None)[0], plain)


def test_stochastic_rounding_is_unbiased():
    x = torch.full((4096,), 0.5)
    x[0] = 127.0  # scale exactly 1
    q, s = ops.quantize_int8_rowwise(x.unsqueeze(0), 42)
    assert float(s) == 1.0
    assert 0.45 < float(q[0, 1:].float().mean()) < 0.55


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("group", GROUPS)
def test_quantize_and_rotate_rowwise(eager, dtype, case, group):
    x = CASES[case](32, 2048, dtype)
    h = _build_hadamard(group, "cpu", dtype)
    q, s = ops.quantize_and_rotate_rowwise(x, h, group)
    q_ref, s_ref = eager.quantize_and_rotate_rowwise(x, h, group)
    assert_rotated_quant_close(q, s, q_ref, s_ref, f"{case} G={group}")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("shape,group", [((64, 1024), 256), ((1, 256), 256), ((5, 64), 64), ((3, 16), 4)])
def test_quantize_convrot_weight(eager, dtype, case, shape, group):
    w = CASES[case](*shape, dtype)
    q, s = ops.quantize_int8_convrot_weight(w, group)
    q_ref, s_ref = eager.quantize_int8_convrot_weight(w, group)
    assert_rotated_quant_close(q, s, q_ref, s_ref, f"{case} G={group}")


def test_quantize_and_rotate_keeps_leading_dims(eager):
    x = CASES["normal"](2 * 3 * 4, 256, torch.bfloat16).reshape(2, 3, 4, 256)
    h = _build_hadamard(64, "cpu", torch.bfloat16)
    q, s = ops.quantize_and_rotate_rowwise(x, h, 64)
    q_ref, s_ref = eager.quantize_and_rotate_rowwise(x, h, 64)
    assert q.shape == (2, 3, 4, 256) and s.shape == (2, 3, 4, 1)
    assert_rotated_quant_close(q, s, q_ref, s_ref, "4-D")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("group", GROUPS)
def test_rotate_convrot_weight(eager, dtype, case, group):
    w = CASES[case](16, 2048, dtype)
    assert_rotation_close(ops.rotate_int8_convrot_weight(w, group), _eager_rotation(eager, w, group),
                          f"{case} G={group}")


def _eager_rotation(eager, w, group):
    """Eager's rotation; where this machine's bfloat16 matmul flushed subnormal inputs to zero
    (oneDNN's AVX512-BF16 and AMX kernels do: a row of subnormals rotates to all zeros), eager's
    formula in float32 rounded to bfloat16 instead. The flush is the CPU kernel's, not the op's
    result elsewhere; ours keeps subnormals (docs/parity.md)."""
    ref = eager.rotate_int8_convrot_weight(w, group)
    if w.dtype == torch.bfloat16 and bool(w.any()) and not bool(ref.any()):
        return eager.rotate_int8_convrot_weight(w.float(), group).to(w.dtype)
    return ref


def test_rotation_is_an_involution():
    w = CASES["normal"](8, 1024, torch.float32)
    for group in GROUPS:
        twice = ops.rotate_int8_convrot_weight(ops.rotate_int8_convrot_weight(w, group), group)
        torch.testing.assert_close(twice, w, rtol=0, atol=1e-5)


def _quantized(rows, cols, dtype=torch.bfloat16):
    return ops.quantize_int8_rowwise(CASES["outliers"](rows, cols, dtype))


SCALE_FORMS = {
    "per_row": lambda s, q: s,
    "scalar": lambda s, q: s[0, 0].clone(),
    "scalar_1x1": lambda s, q: s[:1, :1].clone(),
    "per_row_bf16": lambda s, q: s.to(torch.bfloat16),
    "full": lambda s, q: s.expand(q.shape).contiguous(),
    "per_column": lambda s, q: torch.rand(q.shape[-1]) + 0.5,
}


@pytest.mark.parametrize("form", SCALE_FORMS)
@pytest.mark.parametrize("code", [None, 0, 1, 2])
def test_dequantize_simple_bit_exact(eager, form, code):
    q, s = _quantized(40, 96)
    scale = SCALE_FORMS[form](s, q)
    if code is None:
        ours, ref = ops.dequantize_int8_simple(q, scale), eager.dequantize_int8_simple(q, scale)
    else:
        ours = ops.dequantize_int8_simple_dtype(q, scale, code)
        ref = eager.dequantize_int8_simple_dtype(q, scale, code)
    assert_bitwise_equal(ours, ref, f"{form} code={code}")


def test_dequantize_simple_any_rank(eager):
    q, s = _quantized(24, 64)
    q3, s3 = q.reshape(2, 12, 64), s.reshape(2, 12, 1)
    assert_bitwise_equal(ops.dequantize_int8_simple(q3, s3), eager.dequantize_int8_simple(q3, s3), "3-D")


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("code", [None, 0, 1, 2])
@pytest.mark.parametrize("scale_form", ["per_row", "scalar"])
def test_dequantize_convrot(eager, group, code, scale_form):
    q, s = ops.quantize_int8_convrot_weight(CASES["outliers"](24, 2048, torch.bfloat16), group)
    scale = SCALE_FORMS[scale_form](s, q)
    if code is None:
        ours = ops.dequantize_int8_convrot_weight(q, scale, group)
        ref = eager.dequantize_int8_convrot_weight(q, scale, group)
    else:
        ours = ops.dequantize_int8_convrot_weight_dtype(q, scale, group, code)
        ref = eager.dequantize_int8_convrot_weight_dtype(q, scale, group, code)
    assert_rotation_close(ours, ref, f"G={group} code={code}")


def test_all_zero_rows_give_zero_codes():
    """No -128 codes for zero rows, in every dtype (fp16's 1e-30 scale underflows to 0)."""
    for dtype in FLOAT_DTYPES:
        x = torch.zeros(3, 256, dtype=dtype)
        for q, s in (ops.quantize_int8_rowwise(x), ops.quantize_int8_tensorwise(x),
                     ops.quantize_int8_convrot_weight(x, 256)):
            assert torch.equal(q, torch.zeros_like(q)), dtype
            assert bool((s == 1e-30).all()), dtype


def test_non_finite_inputs_have_documented_results():
    """NaN rows: NaN scale, zero codes.  Rows with inf: inf scale, finite values give
    0 and inf values (inf/inf) give 0.  Other rows are unaffected."""
    for dtype in FLOAT_DTYPES:
        x = CASES["normal"](4, 64, dtype)
        x[1, 5] = float("nan")
        x[2, 7] = float("inf")
        x[2, 9] = -float("inf")
        q, s = ops.quantize_int8_rowwise(x)
        assert torch.isnan(s[1]).all() and torch.equal(q[1], torch.zeros_like(q[1]))
        assert torch.isinf(s[2]).all() and torch.equal(q[2], torch.zeros_like(q[2]))
        q_ref, s_ref = ops.quantize_int8_rowwise(x[[0, 3]])
        assert torch.equal(q[[0, 3]], q_ref) and torch.equal(s[[0, 3]], s_ref)
        # A rotation spreads a non-finite value over its group: the row's scale is not finite.
        qr, sr = ops.quantize_int8_convrot_weight(x, 16)
        assert not torch.isfinite(sr[1:3]).any() and torch.isfinite(sr[[0, 3]]).all()
        assert torch.equal(qr[1:3], torch.zeros_like(qr[1:3]))


def test_non_contiguous_inputs_are_read_correctly(eager):
    x = CASES["normal"](64, 512, torch.bfloat16)
    xt = x.t()  # (512, 64), not contiguous
    assert_bitwise_equal(ops.quantize_int8_rowwise(xt)[0], eager.quantize_int8_rowwise(xt)[0], "transposed")
    xs = x[:, ::2]
    assert_bitwise_equal(ops.quantize_int8_rowwise(xs)[1], eager.quantize_int8_rowwise(xs)[1], "strided")
    q, s = eager.quantize_int8_rowwise(x)
    assert_bitwise_equal(ops.dequantize_int8_simple(q.t(), s.t()), eager.dequantize_int8_simple(q.t(), s.t()),
                         "transposed dequant")
    ws = x[:, :256]
    assert_rotation_close(ops.rotate_int8_convrot_weight(ws, 64), eager.rotate_int8_convrot_weight(ws, 64),
                          "sliced weight")


def test_results_do_not_depend_on_thread_count():
    x = CASES["outliers"](257, 1024, torch.bfloat16)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = ops.quantize_int8_convrot_weight(x, 256), ops.quantize_int8_tensorwise(x)
        torch.set_num_threads(max(before, 2))
        many = ops.quantize_int8_convrot_weight(x, 256), ops.quantize_int8_tensorwise(x)
    finally:
        torch.set_num_threads(before)
    for a, b in zip(one, many):
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_bfloat16_division_free_path_is_exact(eager):
    """bfloat16 quantization multiplies by 1/scale instead of dividing (see
    csrc/math/int8_quant.h for why that is exact).  Every bfloat16 value
    against every bfloat16 significand as scale, at several exponents."""
    x = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)
    significands = 1.0 + torch.arange(128) / 128.0
    for exponent in (-126, -60, -8, 0, 7, 60, 125):
        for m in significands.tolist():
            scale = torch.tensor(m * 2.0**exponent, dtype=torch.bfloat16)
            q = ops.quantize_int8_tensorwise(x, scale)[0]
            q_ref = eager.quantize_int8_tensorwise(x, scale)[0]
            defined = ~torch.isnan(x.float() / scale.float())  # eager's int8 cast of NaN is undefined
            assert torch.equal(q[defined], q_ref[defined]), (exponent, m)
