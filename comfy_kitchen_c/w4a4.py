# SPDX-License-Identifier: Apache-2.0
"""The ConvRot W4A4 ops (re-exported by ``comfy_kitchen_c.ops``), with comfy_kitchen's
parameters: quantize_convrot_w4a4_weight, dequantize_convrot_w4a4_weight, convrot_w4a4_linear
and prepare_int4_weight_for_int8_linear.  Signed int4 codes, two per byte (the even column in
the low nibble), one float32 scale per row; the rotation is the regular Hadamard matrix of
ConvRot (the same as the int8 ConvRot ops', csrc/math/hadamard.h).  Packed tensors are int8
as eager's; they reach C as their uint8 bytes."""
from __future__ import annotations

import torch

from . import _checks as check
from ._C import ArgumentError, ArgumentTypeError
from ._call import _gpu_path, _run
from .linear import _library_gemm, linear_memory_limit
from ._proved import checked as _checked

INT4_GROUP = 64                 # eager's only quant_group_size (_INT4_GROUP_SIZE)
LINEAR_DTYPES = ("int4", "int8")  # eager runs both the same way on the CPU
MAX_K = 1 << 18                 # the exact accumulation's bound (csrc/math/int4.h, CKC_INT4_MAX_K)


def _noise(x: torch.Tensor, seed: int) -> torch.Tensor | None:
    """The uniform noise eager draws (_int4_stochastic_rng: x's shape and dtype), bit for bit."""
    return None if seed <= 0 else torch.rand(x.shape, dtype=x.dtype, device=x.device,
                                             generator=torch.Generator(device=x.device).manual_seed(seed))


def _quant_group(op: str, quant_group_size) -> None:
    check.integer(op, "quant_group_size", quant_group_size)
    if quant_group_size != INT4_GROUP:
        raise ArgumentError(f"{op}: argument 'quant_group_size': {quant_group_size} is not {INT4_GROUP} "
                            "(eager's int4 kernels take no other)")


def _rows(op: str, name: str, rows: int) -> None:
    """Eager's int4 unpacking reshapes to [rows, -1], which fails on 0 rows: so do we, by name."""
    if rows == 0:
        raise ArgumentError(f"{op}: argument '{name}': 0 rows (eager's int4 unpacking cannot reshape them)")


def _per_row(op: str, name: str, value, n: int, device, dtypes=check.FLOAT_DTYPES, ndim: int | None = 1) -> None:
    """A float tensor of n elements on device (eager broadcasts it as one value per row)."""
    check.tensor(op, name, value, dtypes, ndim=ndim, empty=True)
    if value.numel() != n:
        raise ArgumentError(f"{op}: argument '{name}': expected {n} elements, got shape {list(value.shape)}")
    if value.device != device:
        raise ArgumentError(f"{op}: argument '{name}' is on {value.device} but the codes are on {device}")


