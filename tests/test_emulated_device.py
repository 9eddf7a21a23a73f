# SPDX-License-Identifier: Apache-2.0
"""Every GPU entry point, run on the emulated device (the CUDA kernel sources
executed on the CPU), against the CPU path and comfy_kitchen eager.

The GPU kernels do the CPU kernels' arithmetic in the same order, so results
are compared bit for bit with the CPU path; the CPU path's parity with eager is
tested in test_int8_parity.py / test_nvfp4_parity.py, and a sample is checked
against eager here directly too."""
import sys

import pytest
import torch

from comfy_kitchen.float_utils import swap_nibbles

import comfy_kitchen_c as ckc
from comfy_kitchen_c import ops

if sys.platform == "win32":
    pytest.skip("the emulated device is not built on Windows yet", allow_module_level=True)
from comfy_kitchen_c.testing import emulated_device, emulated_only, has_emulated_device  # noqa: E402

if not has_emulated_device():
    pytest.skip("this build has no emulated device (_C_emu: development builds only)", allow_module_level=True)
from conftest import DTYPE_IDS, FLOAT_DTYPES, assert_bitwise_equal, assert_rotated_quant_close, assert_same
from inputs import CASES


def on_both(fn, *args, **kwargs):
    """(CPU path result, emulated GPU path result)."""
    cpu = fn(*args, **kwargs)
    with emulated_device():
        gpu = fn(*args, **kwargs)
    return cpu, gpu


# (rows, K): one row, K equal to the group, K not a multiple of 16, a row of two
# chunks per thread, rows of one pass of the tile kernels (20480: 640 threads a row),
# a row longer than one pass (33024: the general kernels' two-pass path for the plain
# quantizer, the tile's segments for the rotated one), a typical shape, and rows of
# 168 threads, so that a warp holds the end of one row and the start of the next.
ROW_SHAPES = [(1, 256), (5, 1024), (3, 100), (2, 5120), (2, 20480), (2, 33024), (40, 3072), (6, 5376)]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("rows,k", ROW_SHAPES)
def test_rowwise_quantization(dtype, case, rows, k):
    x = CASES[case](rows, k, dtype)
    assert_same(*on_both(ops.quantize_int8_rowwise, x), "rowwise")
    assert_same(*on_both(ops.quantize_int8_rowwise, x, 11), "rowwise stochastic")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("group", [4, 16, 64, 256, 1024])
def test_rotated_quantization(eager, dtype, case, group):
    for rows, k in [(3, 2048), (1, group), (2, 5120), (2, 20480)]:
        x = CASES[case](rows, k, dtype)
        cpu, gpu = on_both(ops.quantize_int8_convrot_weight, x, group)
        assert_same(cpu, gpu, f"convrot G={group} ({rows}, {k})")
        assert_same(*on_both(ops.rotate_int8_convrot_weight, x, group), f"rotate G={group}")
    ref = eager.quantize_int8_convrot_weight(x, group)
    assert_rotated_quant_close(*gpu, *ref, f"vs eager G={group}")


def test_rotated_quantization_keeps_leading_dims_and_stochastic_rounding():
    x = CASES["outliers"](24, 512, torch.bfloat16).reshape(2, 12, 512)
    assert_same(*on_both(ops.quantize_and_rotate_rowwise, x, None, 256, 5), "3-D stochastic")


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
def test_tensorwise_quantization(dtype, case):
    x = CASES[case](37, 300, dtype)
    for scale in (None, 0.07):
        assert_same(*on_both(ops.quantize_int8_tensorwise, x, scale), f"tensorwise {scale}")
    assert_same(*on_both(ops.quantize_int8_tensorwise, x, None, 3), "tensorwise stochastic")


@pytest.mark.parametrize("group", [0, 4, 16, 64, 256, 1024])
@pytest.mark.parametrize("code", [0, 1, 2])
def test_dequantization(eager, group, code):
    q, s = ops.quantize_int8_rowwise(CASES["outliers"](9, 2048, torch.bfloat16))
    for scale in (s, s[0, 0].clone(), s.expand(q.shape).contiguous()):
        if group:
            cpu, gpu = on_both(ops.dequantize_int8_convrot_weight_dtype, q, scale, group, code)
        else:
            cpu, gpu = on_both(ops.dequantize_int8_simple_dtype, q, scale, code)
        assert_same(cpu, gpu, f"dequant G={group} code={code}")
    if not group:
        assert_bitwise_equal(gpu, eager.dequantize_int8_simple_dtype(q, scale, code), "vs eager")


# The plain dequantizer's warp walk (kernels/int8.cu: lane l takes the quads at 4 l + 128 i of
# each 512 elements): rows shorter than a step (16, 48: a step crosses several row ends),
# between one and three steps (144, 272: at most one per step), a step's multiple (1024), odd
# rows (2043: per-row scales take the element path; one scale the flat walk when the values
# are whole quads (4 rows), else the 16-per-thread chunks, which end on a partial one (3 rows)).
WALK_SHAPES = [(3, 16), (11, 48), (5, 144), (33, 272), (9, 1024), (4, 2043), (3, 2043)]


@pytest.mark.parametrize("rows,cols", WALK_SHAPES)
def test_the_plain_dequantizers_warp_walk(rows, cols):
    q, s = ops.quantize_int8_rowwise(CASES["outliers"](rows, cols, torch.bfloat16))
    for scale in (s, s[0, 0].clone(), s.expand(q.shape).contiguous()):
        for code in (0, 1, 2):
            assert_same(*on_both(ops.dequantize_int8_simple_dtype, q, scale, code), f"{rows}x{cols} code={code}")
    assert_same(*on_both(ops.dequantize_int8_simple, q, s), f"{rows}x{cols} float32")


