# SPDX-License-Identifier: Apache-2.0
"""The parity bound of gemv_awq_w4a16 (docs/parity.md; derived in csrc/cpu/awq_impl.h), per
output: both eager's GEMM and ours sum the K products in float32, each in its own order, then round
once to the compute dtype, then add the bias as eager adds it.  Shared by the parity tests, the
layer test, the fuzz target and the selftest."""
from __future__ import annotations

import torch
from comfy_kitchen.backends.eager.awq import _unpack_uint4_row_major

U32 = 2.0 ** -24
UNIT = {torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11, torch.float32: U32}
TINY32 = 2.0 ** -126  # float32's smallest normal
SUBNORMAL = {torch.bfloat16: 2.0 ** -133, torch.float16: 2.0 ** -24, torch.float32: 2.0 ** -149}


def eager_weight(qweight, wscales, wzeros, group_size):
    """Eager's dequantized weight (N, K), its own torch ops (comfy_kitchen's awq.py)."""
    n = qweight.shape[0]
    k = qweight.shape[1] * 2
    w = _unpack_uint4_row_major(qweight).to(wscales.dtype).view(n, k // group_size, group_size)
    return ((w - 8.0) * wscales.t().unsqueeze(-1) + wzeros.t().unsqueeze(-1)).view(n, k)


def _finite_abs(t):
    t = t.abs()
    return torch.where(t.isfinite(), t, torch.zeros_like(t))


def bound(x, qweight, wscales, wzeros, bias, group_size):
    """|ours - eager| may reach this, per output (float64, the output's shape).  S sums the finite
    products' magnitudes: infinite or NaN products give eager's non-finite result in any order.
    Where S (+ |bias|) reaches the output dtype's overflow threshold, one order may overflow and
    another not (inf, or inf - inf = NaN, against a finite value): those outputs get an infinite
    bound, which assert_within does not compare."""
    compute = wscales.dtype
    w = eager_weight(qweight, wscales, wzeros, group_size).double()
    x2 = x.reshape(-1, x.shape[-1]).to(compute).double()
    k = x2.shape[1]
    gamma = k * U32 / (1 - k * U32)
    s = _finite_abs(x2) @ _finite_abs(w).t()
    uc = UNIT[compute]
    d = 2 * gamma * s + 2 * uc * (1 + gamma) * s + SUBNORMAL[compute]
    # Eager's BLAS may flush float32 subnormals to zero (inputs, products, its sum): the products
    # with a subnormal factor, each product below float32's smallest normal, and the result itself
    xa, wa = _finite_abs(x2), _finite_abs(w)
    d = d + (xa * (xa < TINY32)) @ wa.t() + xa @ (wa * (wa < TINY32)).t() + (k + 1) * TINY32
    out = compute
    reach = s
    if bias is not None:
        out = torch.promote_types(compute, bias.dtype)
        uo = U32 if out == torch.float32 else UNIT[out] + U32 * (1 + UNIT[out])
        y = (1 + uc) * (1 + gamma) * s + SUBNORMAL[compute]
        d = d + 2 * uo * (y + _finite_abs(bias.double())) + SUBNORMAL[out]
        reach = s + _finite_abs(bias.double())
    d = torch.where(reach * 1.01 < min(torch.finfo(out).max, torch.finfo(compute).max), d, float("inf"))
    return d.reshape(*x.shape[:-1], qweight.shape[0])


def assert_within(ours, ref, limit, what=""):
    """Same dtype and shape; where the bound is finite, equal where eager is not finite (NaN as
    NaN) and within the bound elsewhere."""
    assert ours.dtype == ref.dtype, f"{what}: dtype {ours.dtype} != eager's {ref.dtype}"
    assert ours.shape == ref.shape, f"{what}: shape {tuple(ours.shape)} != eager's {tuple(ref.shape)}"
    o, r = ours.double(), ref.double()
    checked = limit.isfinite()
    special = checked & ~r.isfinite()
    same = (o.isnan() & r.isnan()) | (o == r)
    assert bool(same[special].all()), f"{what}: non-finite outputs differ from eager's"
    err = (o - r).abs()
    bad = checked & r.isfinite() & ~(err <= limit)
    assert not bool(bad.any()), (f"{what}: {int(bad.sum())} of {o.numel()} outputs beyond the bound; worst "
                                 f"{float((err - limit)[bad].max()):.3g} over (err {float(err[bad].max()):.3g})")