def _quantize_rows(op: str, x2d: torch.Tensor, group: int, seed: int):
    """(packed int8 codes [rows, K / 2], float32 scales [rows]) of the rows of x2d, each group
    of `group` columns rotated first (0: none)."""
    q = torch.empty(size=(x2d.shape[0], x2d.shape[1] // 2), dtype=torch.int8, device=x2d.device)
    scale = torch.empty(size=(x2d.shape[0],), dtype=torch.float32, device=x2d.device)
    _run("quantize_convrot_w4a4_weight", op, x2d.device, (x2d, q.view(torch.uint8), scale, _noise(x2d, seed)),
         (group,))
    return q, scale


# ---- quantize_convrot_w4a4_weight --------------------------------------------------------------

def check_quantize_convrot_w4a4_weight(weight, convrot_groupsize=256, quant_group_size=INT4_GROUP,
                                       stochastic_rounding=0):
    op = "quantize_convrot_w4a4_weight"
    _, k = check.rows_of(op, "weight", check.tensor(op, "weight", weight, check.FLOAT_DTYPES, ndim=2, empty=True))
    _quant_group(op, quant_group_size)
    check.row_length(op, "weight", k)
    if k % INT4_GROUP:
        raise ArgumentError(f"{op}: argument 'weight': in_features {k} is not divisible by quant_group_size "
                            f"{INT4_GROUP}")
    check.group_size(op, convrot_groupsize, k, "convrot_groupsize")
    return check.seed(op, stochastic_rounding)


def quantize_convrot_w4a4_weight(weight, convrot_groupsize=256, quant_group_size=INT4_GROUP, stochastic_rounding=0):
    """(packed int8 [N, K / 2], float32 scales [N]): weight rotated group-wise, then eager's
    row-wise signed int4 quantization (nearest even, or stochastic with eager's noise)."""
    op = "quantize_convrot_w4a4_weight"
    seed = _checked(check_quantize_convrot_w4a4_weight, weight, convrot_groupsize, quant_group_size,
                    stochastic_rounding)
    return _quantize_rows(op, weight.contiguous(), convrot_groupsize, seed)


# ---- dequantize_convrot_w4a4_weight ------------------------------------------------------------

def check_dequantize_convrot_w4a4_weight(qdata, scales, convrot_groupsize=256, quant_group_size=INT4_GROUP,
                                         output_dtype=torch.float32):
    op = "dequantize_convrot_w4a4_weight"
    rows, c = check.rows_of(op, "qdata", check.tensor(op, "qdata", qdata, (torch.int8,), ndim=2, empty=True))
    _rows(op, "qdata", rows)
    _quant_group(op, quant_group_size)
    _per_row(op, "scales", scales, rows, qdata.device)
    check.group_size(op, convrot_groupsize, 2 * c, "convrot_groupsize")
    return check.result_dtype(op, "output_dtype", output_dtype)


def dequantize_convrot_w4a4_weight(qdata, scales, convrot_groupsize=256, quant_group_size=INT4_GROUP,
                                   output_dtype=torch.float32):
    """[N, K] of output_dtype (None: float32, as eager's .to(None)): the codes times their row's
    scale (float32), rotated back."""
    op = "dequantize_convrot_w4a4_weight"
    output_dtype = _checked(check_dequantize_convrot_w4a4_weight, qdata, scales, convrot_groupsize, quant_group_size, output_dtype)
    q = qdata.contiguous().view(torch.uint8)
    out = torch.empty(size=(qdata.shape[0], 2 * qdata.shape[1]), dtype=output_dtype, device=qdata.device)
    _run("dequantize_convrot_w4a4_weight", op, qdata.device,
         (q, scales.to(torch.float32).contiguous(), out), (convrot_groupsize,))
    return out


# ---- prepare_int4_weight_for_int8_linear -------------------------------------------------------

def check_prepare_int4_weight_for_int8_linear(weight):
    op = "prepare_int4_weight_for_int8_linear"
    rows, _ = check.rows_of(op, "weight", check.tensor(op, "weight", weight, (torch.int8,), ndim=2, empty=True))
    _rows(op, "weight", rows)


def prepare_int4_weight_for_int8_linear(weight):
    """int8 [N, 2C]: the signed nibbles of weight [N, C] (low nibble first), bit for bit."""
    op = "prepare_int4_weight_for_int8_linear"
    _checked(check_prepare_int4_weight_for_int8_linear, weight)
    out = torch.empty(size=(weight.shape[0], 2 * weight.shape[1]), dtype=torch.int8, device=weight.device)
    _run("prepare_int4_weight_for_int8_linear", op, weight.device, (weight.contiguous().view(torch.uint8), out), ())
    return out


# ---- convrot_w4a4_linear -----------------------------------------------------------------------

def check_convrot_w4a4_linear(x, qweight, wscales, bias=None, convrot_groupsize=256, quant_group_size=INT4_GROUP,
                              linear_dtype="int4"):
    op = "convrot_w4a4_linear"
    if not isinstance(linear_dtype, str) or linear_dtype not in LINEAR_DTYPES:
        raise ArgumentError(f"{op}: argument 'linear_dtype': expected 'int4' or 'int8', got {linear_dtype!r}")
    m, k = check.rows_of(op, "x", check.tensor(op, "x", x, check.FLOAT_DTYPES, min_ndim=1, empty=True))
    n, c = check.rows_of(op, "qweight", check.tensor(op, "qweight", qweight, (torch.int8,), ndim=2, empty=True))
    _rows(op, "x", m)
    _rows(op, "qweight", n)
    _quant_group(op, quant_group_size)
    if k != 2 * c:
        raise ArgumentError(f"{op}: argument 'x': K = {k} does not match qweight's K = {2 * c}")
    check.row_length(op, "x", k)
    if k > MAX_K:
        raise ArgumentError(f"{op}: argument 'x': K = {k} is above {MAX_K} (the exact accumulation's bound)")
    check.group_size(op, convrot_groupsize, k, "convrot_groupsize")
    _per_row(op, "wscales", wscales, n, qweight.device)
    if bias is not None:
        _per_row(op, "bias", bias, n, qweight.device, ndim=None)
    check.same_device(op, x=x, qweight=qweight)


def convrot_w4a4_linear(x, qweight, wscales, bias=None, convrot_groupsize=256, quant_group_size=INT4_GROUP,
                        linear_dtype="int4"):
    """x @ W.T + bias as eager's ConvRot W4A4 path: x rotated and quantized to int4 per row, the
    int4 GEMM accumulated exactly, scaled by both scales and biased, each step in x's dtype."""
    op = "convrot_w4a4_linear"
    _checked(check_convrot_w4a4_linear, x, qweight, wscales, bias, convrot_groupsize, quant_group_size, linear_dtype)
    k = x.shape[-1]
    x2d = x.reshape(-1, k).contiguous()
    m, n = x2d.shape[0], qweight.shape[0]
    out = torch.empty(size=(m, n), dtype=x.dtype, device=x.device)
    qa, x_scale = _quantize_rows(op, x2d, convrot_groupsize, 0)
    qa, qw = qa.view(torch.uint8), qweight.contiguous().view(torch.uint8)
    ws, b = wscales.contiguous(), None if bias is None else bias.contiguous()
    if not _gpu_path(x.device) and _library_gemm(m, k, n):
        _linear_library(op, qa, x_scale, qw, ws, b, out)
    else:
        _run("convrot_w4a4_linear", op, x.device, (qa, x_scale, qw, ws, b, None, out), ())
    return out.reshape(*x.shape[:-1], n)


def _unpacked(op: str, packed: torch.Tensor) -> torch.Tensor:
    out = torch.empty(size=(packed.shape[0], 2 * packed.shape[1]), dtype=torch.int8, device=packed.device)
    _run("prepare_int4_weight_for_int8_linear", op, packed.device, (packed, out), ())
    return out


def _linear_library(op: str, qa, x_scale, qw, ws, bias, out) -> None:
    """The CPU linear from 16 rows on (linear._library_gemm, as int8_linear): the codes unpacked to
    int8 (ours), the int32 sums from torch._int_mm (oneDNN's VNNI GEMM, faster there than our C
    GEMM and than eager's bfloat16 matmul; int32 sums of int8 products are exact in any order, so
    the result is the same), our epilogue; rows in chunks whose sums fit the linear memory limit."""
    m, n = out.shape
    a8, w8t = _unpacked(op, qa), _unpacked(op, qw).t()
    rows = max(1, min(m, linear_memory_limit() // (4 * n)))
    acc = torch.empty(size=(rows, n), dtype=torch.int32)
    for r0 in range(0, m, rows):
        c = min(rows, m - r0)
        torch._int_mm(a8[r0:r0 + c], w8t, out=acc[:c])
        _run("convrot_w4a4_linear", op, out.device,
             (qa[r0:r0 + c], x_scale[r0:r0 + c], qw, ws, bias, acc[:c], out[r0:r0 + c]), ())
