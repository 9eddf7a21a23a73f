# SPDX-License-Identifier: Apache-2.0
"""gemv_awq_w4a16 (re-exported by ``comfy_kitchen_c.ops``): comfy_kitchen's AWQ W4A16 small-batch
GEMM, y = x @ W.T (+ bias), with the 4-bit weight decoded group by group inside the dot products
(W[n, k] = (q - 8) * wscales[k // G, n] + wzeros[k // G, n], eager's bits: csrc/math/awq.h).  The
sum is float32 in the kernels' order: the bound of docs/parity.md, not eager's bits.

The op is made for small batches (the modulation linears of Qwen-Image-Edit) and serves any number
of rows.  Beyond a few rows eager's GEMM over the dequantized weight is faster: on the CPU where
that is is measured on the machine (cpu_speed.py), on CUDA the registry gives calls of more than
GPU_MAX_ROWS rows to eager; both only when comfy_kitchen picks "c" by priority (backend.py)."""
from __future__ import annotations

import torch

from . import _checks as check
from ._C import ArgumentError, ArgumentTypeError
from ._call import _run
from ._proved import checked as _checked

# On CUDA, the most rows the registry gives "c" when it picks by priority: a GEMV that decodes the
# weight in the dot products is made for the modulation linears' one or few rows, and beyond, eager's
# dequantize-then-cuBLAS GEMM reads the weight once for all rows (not timed on a GPU yet; the CPU's
# boundary is measured on the machine, cpu_speed.py, where one idle 2-core Xeon gave ours 2.9x eager at
# 16 rows, 1.1x at 32, 0.5x at 64, K = N = 3072, 1 thread).
GPU_MAX_ROWS = 16


def _promoted(compute, bias):
    """The output dtype: eager's `out + bias` promotes the compute dtype with bias's."""
    return compute if bias is None else torch.promote_types(compute, bias.dtype)


def check_gemv_awq_w4a16(x, qweight, wscales, wzeros, bias=None, group_size=64):
    """(rows, K, N) of a call the kernels serve; raises, naming the op and argument, otherwise."""
    op = "gemv_awq_w4a16"
    check.tensor(op, "x", x, check.FLOAT_DTYPES, min_ndim=1, empty=True)
    check.tensor(op, "qweight", qweight, (torch.int8,), ndim=2, empty=True)
    check.tensor(op, "wscales", wscales, check.FLOAT_DTYPES, ndim=2, empty=True)
    check.tensor(op, "wzeros", wzeros, check.FLOAT_DTYPES, ndim=2, empty=True)
    if wzeros.dtype != wscales.dtype:
        raise ArgumentTypeError(f"{op}: argument 'wzeros': expected wscales' dtype {wscales.dtype}, "
                                f"got {wzeros.dtype}")
    group = check.integer(op, "group_size", group_size)
    rows, k = check.rows_of(op, "x", x)
    if k == 0:  # eager fails there (its unpacking reshapes 0 elements to [-1, 0])
        raise ArgumentError(f"{op}: argument 'x': rows of 0 elements (K = 0)")
    if group <= 0 or k % group != 0:
        raise ArgumentError(f"{op}: argument 'group_size': {group} does not divide K={k}")
    n = qweight.shape[0]
    if n == 0:  # eager fails there too (the same reshape)
        raise ArgumentError(f"{op}: argument 'qweight': no rows (N = 0)")
    if qweight.shape[1] * 2 != k:
        raise ArgumentError(f"{op}: argument 'qweight': expected shape [N, {k // 2}] for K={k}, "
                            f"got {list(qweight.shape)}")
    for name, t in (("wscales", wscales), ("wzeros", wzeros)):
        if list(t.shape) != [k // group, n]:
            raise ArgumentError(f"{op}: argument '{name}': expected shape [{k // group}, {n}] "
                                f"(K / group_size, N), got {list(t.shape)}")
    if bias is not None:
        check.tensor(op, "bias", bias, check.FLOAT_DTYPES, ndim=1, empty=True)
        if bias.shape[0] != n:
            raise ArgumentError(f"{op}: argument 'bias': expected shape [{n}], got {list(bias.shape)}")
    check.same_device(op, x=x, qweight=qweight, wscales=wscales, wzeros=wzeros, bias=bias)
    return rows, k, n


def gemv_awq_w4a16(x, qweight, wscales, wzeros, bias=None, group_size=64):
    """x @ W.T (+ bias) of the AWQ weight, in wscales' dtype (promoted with bias's, as eager)."""
    op = "gemv_awq_w4a16"
    rows, k, n = _checked(check_gemv_awq_w4a16, x, qweight, wscales, wzeros, bias, group_size)
    compute = wscales.dtype
    shape = (*x.shape[:-1], n)
    if rows == 0:  # eager's empty result, nothing to launch
        return torch.empty(size=shape, dtype=_promoted(compute, bias), device=x.device)
    # x in the compute dtype (eager's x.to(compute)), handed over as float32
    x32 = x.reshape(rows, k).to(compute).to(torch.float32).contiguous()
    out = torch.empty(size=(rows, n), dtype=_promoted(compute, bias), device=x.device)
    _run("gemv_awq_w4a16", op, x.device,
         (x32, qweight.contiguous().view(torch.uint8), wscales.contiguous(), wzeros.contiguous(),
          None if bias is None else bias.contiguous(), out), (group_size,))
    return out.reshape(shape)
