# SPDX-License-Identifier: Apache-2.0
"""Fuzz targets of the RoPE ops (comfy_kitchen_c/rope.py): x of the shapes ComfyUI's models pass
and others, freqs_cis broadcast or trimmed, every layout of draw.py, NaN and Inf among the values;
eager's result is the oracle, bit for bit (csrc/math/rope.h).  The in-place targets are not run
again on the emulated device (the first call already rotated x): tests/test_rope_parity.py runs
them there."""
from __future__ import annotations

import torch
from comfy_kitchen.backends.eager import rope as E

from draw import Draw
import oracle


def _freqs(d: Draw, x_shape, trim_room: bool) -> torch.Tensor:
    """freqs_cis for x: each leading dim 1 or x's (sometimes fewer dims), sometimes longer in
    dim 2 (trimmed by the interleaved ops), sometimes with an odd pair count (refused)."""
    lead = [1 if d.chance(0.5) else n for n in x_shape[:-1]]
    if trim_room and len(lead) >= 3 and lead[2] != 1 and d.chance(0.3):
        lead[2] += d.int_in(1, 4)
    if d.chance(0.2) and lead:
        lead = lead[d.int_in(0, len(lead)):]
    half = x_shape[-1] // 2 if d.chance(0.95) else x_shape[-1] // 2 + 1
    return d.layout(d.values((*lead, half, 2, 2), torch.float32))


def _x(d: Draw) -> torch.Tensor:
    ndim = d.int_in(1, 4)
    dim = 2 * d.int_in(1, 20) if d.chance(0.8) else d.pick((128, 64, 2 * d.int_in(1, 200) + 1))
    shape = tuple(d.extent(5) for _ in range(ndim - 1)) + (dim,)
    return d.layout(d.values(shape, d.float_dtype(0)))


def make_one(d: Draw, split: bool) -> dict:
    x = _x(d)
    return {"x": x, "freqs_cis": _freqs(d, tuple(x.shape), not split)}


def make_two(d: Draw, split: bool) -> dict:
    xq = _x(d)
    xk = d.layout(d.values(tuple(xq.shape), xq.dtype)) if d.chance(0.8) else _x(d)
    return {"xq": xq, "xk": xk, "freqs_cis": _freqs(d, tuple(xq.shape), not split)}


def bad(d: Draw, args: dict):
    u = d.r.random()
    if u < 0.4:
        return d.values((3, 16), torch.float32).to(d.pick((torch.float64, torch.int32, torch.bool)))
    if u < 0.6:
        return torch.tensor(1.5)
    if u < 0.8:
        return torch.empty(2, 16, device="meta")
    return d.junk()


def compare(ours, ref, args):
    oracle.same_form(ours, ref)
    for k, (a, b) in enumerate(zip(oracle._tuple(ours), oracle._tuple(ref))):
        oracle.bits_equal(a, b, f"result {k}")


# The values each drawn x had before our in-place call rotated it (run.py calls ours first, then
# the reference on the same arguments): keyed by the tensor's id, refilled by every draw.
_BEFORE: dict[int, torch.Tensor] = {}


def _remember(args: dict, names) -> dict:
    _BEFORE.clear()
    for n in names:
        _BEFORE[id(args[n])] = args[n].clone()
    return args


def _in_place(eager_fn, names):
    """Eager's in-place op on copies of the inputs as drawn."""
    def ref(a):
        clones = [_BEFORE.get(id(a[n]), a[n]).clone() for n in names]
        out = eager_fn(*clones, a["freqs_cis"])
        return tuple(clones) if isinstance(out, tuple) else clones[0]
    return ref


def targets(Target) -> list:
    one, two = ("x", "freqs_cis"), ("xq", "xk", "freqs_cis")
    hostile_one = {"x": bad, "freqs_cis": bad}
    hostile_two = {"xq": bad, "xk": bad, "freqs_cis": bad}
    out = []
    for name, split in (("apply_rope1", False), ("apply_rope_split_half1", True)):
        out.append(Target(name, one, lambda d, s=split: make_one(d, s),
                          lambda a, n=name: getattr(E, n)(a["x"], a["freqs_cis"]), compare, hostile_one))
        out.append(Target(name + "_", one, lambda d, s=split: _remember(make_one(d, s), ("x",)),
                          _in_place(getattr(E, name + "_"), ("x",)), compare, hostile_one,
                          emulated_same_bits=None))
    for name, split in (("apply_rope", False), ("apply_rope_split_half", True)):
        out.append(Target(name, two, lambda d, s=split: make_two(d, s),
                          lambda a, n=name: getattr(E, n)(a["xq"], a["xk"], a["freqs_cis"]), compare, hostile_two))
        out.append(Target(name + "_", two, lambda d, s=split: _remember(make_two(d, s), ("xq", "xk")),
                          _in_place(getattr(E, name + "_"), ("xq", "xk")), compare, hostile_two,
                          emulated_same_bits=None))
    return out
