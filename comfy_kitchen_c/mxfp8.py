# SPDX-License-Identifier: Apache-2.0
"""The MXFP8 ops (re-exported by ``comfy_kitchen_c.ops``): quantize_mxfp8, dequantize_mxfp8 and
scaled_mm_mxfp8, with comfy_kitchen's parameters.  Blocks of 32 values along a row share an E8M0
(power of two) scale; codes are float8_e4m3fn; the scales lie in cuBLAS's swizzled layout (the
NVFP4 one: tiles of 128 rows x 4 scale columns).  Codes and scales reach C as their bytes."""
from __future__ import annotations

import torch

from . import _C
from . import _checks as check
from ._C import ArgumentError, ArgumentTypeError
from ._call import _blas_search_dirs, _gpu_path, _round_up, _run, gemm_workspace, gpu_compute_capability
from ._kernels import KERNELS
from ._proved import checked as _checked

BLOCK = _C.MXFP8_BLOCK  # 32 values per E8M0 scale
# torch releases before float8_e8m0fnu: the scales can only be uint8 there
E8M0 = getattr(torch, "float8_e8m0fnu", None)
SCALE_DTYPES = tuple(d for d in (E8M0, torch.uint8) if d is not None)
CODE_DTYPES = (torch.float8_e4m3fn,)


