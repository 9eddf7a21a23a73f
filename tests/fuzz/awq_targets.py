# SPDX-License-Identifier: Apache-2.0
"""Fuzz target of gemv_awq_w4a16 (comfy_kitchen_c/awq.py): x of 1 to 3 dims (up to 169
rows: any number is served), K and group sizes that divide it (odd groups too), every layout of draw.py, values of every
family of draw.py (NaN, Inf, the dtype's limits) in x, the scales, the zero points and the bias;
eager's result is the oracle within the bound of docs/parity.md (comfy_kitchen_c/awq_bound.py), per output."""
from __future__ import annotations

import torch
from comfy_kitchen.backends.eager.awq import gemv_awq_w4a16 as E_awq

from comfy_kitchen_c.awq_bound import assert_within, bound
from draw import Draw
import oracle



def make(d: Draw) -> dict:
    group = d.pick((32, 64, 16, 2, 6, 15, 128))
    k = group * d.int_in(0 if d.chance(0.03) else 1, 4)
    n = d.extent(9)
    lead = tuple(d.extent(3) for _ in range(d.int_in(0, 2)))
    dtype = d.pick((torch.bfloat16, torch.float16, torch.float32))
    args = {"x": d.layout(d.values((*lead, k), d.float_dtype(0))),
            "qweight": d.layout(d.codes((n, k // 2))),
            "wscales": d.layout(d.values((k // group, n), dtype) if d.chance(0.3) else
                                (torch.rand(k // group, n, generator=d.g) * 0.02).to(dtype)),
            "wzeros": d.layout(d.values((k // group, n), dtype))}
    if d.chance(0.5):
        args["bias"] = d.layout(d.values((n,), dtype if d.chance(0.7) else d.float_dtype(0)))
    if group != 64 or d.chance(0.5):
        args["group_size"] = group
    return args


def reference(a: dict):
    return E_awq(a["x"], a["qweight"], a["wscales"], a["wzeros"], a.get("bias"), a.get("group_size", 64))


def compare(ours, ref, a: dict) -> None:
    oracle.same_form(ours, ref)
    try:
        assert_within(ours, ref, bound(a["x"], a["qweight"], a["wscales"], a["wzeros"], a.get("bias"),
                                       a.get("group_size", 64)), "gemv_awq_w4a16")
    except AssertionError as exc:
        raise oracle.Mismatch(str(exc)) from exc


def _bad_float(d: Draw, a: dict):
    return d.pick((torch.zeros(3, 4, dtype=torch.float64), torch.zeros(4, dtype=torch.int32), None, "x", 1.0))


def _bad_grouped(d: Draw, a: dict):
    return d.pick((torch.zeros(1, 7), torch.zeros(2, 2, 2), torch.zeros(3, dtype=torch.int8), None, 0.5))


def targets(Target) -> list:
    return [
        Target("gemv_awq_w4a16", ("x", "qweight", "wscales", "wzeros", "bias", "group_size"), make, reference,
               compare,
               {"x": _bad_float,
                "qweight": lambda d, a: d.pick((torch.zeros(4, 3, dtype=torch.uint8), torch.zeros(4, 3, 2, dtype=torch.int8),
                                                torch.zeros(5, 1, dtype=torch.int8), None)),
                "wscales": _bad_grouped, "wzeros": _bad_grouped,
                "bias": lambda d, a: d.pick((torch.zeros(1000), torch.zeros(2, 2), torch.zeros(3, dtype=torch.int64), "b")),
                "group_size": lambda d, a: d.pick((0, -64, 7, 64.0, None, "64", 2**40))},
               emulated_same_bits=False),
    ]
