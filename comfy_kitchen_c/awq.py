# SPDX-License-Identifier: Apache-2.0
"""gemv_awq_w4a16 (re-exported by ``comfy_kitchen_c.ops``): comfy_kitchen's AWQ W4A16 small-batch
GEMM, y = x @ W.T (+ bias), with the 4-bit weight decoded group by group inside the dot products
(W[n, k] = (q - 8) * wscales[k // G, n] + wzeros[k // G, n], eager's bits: csrc/math/awq.h).  The
sum is float32 in the kernels' order: the bound of docs/parity.md, not eager's bits.

The op serves the small batches it is made for (the modulation linears of Qwen-Image-Edit): x of
at most MAX_ROWS rows.  Beyond, eager's oneDNN GEMM over the dequantized weight is faster on the
CPU (benchmarks/README.md), so the check declines and the registry gives the call to eager."""
from __future__ import annotations

import torch

from . import _checks as check
from ._C import ArgumentError, ArgumentTypeError
from ._call import _run
from ._proved import checked as _checked

# The most rows of x a call may have: beyond, eager's GEMM over its dequantized weight catches up on
# the CPU (benchmarks/README.md, gemv_awq_w4a16: at K = N = 3072, 1 thread, ours is 2.9x eager at 16
# rows, 1.1x at 32, 0.5x at 64), so larger batches fall through to eager.
MAX_ROWS = 16


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
    if rows > MAX_ROWS:
        raise ArgumentError(f"{op}: argument 'x': {rows} rows; backend 'c' serves small batches of at most "
                            f"{MAX_ROWS} rows (beyond, eager's GEMM is faster)")
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