def _scale_shape(rows: int, cols: int) -> tuple[int, int]:
    """The swizzled scale buffer of [rows, cols] codes (cols a multiple of 32)."""
    return (_round_up(rows, _C.NVFP4_SCALE_TILE_ROWS), _round_up(cols // BLOCK, _C.NVFP4_SCALE_TILE_COLS))


def _check_scales(op: str, name: str, scales, rows: int, cols: int) -> None:
    """Any shape holding exactly the swizzled buffer's entries (eager's from_blocked reshapes it)."""
    check.tensor(op, name, scales, SCALE_DTYPES, empty=True)
    want = _scale_shape(rows, cols)
    if scales.numel() != want[0] * want[1]:
        raise ArgumentError(f"{op}: argument '{name}': expected {want[0] * want[1]} elements (swizzled "
                            f"{list(want)}), got shape {list(scales.shape)}")


def _out_dtype(op: str, name: str, dtype) -> None:
    if dtype not in check.FLOAT_DTYPES:
        raise ArgumentTypeError(f"{op}: argument '{name}': expected float32, float16 or bfloat16, got {dtype!r}")


# ---- quantize_mxfp8 --------------------------------------------------------------------------

def check_quantize_mxfp8(x, pad_32x=False):
    op = "quantize_mxfp8"
    # any shape eager serves, empty ones too (its outputs are then empty)
    check.tensor(op, "x", x, check.FLOAT_DTYPES, ndim=2, empty=True)
    check.rows_of(op, "x", x)
    check.boolean(op, "pad_32x", pad_32x)
    if not pad_32x and x.shape[1] % BLOCK:
        raise ArgumentError(f"{op}: argument 'x': {x.shape[1]} columns is not a multiple of {BLOCK}; "
                            "pass pad_32x=True to pad")


def quantize_mxfp8(x, pad_32x=False):
    """(qx float8_e4m3fn [R, C], block scales float8_e8m0fnu swizzled [roundup(R, 128),
    roundup(C / 32, 4)]), R, C = x's shape, each rounded up to 32 with zeros when pad_32x: eager's
    codes and scales bit for bit (csrc/math/mxfp8.h)."""
    op = "quantize_mxfp8"
    _checked(check_quantize_mxfp8, x, pad_32x)
    rows, cols = x.shape
    out_rows, out_cols = (_round_up(rows, BLOCK), _round_up(cols, BLOCK)) if pad_32x else (rows, cols)
    qx = torch.empty(size=(out_rows, out_cols), dtype=torch.uint8, device=x.device)
    # The kernels write the scale buffer's padding too (scale 0): no memset.
    scales = torch.empty(size=_scale_shape(out_rows, out_cols), dtype=torch.uint8, device=x.device)
    _run("quantize_mxfp8", op, x.device, (x.contiguous(), qx, scales), ())
    return qx.view(torch.float8_e4m3fn), scales.view(E8M0) if E8M0 is not None else scales


# ---- dequantize_mxfp8 ------------------------------------------------------------------------

def check_dequantize_mxfp8(qx, block_scales, output_type=torch.bfloat16):
    op = "dequantize_mxfp8"
    check.tensor(op, "qx", qx, CODE_DTYPES, ndim=2, empty=True)
    rows, cols = check.rows_of(op, "qx", qx)
    if cols % BLOCK:  # eager reshapes the values to [rows, cols / 32, 32]
        raise ArgumentError(f"{op}: argument 'qx': {cols} columns is not a multiple of {BLOCK}")
    _check_scales(op, "block_scales", block_scales, rows, cols)
    check.same_device(op, qx=qx, block_scales=block_scales)
    return check.result_dtype(op, "output_type", output_type)


def dequantize_mxfp8(qx, block_scales, output_type=torch.bfloat16):
    """e4m3 value * E8M0 block scale in float32, rounded once to output_type (None: float32, as
    eager's .to(None)): eager's bits."""
    op = "dequantize_mxfp8"
    output_type = _checked(check_dequantize_mxfp8, qx, block_scales, output_type)
    rows, cols = qx.shape
    scales = block_scales.contiguous().view(torch.uint8).reshape(_scale_shape(rows, cols))
    out = torch.empty(size=(rows, cols), dtype=output_type, device=qx.device)
    _run("dequantize_mxfp8", op, qx.device, (qx.contiguous().view(torch.uint8), scales, out), ())
    return out


# ---- scaled_mm_mxfp8 -------------------------------------------------------------------------

def check_scaled_mm_mxfp8(a, b, block_scale_a, block_scale_b, bias=None, out_dtype=None):
    op = "scaled_mm_mxfp8"
    check.tensor(op, "a", a, CODE_DTYPES, ndim=2, empty=True)
    check.tensor(op, "b", b, CODE_DTYPES, ndim=2, empty=True)
    check.rows_of(op, "a", a)
    check.rows_of(op, "b", b)
    if a.shape[1] != b.shape[1]:
        raise ArgumentError(f"{op}: argument 'b': {b.shape[1]} columns, a has {a.shape[1]}")
    k = a.shape[1]
    if k == 0 or k % BLOCK:  # cuBLASLt's block-scaled GEMM takes whole blocks, and at least one
        raise ArgumentError(f"{op}: argument 'a': {k} columns is not a positive multiple of {BLOCK}")
    _check_scales(op, "block_scale_a", block_scale_a, a.shape[0], k)
    _check_scales(op, "block_scale_b", block_scale_b, b.shape[0], k)
    if bias is not None:
        check.tensor(op, "bias", bias, check.FLOAT_DTYPES, empty=True)
        if bias.numel() != b.shape[0]:
            raise ArgumentError(f"{op}: argument 'bias': expected {b.shape[0]} values, got shape {list(bias.shape)}")
    if out_dtype is not None:
        _out_dtype(op, "out_dtype", out_dtype)
    check.same_device(op, a=a, b=b, block_scale_a=block_scale_a, block_scale_b=block_scale_b, bias=bias)


def _cublaslt_mxfp8(device: torch.device, out_dtype: torch.dtype, n: int) -> bool:
    """Whether cuBLASLt's block-scaled MXFP8 GEMM takes the call: compute capability 10.0+, rows of
    the output 16-byte aligned (n % 8) and a 16-bit output, as for the FP4 GEMM.  The emulated
    device runs its C reference of that GEMM for every shape."""
    cc = gpu_compute_capability(device)
    if cc is None:
        return KERNELS.get() is not _C
    return cc >= (10, 0) and n % 8 == 0 and out_dtype in (torch.float16, torch.bfloat16)


def scaled_mm_mxfp8(a, b, block_scale_a, block_scale_b, bias=None, out_dtype=None):
    """out[M, N] = dec(a) @ dec(b)^T + bias, out_dtype None: bfloat16.  cuBLASLt's block-scaled
    MXFP8 GEMM on compute capability 10.0+; elsewhere each operand is dequantized exactly (an e4m3
    value times a power of two is exact in float32) and multiplied in float32, the bias added in
    float32, rounded once to out_dtype (the bound: tests/test_mxfp8_parity.py, docs/parity.md)."""
    op = "scaled_mm_mxfp8"
    _checked(check_scaled_mm_mxfp8, a, b, block_scale_a, block_scale_b, bias, out_dtype)
    out_dtype = torch.bfloat16 if out_dtype is None else out_dtype
    device = a.device
    m, n, k = a.shape[0], b.shape[0], a.shape[1]
    bias_out = None if bias is None else bias.to(out_dtype).reshape(-1).contiguous()
    if _gpu_path(device) and _cublaslt_mxfp8(device, out_dtype, n) and m > 0 and n > 0:
        scale_a = block_scale_a.contiguous().view(torch.uint8).reshape(_scale_shape(m, k))
        scale_b = block_scale_b.contiguous().view(torch.uint8).reshape(_scale_shape(n, k))
        out = torch.empty(size=(m, n), dtype=out_dtype, device=device)
        if device.type == "cuda":
            _blas_search_dirs()
        _run("scaled_mm_mxfp8", op, device, (a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8),
                                             scale_a, scale_b, bias_out, out, gemm_workspace(device)), ())
        return out
    y = dequantize_mxfp8(a, block_scale_a, torch.float32) @ dequantize_mxfp8(b, block_scale_b, torch.float32).T
    if bias_out is not None:
        y = y + bias_out.to(torch.float32)
    return y.to(out_dtype)
