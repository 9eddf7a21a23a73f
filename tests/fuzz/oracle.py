# SPDX-License-Identifier: Apache-2.0
"""What a fuzzed call must give: eager's result within docs/parity.md's bounds, or one of
our documented exceptions whose message starts with the op and names one of its arguments.

Each ``compare_*`` raises ``Mismatch`` with what differs; the bounds are docs/parity.md's:
bit for bit where eager is deterministic (NaN-aware: docs/parity.md's table of results where eager's
are undefined says what we give there), and for the rotated ops codes within 1 and rotated
values within a unit in the last place of the output dtype of the row's largest value."""
from __future__ import annotations

import re

import torch

import comfy_kitchen_c as ckc


class Mismatch(AssertionError):
    pass


ROTATED_SCALE_RTOL = 1e-5  # docs/parity.md (tests/conftest.py: ROTATED_SCALE_RTOL)
ERROR_FORM = re.compile(r"^(\w+): argument '(\w+)'")


def check_error(op: str, params, exc: BaseException) -> None:
    """exc is ours, of the documented kinds, names op and one of its parameters."""
    if not isinstance(exc, (ckc.ArgumentError, ckc.ArgumentTypeError)):
        raise Mismatch(f"{op}: undocumented exception {type(exc).__name__}: {exc}") from exc
    m = ERROR_FORM.match(str(exc))
    if m is None or m.group(1) != op:
        raise Mismatch(f"{op}: error does not start with \"{op}: argument '...'\": {exc}")
    if m.group(2) not in params:
        raise Mismatch(f"{op}: error names '{m.group(2)}', not one of its arguments {list(params)}: {exc}")


def _tuple(v):
    return v if isinstance(v, tuple) else (v,)


def same_form(ours, ref) -> None:
    ours, ref = _tuple(ours), _tuple(ref)
    if len(ours) != len(ref):
        raise Mismatch(f"{len(ours)} results, eager gives {len(ref)}")
    for k, (a, b) in enumerate(zip(ours, ref)):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise Mismatch(f"result {k}: {a.dtype}{list(a.shape)}, eager {b.dtype}{list(b.shape)}")


# float8 compared as bytes (E8M0 scales: MXFP8's, where torch has them)
BYTE_FLOATS = tuple(d for d in (torch.float8_e4m3fn, torch.float8_e5m2, getattr(torch, "float8_e8m0fnu", None))
                    if d is not None)


def bits_equal(a: torch.Tensor, b: torch.Tensor, what: str, zero_signs: bool = True) -> None:
    """Same values, NaN where eager has NaN (any payload), zeros of the same sign unless not
    zero_signs; float8 and codes as bytes."""
    if a.dtype in BYTE_FLOATS:  # torch has no signbit for float8
        a, b = a.view(torch.uint8), b.view(torch.uint8)
    if a.dtype.is_floating_point:
        same = (a == b) | (torch.isnan(a) & torch.isnan(b))
        # +0.0 and -0.0 compare equal; their bits must agree too
        if zero_signs:
            same &= (torch.signbit(a) == torch.signbit(b)) | torch.isnan(a)
    else:
        same = a == b
    if not bool(same.all()):
        bad = (~same).nonzero()[0].tolist()
        raise Mismatch(f"{what}: {int((~same).sum())} of {a.numel()} differ, first at {bad}: "
                       f"{a[tuple(bad)].item()!r} vs eager {b[tuple(bad)].item()!r}")


# ---- int8 quantization --------------------------------------------------------------------------

