# SPDX-License-Identifier: Apache-2.0
"""The rms_rope ops of backend "c": rms_rope1, rms_rope, their in-place forms and the split-half
forms (with rms_rope_split_half's partial rotary, rot_dim), as comfy_kitchen's eager backend
computes them: rms_norm(x, (D,), scale, eps) and then RoPE of the result, bit for bit
(csrc/math/rms_rope.h).

All eight are one C op, ``rms_rope1`` (csrc/ops/rope.c), over one tensor per call, which reads
x once and writes the result once (the norm's sum, the normalized values and the rotation in one
pass); the paired ops call it for q and for k.  The in-place ops pass x itself as the output where
x is contiguous, else compute into a new tensor and copy it into x, as eager does.  Re-exported by
``comfy_kitchen_c.ops``.
"""
from __future__ import annotations

import numbers
import struct

import torch

from . import _checks as check
from ._C import ArgumentError, ArgumentTypeError
from ._call import _run
from ._proved import checked as _checked
from .rope import _check_inplace, _check_one


def _eps(op: str, value) -> int:
    """eps's float32 bits (aten's rms_norm adds eps as a float32)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{op}: argument 'epsilon': expected a float, got {type(value).__name__}")
    return struct.unpack("<I", struct.pack("<f", float(value)))[0]


def _rot(op: str, value, d: int) -> int:
    """rot_dim: 0 (all of D) or an even prefix length; D or more rotates all of D, as eager's
    slice x_norm[..., :rot_dim] does.  A negative one (eager's slice from the end) is refused."""
    check.integer(op, "rot_dim", value)
    if value < 0 or value % 2:
        raise ArgumentError(f"{op}: argument 'rot_dim': expected 0 or an even length, got {value}")
    return 0 if value >= d else value


def _check_x(op: str, name: str, x, freqs_cis, scale, scale_name: str, split_half: bool, rot: int = 0,
             like=None):
    """(freqs_cis as the C op takes it, rot, the rotated part of x) for the one tensor x and its
    scale; like: the pair's other (rotated part, freqs_cis as taken), rope._check_one's."""
    check.tensor(op, name, x, check.FLOAT_DTYPES, min_ndim=1, empty=True)
    d = x.shape[-1]
    rot = _rot(op, rot, d)
    rotated = x[..., :rot] if rot else x
    f = _check_one(op, name, rotated, freqs_cis, split_half, like)
    check.tensor(op, scale_name, scale, check.FLOAT_DTYPES, ndim=1)
    check.same_device(op, **{name: x, scale_name: scale})
    if scale.shape[0] != d:
        raise ArgumentError(f"{op}: argument '{scale_name}': {scale.shape[0]} values for '{name}' of last "
                            f"dimension {d}")
    if torch.is_grad_enabled() and scale.requires_grad:
        raise ArgumentError(f"{op}: argument '{scale_name}': requires grad (backend 'c' is inference only)")
    return f, rot, rotated


def _pair(op: str, q, k, freqs_cis, q_scale, k_scale, epsilon, split_half: bool, rot_dim: int = 0):
    bits = _eps(op, epsilon)
    if k_scale is None:
        k_scale = q_scale
    # rot per tensor: eager slices each of q and k at rot_dim, so one of last dimension <= rot_dim is
    # rotated whole (0) while the other rotates its first rot_dim values
    fq, rot_q, q_rotated = _check_x(op, "q", q, freqs_cis, q_scale, "q_scale", split_half, rot_dim)
    fk, rot_k, _ = _check_x(op, "k", k, freqs_cis, k_scale, "k_scale", split_half, rot_dim, (q_rotated, fq))
    return fq, fk, k_scale, (rot_q, rot_k), bits


def _rms_rope(op, x, f, scale, split_half: bool, rot: int, bits: int, out=None):
    xc = x.contiguous()
    if out is None:
        out = torch.empty_like(xc)
    _run("rms_rope1", op, x.device, (xc, f.contiguous(), scale.contiguous(), out), (int(split_half), rot, bits))
    return out


def _rms_rope_(op, x, f, scale, split_half: bool, rot: int, bits: int):
    if x.is_contiguous() and not x.is_neg():  # a negation-bit view is exported as a copy (_call._capsule)
        _rms_rope(op, x, f, scale, split_half, rot, bits, out=x)
    else:
        x.copy_(_rms_rope(op, x, f, scale, split_half, rot, bits))
    return x


def _one(op: str, x, freqs_cis, scale, epsilon, split_half: bool):
    bits = _eps(op, epsilon)
    return _check_x(op, "x", x, freqs_cis, scale, "scale", split_half)[0], bits


def _inplace(op: str, *xs, readonly) -> None:
    """Eager's check_rope_inplace, refused with the argument named (x; or q, k)."""
    _check_inplace(op, *xs, readonly=readonly, names=("x",) if len(xs) == 1 else ("q", "k"))


# ---- interleaved: pair k is (x[2k], x[2k+1]) ----------------------------------------------------

def check_rms_rope1(x, freqs_cis, scale, epsilon=1e-6):
    return _one("rms_rope1", x, freqs_cis, scale, epsilon, False)


def rms_rope1(x, freqs_cis, scale, epsilon=1e-6):
    """rms_norm(x, (D,), scale, epsilon) rotated by freqs_cis [..., D/2, 2, 2] (float32), in x's dtype."""
    f, bits = _checked(check_rms_rope1, x, freqs_cis, scale, epsilon)
    return _rms_rope("rms_rope1", x, f, scale, False, 0, bits)


def check_rms_rope(q, k, freqs_cis, q_scale, k_scale=None, epsilon=1e-6):
    return _pair("rms_rope", q, k, freqs_cis, q_scale, k_scale, epsilon, False)


def rms_rope(q, k, freqs_cis, q_scale, k_scale=None, epsilon=1e-6):
    fq, fk, k_scale, _, bits = _checked(check_rms_rope, q, k, freqs_cis, q_scale, k_scale, epsilon)
    return (_rms_rope("rms_rope", q, fq, q_scale, False, 0, bits),
            _rms_rope("rms_rope", k, fk, k_scale, False, 0, bits))


def check_rms_rope1_(x, freqs_cis, scale, epsilon=1e-6):
    got = _one("rms_rope1_", x, freqs_cis, scale, epsilon, False)
    _inplace("rms_rope1_", x, readonly=(freqs_cis, scale))
    return got


def rms_rope1_(x, freqs_cis, scale, epsilon=1e-6):
    f, bits = _checked(check_rms_rope1_, x, freqs_cis, scale, epsilon)
    return _rms_rope_("rms_rope1_", x, f, scale, False, 0, bits)


def check_rms_rope_(q, k, freqs_cis, q_scale, k_scale=None, epsilon=1e-6):
    got = _pair("rms_rope_", q, k, freqs_cis, q_scale, k_scale, epsilon, False)
    _inplace("rms_rope_", q, k, readonly=(freqs_cis, q_scale, got[2]))
    return got


def rms_rope_(q, k, freqs_cis, q_scale, k_scale=None, epsilon=1e-6):
    fq, fk, k_scale, _, bits = _checked(check_rms_rope_, q, k, freqs_cis, q_scale, k_scale, epsilon)
    return (_rms_rope_("rms_rope_", q, fq, q_scale, False, 0, bits),
            _rms_rope_("rms_rope_", k, fk, k_scale, False, 0, bits))


# ---- split half: pair k is (x[k], x[k + R/2]), R the rotated length (rot_dim, or D) ------------

def check_rms_rope_split_half1(x, freqs_cis, scale, epsilon=1e-6):
    return _one("rms_rope_split_half1", x, freqs_cis, scale, epsilon, True)


def rms_rope_split_half1(x, freqs_cis, scale, epsilon=1e-6):
    f, bits = _checked(check_rms_rope_split_half1, x, freqs_cis, scale, epsilon)
    return _rms_rope("rms_rope_split_half1", x, f, scale, True, 0, bits)


def check_rms_rope_split_half(q, k, freqs_cis, q_scale, k_scale=None, epsilon=1e-6, rot_dim=0):
    return _pair("rms_rope_split_half", q, k, freqs_cis, q_scale, k_scale, epsilon, True, rot_dim)


def rms_rope_split_half(q, k, freqs_cis, q_scale, k_scale=None, epsilon=1e-6, rot_dim=0):
    """Partial rotary (rot_dim): the norm spans all of D, the first rot_dim values are rotated."""
    fq, fk, k_scale, rot, bits = _checked(check_rms_rope_split_half, q, k, freqs_cis, q_scale, k_scale, epsilon,
                                          rot_dim)
    return (_rms_rope("rms_rope_split_half", q, fq, q_scale, True, rot[0], bits),
            _rms_rope("rms_rope_split_half", k, fk, k_scale, True, rot[1], bits))


def check_rms_rope_split_half1_(x, freqs_cis, scale, epsilon=1e-6):
    got = _one("rms_rope_split_half1_", x, freqs_cis, scale, epsilon, True)
    _inplace("rms_rope_split_half1_", x, readonly=(freqs_cis, scale))
    return got


def rms_rope_split_half1_(x, freqs_cis, scale, epsilon=1e-6):
    f, bits = _checked(check_rms_rope_split_half1_, x, freqs_cis, scale, epsilon)
    return _rms_rope_("rms_rope_split_half1_", x, f, scale, True, 0, bits)


def check_rms_rope_split_half_(q, k, freqs_cis, q_scale, k_scale=None, epsilon=1e-6, rot_dim=0):
    got = _pair("rms_rope_split_half_", q, k, freqs_cis, q_scale, k_scale, epsilon, True, rot_dim)
    _inplace("rms_rope_split_half_", q, k, readonly=(freqs_cis, q_scale, got[2]))
    return got


def rms_rope_split_half_(q, k, freqs_cis, q_scale, k_scale=None, epsilon=1e-6, rot_dim=0):
    fq, fk, k_scale, rot, bits = _checked(check_rms_rope_split_half_, q, k, freqs_cis, q_scale, k_scale, epsilon,
                                          rot_dim)
    return (_rms_rope_("rms_rope_split_half_", q, fq, q_scale, True, rot[0], bits),
            _rms_rope_("rms_rope_split_half_", k, fk, k_scale, True, rot[1], bits))
