# SPDX-License-Identifier: Apache-2.0
"""Fuzz targets of the ConvRot W4A4 ops with eager's results as the oracle:
* prepare_int4_weight_for_int8_linear: bit for bit;
* quantize_convrot_w4a4_weight: codes within one step of eager's where eager's are defined (0
  where its quotient is NaN), scales within the rotation's bound (docs/parity.md: 1e-5 relative,
  and from a 16-bit weight one ulp of that dtype at the scale, which is rounded to it);
* dequantize_convrot_w4a4_weight: within the butterfly's bound of the exact rotation
  (oracle.compare_rotation, the int8 ConvRot dequantizer's);
* convrot_w4a4_linear: bit for bit with eager's int4_linear on our own activation codes (the
  GEMM and epilogue are exact given the codes; the codes are the quantizer's, checked above)."""
from __future__ import annotations

import torch
from comfy_kitchen.backends.eager import convrot_w4a4 as EW
from comfy_kitchen.backends.eager.svdquant import _unpack_int4_row_major

from comfy_kitchen_c import w4a4
from draw import Draw
import oracle

ROTATED_SCALE_RTOL = 1e-5


def _group_and_k(d: Draw) -> tuple:
    g = d.group()
    valid = type(g) is int and g in (4, 16, 64, 256, 1024)
    unit = max(g, 64) if valid else 64
    return g, d.multiple(unit, 2 if unit >= 256 else 3)


def make_quantize(d: Draw) -> dict:
    g, k = _group_and_k(d)
    args = {"weight": d.layout(d.values((d.extent(9), k), d.float_dtype(0))), "convrot_groupsize": g}
    if d.chance(0.4):
        args["stochastic_rounding"] = d.pick((0, None, -2, d.int_in(1, 2**31), 2**64 - 1))
    return args