def _undefined_codes(x_used: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Where eager's code is undefined: its pre-cast value x / scale is NaN (a NaN input, inf/inf,
    a NaN scale), which torch casts to int8 as the hardware likes.  docs/parity.md: ours are 0 there."""
    s = scale.to(x_used.dtype)
    s = torch.where(s == 0, torch.full_like(s, torch.finfo(x_used.dtype).tiny), s)
    return torch.isnan(x_used / s)


def _dtype_ulp(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """One unit in the last place of float16/bfloat16 at |values| (float64; the smallest normal's
    ulp below it)."""
    mantissa, min_exp = (10, -14) if dtype == torch.float16 else (7, -126)
    exp = torch.floor(torch.log2(values.clamp_min(2.0 ** min_exp))).clamp_min(min_exp)
    return torch.pow(2.0, exp - mantissa)


def compare_int8(ours, ref, x_used: torch.Tensor, rotated: bool) -> None:
    """(q, scale) of a quantizer; x_used: the values eager quantized (rotated for the ConvRot ops,
    by eager's formula in float32: this CPU's bfloat16 matmul may flush subnormals, docs/parity.md)."""
    same_form(ours, ref)
    (q, s), (qr, sr) = ours, ref
    if not rotated:
        bits_equal(s, sr, "scale")
    else:
        finite = torch.isfinite(sr)
        # a rotated value within an ulp of the dtype's largest may round to inf in one summation
        # order and not in the other: rows with values that large are free of this check
        near_max = x_used.float().abs().nan_to_num(posinf=0.0).amax(dim=-1, keepdim=True) >= (
            torch.finfo(x_used.dtype).max / 2) if x_used.dim() else torch.zeros((), dtype=torch.bool)
        if not torch.equal(torch.isfinite(s) | near_max, finite | near_max):
            raise Mismatch("scale: finite where eager's is not, or the reverse")
        finite &= torch.isfinite(s)
        # docs/parity.md: rotated scales within 1e-5 relative of eager's; from a 16-bit input, also
        # within one ulp of that dtype at the row's largest rotated value (amax = 127 * scale):
        # the rotated values are rounded to the input's dtype before the scale is taken, and a
        # float32 rotation a few ulps from a rounding midpoint rounds to either neighbour (the
        # rotated values' own one-ulp bound, below), which moves amax by one ulp
        tol = ROTATED_SCALE_RTOL * sr[finite].abs() + 1e-37
        if x_used.dtype in (torch.float16, torch.bfloat16):
            tol = tol + _dtype_ulp(127 * sr[finite].double().abs(), x_used.dtype) / 127
        far = (s[finite] - sr[finite]).abs() > tol
        if bool(far.any()):
            i = far.nonzero()[0, 0]
            raise Mismatch(f"rotated scale beyond 1e-5 relative (and a 16-bit input's ulp at amax): "
                           f"{s[finite][i].item()!r} vs eager "
                           f"{sr[finite][i].item()!r} ({x_used.dtype})")
    undefined = _undefined_codes(x_used, sr)
    free = torch.zeros_like(undefined)
    if rotated:
        # our row's scale not finite: codes 0 (docs/parity.md); only eager's (its rotation overflowed
        # where ours did not, within an ulp of the dtype's largest): its codes are no reference
        ours_bad = ~torch.isfinite(s).expand_as(undefined)
        free = ~torch.isfinite(sr).expand_as(undefined) & ~ours_bad
        undefined = (undefined & ~free) | ours_bad
    if bool((q[undefined] != 0).any()):
        raise Mismatch("codes where eager's are undefined (NaN / inf) are not 0")
    d = (q.int() - qr.int()).abs()[~undefined & ~free]
    limit = 1 if rotated else 0
    if d.numel() and int(d.max()) > limit:
        raise Mismatch(f"codes differ by {int(d.max())} (at most {limit})")


# ---- rotations and dequantization ----------------------------------------------------------------

def compare_rotation(ours: torch.Tensor, ref: torch.Tensor, source: torch.Tensor, group: int) -> None:
    """A rotated tensor, against the exact rotation of ``source`` (float64): our butterfly of
    log2(G) levels of additions in float32 is within (log2(G) + 4) * eps32 * sum|x|/sqrt(G) of it
    (the sum of the magnitudes of the terms of each output; 4: the product q * scale and the
    1/sqrt(G) factor, each rounded once), plus the final rounding to the output dtype (an ulp).
    ``ref`` (eager's) only fixes the form: its own summation order has its own error.  A group
    with a non-finite input, or large enough to overflow float32 in some order, is free."""
    same_form(ours, ref)
    if ours.numel() == 0:
        return
    from comfy_kitchen.tensor.int8_utils import _build_hadamard

    h = _build_hadamard(group, "cpu", torch.float64)
    x = source.double().reshape(-1, group)
    exact = x @ h
    magnitude = x.abs() @ h.abs()
    levels = group.bit_length() - 1
    bound = (levels + 4) * torch.finfo(torch.float32).eps * magnitude + torch.finfo(ours.dtype).eps * exact.abs()
    bound = bound + torch.finfo(ours.dtype).tiny  # subnormal outputs (float16/bfloat16 results)
    o = ours.double().reshape(-1, group)
    risky = ~torch.isfinite(x).all(dim=1, keepdim=True) | (magnitude.amax(dim=1, keepdim=True) > 1e38) | (
        exact.abs().amax(dim=1, keepdim=True) >= torch.finfo(ours.dtype).max / 2)
    bad = ~risky & ~((o - exact).abs() <= bound)  # NaN where it should not be: bad too
    if bool(bad.any()):
        i = bad.nonzero()[0].tolist()
        raise Mismatch(f"rotated value beyond the bound at group row {i}: {o[tuple(i)].item()!r} vs exact "
                       f"{exact[tuple(i)].item()!r} (bound {bound[tuple(i)].item():.3g}, G={group})")


def compare_dequant(ours, ref) -> None:
    same_form(ours, ref)
    bits_equal(ours, ref, "values")


# ---- NVFP4 ------------------------------------------------------------------------------------------

def _nibbles(q: torch.Tensor, hi_first: bool) -> torch.Tensor:
    """[rows, cols] e2m1 codes of packed bytes (element 2j first)."""
    hi, lo = q >> 4, q & 0x0F
    pair = (hi, lo) if hi_first else (lo, hi)
    return torch.stack(pair, dim=-1).reshape(q.shape[0], -1)


def compare_nvfp4(ours, ref, x: torch.Tensor | None, per_tensor_scale, hi_first: bool = True) -> None:
    """Codes and swizzled e4m3 scales bit for bit, except where eager's quotient value / (per-tensor
    scale x block scale) is NaN (a NaN value, a NaN block scale, inf / inf when the total scale
    overflows, an infinite or NaN per-tensor scale): eager's codes there come from casting NaN;
    ours are 0 (docs/parity.md).  x None: a reference of ours, bit for bit throughout."""
    same_form(ours, ref)
    (qx, sx), (qr, sr) = ours, ref
    bits_equal(sx, sr, "block scales")
    rows, packed = qx.shape
    if x is None or not rows or not packed:
        bits_equal(qx, qr, "codes")
        return
    from comfy_kitchen.float_utils import from_blocked

    cols = 2 * packed
    xp = torch.zeros(rows, cols)
    xp[: x.shape[0], : x.shape[1]] = x.float()
    blocks = from_blocked(sx, rows, cols // 16).float()  # [rows, blocks] block scales
    pts = per_tensor_scale if isinstance(per_tensor_scale, torch.Tensor) else torch.tensor(per_tensor_scale)
    total = (pts.float().reshape(()) * blocks).repeat_interleave(16, dim=1)
    undefined = torch.isnan(xp / torch.where(total == 0, 1.0, total)) & (total != 0)
    mine, theirs = _nibbles(qx, hi_first), _nibbles(qr, hi_first)
    if bool((mine[undefined] != 0).any()):
        raise Mismatch("codes whose quotient is NaN (eager's undefined) are not 0")
    bits_equal(mine[~undefined], theirs[~undefined], "codes")


# ---- linear ------------------------------------------------------------------------------------------

def compare_close(ours: torch.Tensor, ref: torch.Tensor, tol: torch.Tensor, what: str) -> None:
    """|ours - ref| <= tol elementwise, NaN and inf exactly where eager has them; elements whose
    bound is not finite (an overflow in one of the two roundings, a NaN in the bound) are free."""
    same_form(ours, ref)
    o, r = ours.double(), ref.double()
    tol = torch.broadcast_to(tol.double(), o.shape)
    held = torch.isfinite(tol)
    o, r, tol = o[held], r[held], tol[held]
    if not torch.equal(torch.isnan(o), torch.isnan(r)) or not torch.equal(torch.isinf(o), torch.isinf(r)):
        raise Mismatch(f"{what}: NaN or inf where eager's is finite, or the reverse")
    fin = torch.isfinite(r)
    bad = fin & ((o - r).abs() > tol)
    bad |= ~fin & (o != r) & ~torch.isnan(r)  # infinities of the other sign
    if bool(bad.any()):
        i = bad.nonzero()[0].tolist()
        raise Mismatch(f"{what}: {int(bad.sum())} beyond the bound, first at {i}: {o[tuple(i)].item()} vs "
                       f"{r[tuple(i)].item()} (bound {tol[tuple(i)].item():.3g})")
