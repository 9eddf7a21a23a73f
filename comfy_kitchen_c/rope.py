# SPDX-License-Identifier: Apache-2.0
"""The RoPE ops of backend "c": apply_rope1, apply_rope, their in-place forms and the
split-half forms, as comfy_kitchen's eager backend computes them (bit for bit: csrc/math/rope.h).

All eight are one C op, ``apply_rope1`` (csrc/ops/rope.c), over one tensor per call: the paired
ops call it once for xq and once for xk (each tensor is read and written once either way; one C
op over both would save only a launch, and the two may differ in shape).  The in-place ops pass
x itself as the output where x is contiguous, else compute into a new tensor and copy it into
x, as eager does.  Re-exported by ``comfy_kitchen_c.ops``.
"""
from __future__ import annotations

import torch

from . import _checks as check
from ._C import ArgumentError, ArgumentTypeError
from ._call import _run
from ._proved import checked as _checked

# x's rank: freqs_cis takes two more dims, within C's 8 (csrc/contract/tensor.h).
_MAX_NDIM = 6


def _trim(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """Eager's trim_rope_freqs (comfy_kitchen/_rope_utils.py): extra sequence positions of
    freqs_cis dropped (the interleaved ops only)."""
    if x.ndim > 2 and freqs_cis.ndim > 2 and x.shape[2] != 1 and freqs_cis.shape[2] > x.shape[2]:
        return freqs_cis[:, :, : x.shape[2]]
    return freqs_cis


def _check_one(op: str, name: str, x, freqs_cis, split_half: bool, like=None) -> torch.Tensor:
    """freqs_cis as the C op takes it (x's rank + 2 dims, leading ones 1 or x's), for the one
    tensor x; refuses what eager would broadcast otherwise or computes in another dtype.
    like: (x', result) of the pair's other tensor, checked with this freqs_cis: x's own checks
    run, and where x has x''s shape the freqs part (a function of the shapes alone) is its result."""
    check.tensor(op, name, x, check.FLOAT_DTYPES, min_ndim=1, empty=True)
    check.tensor(op, "freqs_cis", freqs_cis, (torch.float32,), min_ndim=3, empty=True)
    check.same_device(op, **{name: x, "freqs_cis": freqs_cis})
    shape = x.shape
    ndim = len(shape)
    if ndim > _MAX_NDIM:
        raise ArgumentError(f"{op}: argument '{name}': at most {_MAX_NDIM} dimensions, got shape {list(shape)}")
    check.rows_of(op, name, x)
    d = shape[-1]
    if d % 2:
        raise ArgumentError(f"{op}: argument '{name}': last dimension {d} is odd (RoPE rotates pairs)")
    if (x.requires_grad or freqs_cis.requires_grad) and torch.is_grad_enabled():
        raise ArgumentError(f"{op}: argument '{name}': requires grad (backend 'c' is inference only)")
    if not split_half and x.numel() == 0:
        # as eager, whose reshape(..., -1, 1, 2) of no elements is ambiguous
        raise ArgumentError(f"{op}: argument '{name}': empty tensor of shape {list(shape)}")
    if like is not None and like[0].shape == shape:
        return like[1]
    f = freqs_cis if split_half else _trim(x, freqs_cis)
    lead = f.shape[:-3]
    if f.shape[-3:] != (d // 2, 2, 2) or len(lead) > ndim - 1:
        raise ArgumentError(f"{op}: argument 'freqs_cis': shape {list(freqs_cis.shape)} does not fit "
                            f"'{name}' of shape {list(shape)} (expected [..., {d // 2}, 2, 2])")
    full = len(lead) == ndim - 1  # ComfyUI's freqs_cis [B, 1, T, D/2, 2, 2] for x [B, H, T, D]: no reshape
    if not full:
        lead = (1,) * (ndim - 1 - len(lead)) + tuple(lead)
    for fd, xd in zip(lead, shape[:-1]):
        if fd != 1 and fd != xd:
            raise ArgumentError(f"{op}: argument 'freqs_cis': shape {list(freqs_cis.shape)} does not broadcast "
                                f"to '{name}' of shape {list(shape)}")
    return f if full else f.reshape(*lead, d // 2, 2, 2)


def _check_pair(op: str, xq, xk, freqs_cis, split_half: bool) -> tuple:
    """_check_one for xq, then for xk (taking xq's freqs part where the shapes agree)."""
    fq = _check_one(op, "xq", xq, freqs_cis, split_half)
    return fq, _check_one(op, "xk", xk, freqs_cis, split_half, like=(xq, fq))


def _check_inplace(op: str, *xs, readonly=(), names=None) -> None:
    """Eager's check_rope_inplace rules, refused here with the argument named (x; or xq, xk: each
    alone first, then the pair, whose overlap is xk's fault) so that eager raises its own error.
    One call of eager's check over them all comes first (it checks each as alone, then the pair):
    only a refusal runs the named sequence, which refuses again, naming the argument."""
    from comfy_kitchen._rope_utils import check_rope_inplace
    try:
        check_rope_inplace(*xs, readonly=readonly)
        return
    except (RuntimeError, ValueError):
        pass
    names = names or (("x",) if len(xs) == 1 else ("xq", "xk"))
    for name, x in zip(names, xs):
        try:
            check_rope_inplace(x, readonly=readonly)
        except (RuntimeError, ValueError) as exc:
            raise ArgumentError(f"{op}: argument '{name}': {exc}") from None
    try:
        check_rope_inplace(*xs, readonly=readonly)
    except (RuntimeError, ValueError) as exc:
        raise ArgumentError(f"{op}: argument '{names[-1]}': {exc}") from None


def _rope(op: str, x: torch.Tensor, f: torch.Tensor, split_half: bool, out: torch.Tensor | None = None):
    xc = x.contiguous()
    if out is None:
        out = torch.empty_like(xc)
    _run("apply_rope1", op, x.device, (xc, f.contiguous(), out), (int(split_half),))
    return out


def _rope_(op: str, x: torch.Tensor, f: torch.Tensor, split_half: bool) -> torch.Tensor:
    if x.is_contiguous() and not x.is_neg():  # a negation-bit view is exported as a copy (_call._capsule)
        _rope(op, x, f, split_half, out=x)
    else:
        x.copy_(_rope(op, x, f, split_half))
    return x


# ---- interleaved: pair k is (x[2k], x[2k+1]) ----------------------------------------------------

def check_apply_rope1(x, freqs_cis):
    return _check_one("apply_rope1", "x", x, freqs_cis, False)


def apply_rope1(x, freqs_cis):
    """x rotated by freqs_cis [..., D/2, 2, 2] (float32), in x's dtype."""
    return _rope("apply_rope1", x, _checked(check_apply_rope1, x, freqs_cis), False)


def check_apply_rope(xq, xk, freqs_cis):
    return _check_pair("apply_rope", xq, xk, freqs_cis, False)


def apply_rope(xq, xk, freqs_cis):
    fq, fk = _checked(check_apply_rope, xq, xk, freqs_cis)
    return _rope("apply_rope", xq, fq, False), _rope("apply_rope", xk, fk, False)


def check_apply_rope1_(x, freqs_cis):
    f = _check_one("apply_rope1_", "x", x, freqs_cis, False)
    _check_inplace("apply_rope1_", x, readonly=(freqs_cis,))
    return f


def apply_rope1_(x, freqs_cis):
    return _rope_("apply_rope1_", x, _checked(check_apply_rope1_, x, freqs_cis), False)


def check_apply_rope_(xq, xk, freqs_cis):
    fs = _check_pair("apply_rope_", xq, xk, freqs_cis, False)
    _check_inplace("apply_rope_", xq, xk, readonly=(freqs_cis,))
    return fs


def apply_rope_(xq, xk, freqs_cis):
    fq, fk = _checked(check_apply_rope_, xq, xk, freqs_cis)
    return _rope_("apply_rope_", xq, fq, False), _rope_("apply_rope_", xk, fk, False)


# ---- split half: pair k is (x[k], x[k + D/2]) ---------------------------------------------------

def check_apply_rope_split_half1(x, freqs_cis):
    return _check_one("apply_rope_split_half1", "x", x, freqs_cis, True)


def apply_rope_split_half1(x, freqs_cis):
    return _rope("apply_rope_split_half1", x, _checked(check_apply_rope_split_half1, x, freqs_cis), True)


def check_apply_rope_split_half(xq, xk, freqs_cis):
    return _check_pair("apply_rope_split_half", xq, xk, freqs_cis, True)


def apply_rope_split_half(xq, xk, freqs_cis):
    fq, fk = _checked(check_apply_rope_split_half, xq, xk, freqs_cis)
    return _rope("apply_rope_split_half", xq, fq, True), _rope("apply_rope_split_half", xk, fk, True)


def check_apply_rope_split_half1_(x, freqs_cis):
    f = _check_one("apply_rope_split_half1_", "x", x, freqs_cis, True)
    _check_inplace("apply_rope_split_half1_", x, readonly=(freqs_cis,))
    return f


def apply_rope_split_half1_(x, freqs_cis):
    return _rope_("apply_rope_split_half1_", x, _checked(check_apply_rope_split_half1_, x, freqs_cis), True)


def check_apply_rope_split_half_(xq, xk, freqs_cis):
    fs = _check_pair("apply_rope_split_half_", xq, xk, freqs_cis, True)
    _check_inplace("apply_rope_split_half_", xq, xk, readonly=(freqs_cis,))
    return fs


def apply_rope_split_half_(xq, xk, freqs_cis):
    fq, fk = _checked(check_apply_rope_split_half_, xq, xk, freqs_cis)
    return _rope_("apply_rope_split_half_", xq, fq, True), _rope_("apply_rope_split_half_", xk, fk, True)
