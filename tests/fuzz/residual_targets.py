# SPDX-License-Identifier: Apache-2.0
"""Fuzz target of rms_gated_residual (comfy_kitchen_c/residual.py): an activation of any rank,
gate and residual of its shape or broadcast (per batch, per position, one row; sometimes a
broadcast not served), every float dtype mix, eps of several sizes, every layout of draw.py, NaN
and Inf among the values; eager's result is the oracle, bit for bit (csrc/math/residual.h), asked
with a contiguous activation (eager's strided rms_norm sums in another order: docs/parity.md)."""
from __future__ import annotations

import torch
from comfy_kitchen.backends.eager.residual import rms_gated_residual as E

from draw import Draw
import rope_targets as R


def _like(d: Draw, act: torch.Tensor) -> torch.Tensor:
    lead = list(act.shape[:-1])
    u = d.r.random()
    if u < 0.5:
        shape = lead
    elif u < 0.7:
        shape = [n if i == 0 else 1 for i, n in enumerate(lead)]
    elif u < 0.85:
        shape = []
    else:
        shape = [1 if d.chance(0.5) else n for n in lead]
    return d.layout(d.values(tuple(shape) + (act.shape[-1],), d.float_dtype(0)))


def make(d: Draw) -> dict:
    ndim = d.int_in(1, 4)
    dim = d.int_in(1, 40) if d.chance(0.7) else d.pick((64, 128, 576))
    act = d.layout(d.values(tuple(d.extent(5) for _ in range(ndim - 1)) + (dim,), d.float_dtype(0)))
    n = dim if d.chance(0.95) else dim + 1
    args = {"activation": act, "norm_weight": d.layout(d.values((n,), d.float_dtype(0))),
            "residual": _like(d, act), "gate": _like(d, act)}
    if d.chance(0.6):
        args["eps"] = d.pick((1e-5, 1e-6, 0.0, 1.0))
    return args


def reference(a):
    return E(a["activation"].contiguous(), a["norm_weight"], a["residual"], a["gate"], a.get("eps", 1e-5))


def bad_eps(d: Draw, args: dict):
    return d.pick(("1e-5", None, torch.tensor(1e-5)))


def targets(Target) -> list:
    params = ("activation", "norm_weight", "residual", "gate", "eps")
    hostile = {"activation": R.bad, "norm_weight": R.bad, "residual": R.bad, "gate": R.bad, "eps": bad_eps}
    return [Target("rms_gated_residual", params, make, reference, R.compare, hostile)]