def make_dequantize(d: Draw) -> dict:
    g, k = _group_and_k(d)
    n = d.extent(9)
    args = {"qdata": d.layout(d.codes((n, k // 2))), "scales": (torch.rand(n, generator=d.g) * 0.1).to(
        d.float_dtype(0)), "convrot_groupsize": g}
    if d.chance(0.7):
        args["output_dtype"] = None if d.chance(0.15) else d.float_dtype(0)  # None: eager's float32
    return args


def make_prepare(d: Draw) -> dict:
    return {"weight": d.layout(d.codes((d.extent(9), d.extent(40))))}


def make_linear(d: Draw) -> dict:
    g, k = _group_and_k(d)
    n = d.extent(40)
    dtype = d.float_dtype(0)
    args = {"x": d.layout(d.values(tuple(d.extent(5) for _ in range(d.int_in(0, 2))) + (k,), dtype)),
            "qweight": d.layout(d.codes((n, k // 2))),
            "wscales": (torch.rand(n, generator=d.g) * 0.05).to(d.float_dtype(0)),
            "convrot_groupsize": g}
    if d.chance(0.5):
        args["bias"] = d.values((n,), d.float_dtype(0))
    if d.chance(0.3):
        args["linear_dtype"] = d.pick(("int4", "int8"))
    return args


def _ulp(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.float32:
        return torch.zeros_like(values)
    return oracle._dtype_ulp(values, dtype)


def compare_int4(ours, ref, a) -> None:
    """(packed codes, scales) of the quantizer against eager's, as the module docstring says."""
    oracle.same_form(ours, ref)
    (q, s), (qr, sr) = ours, ref
    if q.shape[0] == 0:  # no rows (eager's unpacking cannot reshape them; nothing to compare)
        return
    dtype = a["weight"].dtype
    ok = torch.isfinite(s) & torch.isfinite(sr)
    # a rotated value within an ulp of the dtype's largest may overflow in one summation order only
    if not torch.equal(torch.isfinite(s), torch.isfinite(sr)):
        big = a["weight"].float().abs().nan_to_num(posinf=0.0).amax(dim=-1) >= torch.finfo(dtype).max / 4
        if bool((torch.isfinite(s) != torch.isfinite(sr))[~big].any()):
            raise oracle.Mismatch("scale: finite where eager's is not, or the reverse")
    tol = ROTATED_SCALE_RTOL * sr[ok].double().abs() + _ulp(sr[ok].double().abs(), dtype) + 1e-37
    if bool(((s[ok].double() - sr[ok].double()).abs() > tol).any()):
        raise oracle.Mismatch("rotated scale beyond the rotation's bound")
    codes, rcodes = _unpack_int4_row_major(q).int(), _unpack_int4_row_major(qr).int()
    rows_ok = ok.unsqueeze(1).expand_as(codes)
    if bool((codes[~torch.isfinite(s).unsqueeze(1).expand_as(codes)] != 0).any()):
        raise oracle.Mismatch("codes of a row without a finite scale are not 0")
    # eager's code is undefined where its quotient is NaN (ours: 0); both scales finite here
    x_used = oracle_rotated(a)
    undefined = torch.isnan(x_used / sr.to(dtype).unsqueeze(1)) if x_used.numel() else torch.zeros_like(rows_ok)
    if bool((codes[undefined & rows_ok] != 0).any()):
        raise oracle.Mismatch("codes where eager's are undefined (NaN) are not 0")
    d = (codes - rcodes).abs()[rows_ok & ~undefined]
    if d.numel() and int(d.max()) > 1:
        raise oracle.Mismatch(f"codes differ by {int(d.max())} (at most 1, at rounding ties)")


def oracle_rotated(a) -> torch.Tensor:
    """The values eager quantized: its rotation formula in float32, rounded to the weight's dtype."""
    w = a["weight"]
    g = a.get("convrot_groupsize", 256)
    h = EW._build_hadamard(g, "cpu", torch.float32)
    return (w.float().reshape(w.shape[0], -1, g) @ h.t()).reshape(w.shape).to(w.dtype)


def compare_dequant(ours, ref, a) -> None:
    oracle.same_form(ours, ref)
    source = _unpack_int4_row_major(a["qdata"]).float() * a["scales"].float().reshape(-1, 1)
    oracle.compare_rotation(ours, ref, source, a.get("convrot_groupsize", 256))


def compare_linear(ours, ref, a) -> None:
    oracle.same_form(ours, ref)
    x = a["x"]
    x2d = x.reshape(-1, x.shape[-1]).contiguous()
    qa, xs = w4a4._quantize_rows("convrot_w4a4_linear", x2d, a.get("convrot_groupsize", 256), 0)
    expected = EW.int4_linear(qa, a["qweight"], xs, a["wscales"], a.get("bias"), x.dtype)
    oracle.bits_equal(ours, expected.reshape(ref.shape), "linear given our activation codes")


def _bad_codes(d: Draw, args: dict):
    return d.pick((torch.zeros(4, 8), torch.zeros(4, 8, dtype=torch.uint8), torch.zeros(2, 2, 2, dtype=torch.int8),
                   None, 3))


def _bad_group(d: Draw, args: dict):
    return d.pick((0, 8, 2048, 4096, -4, 1.5, "256", None, True))


def _bad_float(d: Draw, args: dict):
    return d.pick((torch.zeros(4, 64, dtype=torch.float64), torch.zeros(4, 64, dtype=torch.int32), None, 1.0,
                   torch.tensor(1.5)))


def targets(Target) -> list:
    return [
        Target("quantize_convrot_w4a4_weight",
               ("weight", "convrot_groupsize", "quant_group_size", "stochastic_rounding"), make_quantize,
               lambda a: EW.quantize_convrot_w4a4_weight(
                   a["weight"], a.get("convrot_groupsize", 256), 64, a.get("stochastic_rounding", 0)),
               compare_int4,
               {"weight": _bad_float, "convrot_groupsize": _bad_group,
                "quant_group_size": lambda d, a: d.pick((32, 128, 64.0, None)),
                "stochastic_rounding": lambda d, a: d.pick((1.5, "7", 2**64, [3]))}),
        Target("dequantize_convrot_w4a4_weight",
               ("qdata", "scales", "convrot_groupsize", "quant_group_size", "output_dtype"), make_dequantize,
               lambda a: EW.dequantize_convrot_w4a4_weight(
                   a["qdata"], a["scales"], a.get("convrot_groupsize", 256), 64,
                   a.get("output_dtype", torch.float32)),
               compare_dequant,
               {"qdata": _bad_codes, "scales": lambda d, a: d.pick((torch.ones(1000), None, torch.ones(2, 2), 1.0)),
                "convrot_groupsize": _bad_group,
                "output_dtype": lambda d, a: d.pick((torch.int8, torch.float64, "bf16"))}),
        Target("prepare_int4_weight_for_int8_linear", ("weight",), make_prepare,
               lambda a: EW.prepare_int4_weight_for_int8_linear(a["weight"]),
               lambda o, r, a: oracle.bits_equal(o, r, "unpacked"), {"weight": _bad_codes}),
        Target("convrot_w4a4_linear",
               ("x", "qweight", "wscales", "bias", "convrot_groupsize", "quant_group_size", "linear_dtype"),
               make_linear,
               lambda a: EW.convrot_w4a4_linear(a["x"], a["qweight"], a["wscales"], a.get("bias"),
                                                a.get("convrot_groupsize", 256), 64, a.get("linear_dtype", "int4")),
               compare_linear,
               {"x": _bad_float, "qweight": _bad_codes,
                "wscales": lambda d, a: d.pick((torch.ones(1000), None, torch.ones(3, dtype=torch.int32))),
                "bias": lambda d, a: d.pick((torch.ones(1000), torch.ones(2, dtype=torch.int8))),
                "convrot_groupsize": _bad_group,
                "linear_dtype": lambda d, a: d.pick(("fp8", 4, None))}),
    ]
