# SPDX-License-Identifier: Apache-2.0
"""Fuzz targets of the rms_rope ops (comfy_kitchen_c/rms_rope.py): x of the shapes ComfyUI's
models pass and others (rope_targets' draws), a scale of any float dtype (sometimes of the wrong
length), eps of several sizes, rms_rope_split_half's rot_dim, every layout of draw.py, NaN and Inf
among the values; eager's result is the oracle, bit for bit (csrc/math/rms_rope.h).  The in-place
targets are not run again on the emulated device (the first call already changed x):
tests/test_rms_rope_parity.py runs them there."""
from __future__ import annotations

import torch
from comfy_kitchen.backends.eager import rope as E

from draw import Draw
import rope_targets as R


def _scale(d: Draw, x: torch.Tensor) -> torch.Tensor:
    n = x.shape[-1] if d.chance(0.95) else x.shape[-1] + 1
    return d.layout(d.values((n,), d.float_dtype(0)))


def _eps(d: Draw, args: dict) -> dict:
    if d.chance(0.6):
        args["epsilon"] = d.pick((1e-6, 1e-5, 0.0, 1e-30, 1.0))
    return args


def _rot(d: Draw, args: dict, x: torch.Tensor) -> dict:
    """A rotated prefix for rms_rope_split_half (freqs_cis drawn for it), sometimes."""
    if d.chance(0.3) and x.shape[-1] >= 4:
        rot = 2 * d.int_in(1, x.shape[-1] // 2)
        args["rot_dim"] = rot
        args["freqs_cis"] = R._freqs(d, tuple(x.shape[:-1]) + (rot,), False)
    return args


def make_one(d: Draw, split: bool) -> dict:
    args = R.make_one(d, split)
    args["scale"] = _scale(d, args["x"])
    return _eps(d, args)


def make_two(d: Draw, split: bool, rot: bool) -> dict:
    a = R.make_two(d, split)
    args = {"q": a["xq"], "k": a["xk"], "freqs_cis": a["freqs_cis"], "q_scale": _scale(d, a["xq"])}
    if d.chance(0.5):
        args["k_scale"] = _scale(d, a["xk"])
    if rot:
        _rot(d, args, a["xq"])
    return _eps(d, args)


# Eager's rms_norm sums a strided row in another order than a contiguous one (its float32 bits
# depend on the layout: seed 11, inputs 3133, 7200); ours are those of the contiguous row whatever
# the layout (docs/parity.md, as for int8_linear's rms_norm), so eager is asked with the same
# values, contiguous.

def _ref_one(name: str):
    def ref(a):
        return getattr(E, name)(a["x"].contiguous(), a["freqs_cis"], a["scale"], a.get("epsilon", 1e-6))
    return ref


def _ref_two(name: str):
    def ref(a):
        extra = {"rot_dim": a["rot_dim"]} if "rot_dim" in a else {}
        return getattr(E, name)(a["q"].contiguous(), a["k"].contiguous(), a["freqs_cis"], a["q_scale"],
                                a.get("k_scale"), a.get("epsilon", 1e-6), **extra)
    return ref


def _in_place(name: str, names):
    """Eager's in-place op on copies of the inputs as drawn (R._remember keeps them)."""
    fn = getattr(E, name)

    def ref(a):
        clones = [R._BEFORE.get(id(a[n]), a[n]).clone(memory_format=torch.contiguous_format) for n in names]
        rest = {k: v for k, v in a.items() if k not in names}
        out = fn(*clones, **rest)
        return tuple(clones) if isinstance(out, tuple) else clones[0]
    return ref


def bad_eps(d: Draw, args: dict):
    return d.pick(("1e-6", None, torch.tensor(1e-6), [1e-6]))


def bad_rot(d: Draw, args: dict):
    return d.pick((-2, 3, 1.5, "all", None))


def targets(Target) -> list:
    one = ("x", "freqs_cis", "scale", "epsilon")
    two = ("q", "k", "freqs_cis", "q_scale", "k_scale", "epsilon")
    hostile_one = {"x": R.bad, "freqs_cis": R.bad, "scale": R.bad, "epsilon": bad_eps}
    hostile_two = {"q": R.bad, "k": R.bad, "freqs_cis": R.bad, "q_scale": R.bad, "epsilon": bad_eps}
    out = []
    for name, split in (("rms_rope1", False), ("rms_rope_split_half1", True)):
        out.append(Target(name, one, lambda d, s=split: make_one(d, s), _ref_one(name), R.compare, hostile_one))
        out.append(Target(name + "_", one, lambda d, s=split: R._remember(make_one(d, s), ("x",)),
                          _in_place(name + "_", ("x",)), R.compare, hostile_one, emulated_same_bits=None))
    for name, split in (("rms_rope", False), ("rms_rope_split_half", True)):
        params = two + ("rot_dim",) if split else two
        hostile = dict(hostile_two, rot_dim=bad_rot) if split else hostile_two
        out.append(Target(name, params, lambda d, s=split: make_two(d, s, s), _ref_two(name), R.compare, hostile))
        out.append(Target(name + "_", params, lambda d, s=split: R._remember(make_two(d, s, s), ("q", "k")),
                          _in_place(name + "_", ("q", "k")), R.compare, hostile, emulated_same_bits=None))
    return out