# NVFP4 shapes: aligned, rows not a multiple of 16, pad_16x (33, 65), and odd tile counts.
# Wide rows: 12288 (768 scale columns, the row layout's widest blocks), 14400 and 4112 padded
# (900 and 260 scale columns: no whole warps of rows fit a block, the 1-D layout).
NVFP4_SHAPES = [(256, 512, False), (129, 128, False), (33, 65, True), (16, 16, False), (48, 80, False),
                (16, 4080, False), (1, 7, True), (3, 12288, False), (2, 14400, False), (130, 4112, True)]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("rows,cols,pad", NVFP4_SHAPES)
def test_nvfp4(eager, dtype, case, rows, cols, pad):
    x = CASES[case](rows, cols, dtype)
    pts = (x.float().abs().amax() / 2688).clamp(min=1e-12).reshape(())
    for hi_first in (True, False):
        cpu, gpu = on_both(ops.quantize_nvfp4, x, pts, 0.0, pad, hi_first)
        assert_same(cpu, gpu, f"quantize hi_first={hi_first}")
        qx, sx = cpu
        for out in FLOAT_DTYPES:
            assert_same(*on_both(ops.dequantize_nvfp4, qx, pts, sx, out, hi_first), f"dequantize {out}")
    if case == "normal":
        qx_ref, sx_ref = eager.quantize_nvfp4(x, pts, 0.0, pad)
        assert_bitwise_equal(gpu[0], swap_nibbles(qx_ref), "vs eager codes (hi_first=False)")
        assert_bitwise_equal(gpu[1].view(torch.uint8), sx_ref.view(torch.uint8), "vs eager scales")


def test_misaligned_inputs_take_the_scalar_path():
    """A contiguous view whose data starts 2 bytes past an allocation: vector loads
    would be misaligned, so the kernels must fall back to scalar loads."""
    base = torch.randn(3 * 512 + 1).to(torch.bfloat16)
    x = base[1:].view(3, 512)
    assert x.data_ptr() % 16 != 0
    assert_same(*on_both(ops.quantize_and_rotate_rowwise, x, None, 256), "misaligned rotate")
    assert_same(*on_both(ops.quantize_int8_rowwise, x), "misaligned rowwise")


def off_by_one(t: torch.Tensor) -> torch.Tensor:
    """A copy of t whose data starts one element past an allocation."""
    view = torch.empty(t.numel() + 1, dtype=t.dtype)[1:].view(t.shape)
    view.copy_(t)
    return view


@pytest.mark.parametrize("group", [0, 4, 1024])
def test_misaligned_codes_and_scales_take_the_scalar_path(group):
    """The dequantizers read a thread's codes (and a full scale) with one vector load
    where rows are aligned: codes and scales one element past an allocation, and code
    rows not a multiple of 16 bytes long (K = 2044), take the scalar loads.  Without
    rotation (group 0), K = 2044 also makes chunks straddle rows: a per-row scale takes
    the element path, a single scale keeps the chunks and ends on a partial one."""
    for k in (2048, 2044) if group in (0, 4) else (2048,):
        q, s = ops.quantize_int8_rowwise(CASES["outliers"](5, k, torch.bfloat16))
        full = s.expand(q.shape).contiguous()
        cases = [(off_by_one(q), s), (q, off_by_one(full)), (off_by_one(q), off_by_one(full))]
        assert all(codes.data_ptr() % 16 != 0 or scale.data_ptr() % 16 != 0 for codes, scale in cases)
        if group == 0:
            cases += [(q, s), (q, s[0, 0].clone())]
        for codes, scale in cases:
            for code in (0, 1, 2):
                if group:
                    results = on_both(ops.dequantize_int8_convrot_weight_dtype, codes, scale, group, code)
                else:
                    results = on_both(ops.dequantize_int8_simple_dtype, codes, scale, code)
                assert_same(*results, f"misaligned dequant G={group} K={k} code={code}")
    x = CASES["normal"](32, 256, torch.bfloat16)
    pts = (x.float().abs().amax() / 2688).reshape(())
    qx, sx = ops.quantize_nvfp4(x, pts)
    assert off_by_one(qx).data_ptr() % 8 != 0
    for out in FLOAT_DTYPES:
        assert_same(*on_both(ops.dequantize_nvfp4, off_by_one(qx), pts, sx, out), f"misaligned FP4 codes {out}")


def test_emulated_device_is_scoped():
    from comfy_kitchen_c import _C, _C_emu
    emulated_only("_C_emu in KERNELS")
    with emulated_device():
        assert ops.KERNELS.get() is _C_emu
    assert ops.KERNELS.get() is _C
    # the emulated-device module raises the package's own exception classes
    x = torch.randn(4, 64)
    with pytest.raises(ckc.ArgumentError, match="op: argument 'q'"):
        _C_emu.quantize_int8_rowwise("op", x.__dlpack__(), torch.empty(2, 64, dtype=torch.int8).__dlpack__(),
                            torch.empty(4).__dlpack__(), None, 0, 0, 1)


def test_kernels_skipped_admits_work_without_running_it():
    """testing.kernels_skipped() (bench_host.py --emulated): the call's host path runs and its
    kernels are admitted but not run (an in-place op leaves its input as it was); after the
    block they run again."""
    from comfy_kitchen_c.testing import kernels_skipped

    q = torch.randn(1, 2, 4, 64).bfloat16()
    f = torch.randn(1, 1, 4, 32, 2, 2)
    before = q.clone()
    with emulated_device():
        with kernels_skipped():
            assert ops.apply_rope1_(q, f) is q
        assert torch.equal(q, before)
        ops.apply_rope1_(q, f)
    assert not torch.equal(q, before)
