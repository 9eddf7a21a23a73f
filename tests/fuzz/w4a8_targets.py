# SPDX-License-Identifier: Apache-2.0
"""Fuzz targets of the W4A8 / W6A8 ops (quantize_w4a8_int8_weight, dequantize_w4a8_int8_weight,
w4a8_int8_linear, w4a8_packed_linear) with eager's results as the oracle.

The quantizer's oracle is eager's own quantizer run on our rotation (its codebook choice, chunks,
seeds and math): bit for bit.

The dequantizer's result is a rotation of eager's unrotated float weight (bit for bit ours,
tests/test_w4a8_parity.py): compared by oracle.compare_rotation against the exact rotation of
that weight.  The linears are by eager's definition int8_linear(act(x), eager's decoded int8
weight, s_channel, convrot=True): compared by int8_linear's own oracle on those arguments.
The linears' correction form (eager's float F.linear path) is left to the parity tests."""
from __future__ import annotations

import torch
from comfy_kitchen.backends.eager import w4a8_int8 as EW
from comfy_kitchen.tensor.w4a8_packed import _pack_codes, default_w4a8_codebook, unpack_w4a8_mma_weight

import oracle
from draw import Draw
from linear_targets import compare_int8_linear, ref_int8_linear


def _layout(d: Draw) -> tuple[int, int, int]:
    """(bits, group_size, K): K a multiple of 256 (every convrot group divides it)."""
    bits = d.pick((4, 4, 6))
    group = d.pick((16, 32, 64)) if bits == 6 else d.pick((4, 8, 16, 16, 32))
    return bits, group, 256 * d.int_in(1, 2)


def _storage(d: Draw, n: int, k: int, bits: int, group: int) -> dict:
    codes = torch.randint(0, 1 << bits, (n, k), generator=d.g, dtype=torch.int32)
    scale_dtype = d.pick((torch.float8_e4m3fn, torch.float32))
    s_rel = (torch.rand(n, k // group, generator=d.g) * d.pick((1.0, 60.0, 300.0)) + 0.01)
    if d.chance(0.1) and s_rel.numel():
        s_rel.view(-1)[0] = d.pick((float("nan"), float("inf"), 0.0))
    args = {"qdata": _pack_codes(codes, bits), "s_rel": s_rel.to(scale_dtype),
            "s_channel": torch.rand(n, generator=d.g) * 0.02 + 1e-5}
    if bits == 4 and d.chance(0.7):
        args["codebook"] = default_w4a8_codebook() if d.chance(0.6) else torch.randn(16, generator=d.g).sort().values
    return args


def make_dequantize(d: Draw) -> dict:
    bits, group, k = _layout(d)
    n = d.extent(12)
    args = _storage(d, n, k, bits, group)
    args["group_size"] = group
    args["convrot_groupsize"] = d.pick((16, 64, 256))
    args["output_dtype"] = None if d.chance(0.15) else d.float_dtype(0)  # None: eager's float32
    if bits == 4 and d.chance(0.3):
        args["correction"] = (torch.randn(k // group, n, generator=d.g) * 0.01).to(d.float_dtype(0))
    return args


def _unrotated(a) -> torch.Tensor:
    group = a.get("group_size", 16)
    grid = EW._dequant_int4_grouped_to_int8(a["qdata"], a["s_rel"], a.get("codebook"), group)
    return EW._dequantize_w4a8_int8_weight_from_int8(grid, a["s_channel"], a.get("correction"), group,
                                                     a.get("output_dtype", torch.bfloat16))


def ref_dequantize(a):
    return EW.dequantize_w4a8_int8_weight(**a)


def compare_dequantize(ours, ref, a) -> None:
    oracle.compare_rotation(ours, ref, _unrotated(a), a.get("convrot_groupsize", 256))


def _activation(d: Draw, args: dict, k: int, m_shape: tuple) -> tuple:
    act = d.pick((None, None, "gelu_tanh", "swiglu", "rms_norm"))
    width = 2 * k if act == "swiglu" else k
    dtype = d.float_dtype(0)
    args["x"] = d.layout(d.values(m_shape + (width,), dtype))
    if act is not None:
        args["input_act"] = act
    if act == "rms_norm":
        args["input_act_weight"] = torch.rand(k, generator=d.g).to(dtype) + 0.5
        args["input_act_eps"] = 1e-6
    return args


def _linear_extras(d: Draw, args: dict, n: int, m_shape: tuple) -> dict:
    if d.chance(0.4):
        args["bias"] = torch.randn(n, generator=d.g).to(d.float_dtype(0))
    if d.chance(0.6):  # None: eager's direct call's float32, as ours
        args["out_dtype"] = None if d.chance(0.15) else d.float_dtype(0)
    if d.chance(0.2):
        args["residual"] = torch.randn(m_shape + (n,), generator=d.g).to(d.float_dtype(0))
        args["residual_scale"] = torch.rand(n, generator=d.g)
    return args


def make_linear(d: Draw) -> dict:
    bits, group, k = _layout(d)
    n = d.extent(12)
    m_shape = tuple(d.extent(5) for _ in range(d.int_in(0, 2))) + (d.extent(20),)
    args = _storage(d, n, k, bits, group)
    args["group_size"] = group
    args["convrot_groupsize"] = d.pick((16, 64, 256))
    return _linear_extras(d, _activation(d, args, k, m_shape), n, m_shape)


def make_packed(d: Draw) -> dict:
    bits = d.pick((4, 6))
    n, k = 16 * d.int_in(1, 2), 256 * d.int_in(1, 2)
    rec = 512 * bits // 8 + 32
    packed = torch.randint(0, 256, ((n // 16) * (k // 32), rec), generator=d.g, dtype=torch.int32).to(torch.uint8)
    packed[:, rec - 32:] = torch.randint(0x18, 0x58, (packed.shape[0], 32), generator=d.g, dtype=torch.int32).to(torch.uint8)
    args = {"qdata": packed.reshape(-1).view(torch.int8), "s_rel": torch.empty(0, dtype=torch.float8_e4m3fn),
            "s_channel": torch.rand(n, generator=d.g) * 0.02 + 1e-5}
    if bits == 4 and d.chance(0.7):
        args["codebook"] = default_w4a8_codebook()
    m_shape = (d.extent(20),)
    args["convrot_groupsize"] = d.pick((16, 64, 256))
    return _linear_extras(d, _activation(d, args, k, m_shape), n, m_shape)


def _as_int8_linear(a, qdata, s_rel) -> dict:
    """eager's w4a8 linear as the int8_linear it calls: the decoded weight, s_channel, ConvRot."""
    b = {"x": a["x"], "weight": EW._dequant_int4_grouped_to_int8(qdata, s_rel, a.get("codebook"),
                                                               a.get("group_size", 16)),
         "weight_scale": a["s_channel"], "convrot": True, "convrot_groupsize": a.get("convrot_groupsize", 256)}
    for key in ("bias", "out_dtype", "input_act", "input_act_weight", "input_act_eps", "residual", "residual_scale"):
        if key in a:
            b[key] = a[key]
    return b


def _unpacked(a):
    k = a["x"].shape[-1] // (2 if a.get("input_act") == "swiglu" else 1)
    return unpack_w4a8_mma_weight(a["qdata"], a["s_channel"].numel(), k)


# ---- quantize_w4a8_int8_weight ------------------------------------------------------------------

def make_quantize(d: Draw) -> dict:
    """A finite weight (ours refuses others, eager's codes for them are casts of NaN), in every
    form; sometimes of few significant bits (its rotation exact), sometimes heavy-tailed after
    rotation (the codebook fitted), sometimes in chunks of a few rows."""
    bits, group, k = _layout(d)
    n = d.extent(40)
    w = torch.randn(n, k, generator=d.g) * d.pick((0.02, 1.0, 300.0))
    if d.chance(0.3):
        w = torch.randint(-3, 4, (n, k), generator=d.g).float() * 2.0 ** -6
        if d.chance(0.5):
            w = torch.where(torch.rand(n, k, generator=d.g) < 0.06, torch.full_like(w, 0.75), w)
    args = {"weight": d.layout(w.to(d.float_dtype(0))), "group_size": group, "bits": bits,
            "convrot_groupsize": d.pick((16, 64, 256))}
    if bits == 4:
        args["symmetric"] = d.chance(0.8)
        args["codebook"] = d.chance(0.7)
        if d.chance(0.2):
            args["codebook_tensor"] = torch.randn(16, generator=d.g).sort().values * 0.9
    if d.chance(0.5):
        args["scale_dtype"] = d.pick((torch.float8_e4m3fn, torch.float32))
    if d.chance(0.3):
        args["stochastic_rounding"] = d.int_in(0, 1000)
    if bits == 6 and d.chance(0.3):
        args["scale_search"] = False
    return args


def _our_rotation(w, convrot):
    from comfy_kitchen_c import w4a8_quant
    return w4a8_quant._rotated("fuzz", w.contiguous(), convrot)


def ref_quantize(a):
    """Eager's quantizer (its checks, its codebook choice, its chunks and seeds, its math) run on
    our rotation: ours must match it bit for bit (tests/test_w4a8_quant.py; the rotations
    themselves are compared within their bound by the rotation ops' targets)."""
    kw = {"group_size": 16, "convrot_groupsize": 256, "symmetric": True, "scale_dtype": torch.float8_e4m3fn,
          "codebook": True, "codebook_tensor": None, "stochastic_rounding": 0, "bits": 4, "scale_search": True}
    kw.update({key: value for key, value in a.items() if key != "weight"})
    EW.validate_w4a8_weight_shape(a["weight"], kw["group_size"], kw["convrot_groupsize"], kw["bits"])
    return EW._quantize_w4a8_chunked(a["weight"], _our_rotation, kw["group_size"], kw["convrot_groupsize"],
                                     kw["symmetric"], kw["scale_dtype"], kw["codebook"], kw["codebook_tensor"],
                                     kw["stochastic_rounding"], kw["bits"], kw["scale_search"])


def compare_quantize(ours, ref, a) -> None:
    for name, x, y in zip(("qdata", "s_rel", "s_channel", "correction", "codebook"), ours, ref):
        if x is None or y is None:
            if (x is None) != (y is None):
                raise oracle.Mismatch(f"quantize_w4a8_int8_weight: {name} {x is None} against eager's {y is None}")
            continue
        if x.dtype != y.dtype or x.shape != y.shape:
            raise oracle.Mismatch(f"quantize_w4a8_int8_weight: {name} {x.dtype}{list(x.shape)} against eager's "
                                  f"{y.dtype}{list(y.shape)}")
        if x.dtype == torch.float8_e4m3fn:
            x, y = x.view(torch.uint8), y.view(torch.uint8)
        same = torch.equal(x, y) if not x.is_floating_point() else bool(((x == y) | (x.isnan() & y.isnan())).all())
        if not same:
            raise oracle.Mismatch(f"quantize_w4a8_int8_weight: {name} differs from eager's on our rotation")


def targets(Target) -> list:
    bad_int8 = lambda d, a: d.pick((torch.zeros(4, 8), torch.zeros(3, 3, 3, dtype=torch.int8), None, "q"))  # noqa: E731
    bad_srel = lambda d, a: d.pick((torch.ones(2, 2), torch.ones(3, dtype=torch.float16), None))  # noqa: E731
    bad_sch = lambda d, a: d.pick((torch.ones(2, 2), torch.ones(3, dtype=torch.float16), None, 1.0))  # noqa: E731
    bad_cb = lambda d, a: d.pick((torch.ones(8), torch.ones(16, dtype=torch.float16), "cb"))  # noqa: E731
    bad_group = lambda d, a: d.pick((3, 12, 0, -16, 1.5, None))  # noqa: E731
    bad_x = lambda d, a: d.pick((torch.zeros(2, 100), torch.zeros(2, 256, dtype=torch.int8), None, "x"))  # noqa: E731
    linear_params = ("x", "qdata", "s_rel", "s_channel", "codebook", "correction", "bias", "group_size",
                     "convrot_groupsize", "out_dtype", "input_act", "input_act_weight", "input_act_eps", "residual",
                     "residual_scale")
    return [
        Target("quantize_w4a8_int8_weight",
               ("weight", "group_size", "convrot_groupsize", "symmetric", "scale_dtype", "codebook", "codebook_tensor",
                "stochastic_rounding", "bits", "scale_search"),
               make_quantize, ref_quantize, compare_quantize,
               {"weight": lambda d, a: d.pick((torch.zeros(4, 100), torch.zeros(2, 256, dtype=torch.int8),
                                               torch.full((2, 256), float("nan")), None)),
                "group_size": bad_group, "convrot_groupsize": lambda d, a: d.group(None),
                "bits": lambda d, a: d.pick((5, 8, "4")), "scale_dtype": lambda d, a: d.pick((torch.float16, "e4m3")),
                "codebook_tensor": lambda d, a: d.pick((torch.ones(8), "cb")),
                "stochastic_rounding": lambda d, a: d.pick((1.5, "s"))},
               zero_sign_free=True),
        Target("dequantize_w4a8_int8_weight",
               ("qdata", "s_rel", "s_channel", "codebook", "correction", "group_size", "convrot_groupsize",
                "output_dtype"),
               make_dequantize, ref_dequantize, compare_dequantize,
               {"qdata": bad_int8, "s_rel": bad_srel, "s_channel": bad_sch, "codebook": bad_cb,
                "correction": lambda d, a: d.pick((torch.ones(2, 2), torch.ones(3, dtype=torch.int32))),
                "group_size": bad_group, "convrot_groupsize": lambda d, a: d.group(None),
                "output_dtype": lambda d, a: d.pick((torch.int8, torch.float64, "bf16"))},
               zero_sign_free=True),
        Target("w4a8_int8_linear", linear_params, make_linear,
               lambda a: ref_int8_linear(_as_int8_linear(a, a["qdata"], a["s_rel"])),
               lambda o, r, a: compare_int8_linear(o, r, _as_int8_linear(a, a["qdata"], a["s_rel"])),
               {"x": bad_x, "qdata": bad_int8, "s_rel": bad_srel, "s_channel": bad_sch, "codebook": bad_cb,
                "group_size": bad_group, "convrot_groupsize": lambda d, a: d.group(None),
                "out_dtype": lambda d, a: d.pick((torch.int8, "bf16")),
                "input_act": lambda d, a: d.pick(("relu", 3))},
               # the GPU path gives the CPU's bits (the decoded parts' int32 sums are exact); the
               # correction form's parts sum in the GEMM's own order, within the bound that
               # test_w4a8_parity.py::test_correction_on_the_gpu_path checks, not bit for bit
               gpu_differs=lambda a: a.get("correction") is not None),
        Target("w4a8_packed_linear", linear_params, make_packed,
               lambda a: ref_int8_linear(_as_int8_linear(a, *_unpacked(a))),
               lambda o, r, a: compare_int8_linear(o, r, _as_int8_linear(a, *_unpacked(a))),
               {"x": bad_x, "qdata": lambda d, a: d.pick((torch.zeros(7, dtype=torch.int8), torch.zeros(4, 4))),
                "s_rel": lambda d, a: torch.ones(4), "s_channel": bad_sch, "codebook": bad_cb,
                "group_size": lambda d, a: d.pick((8, 32)),
                "out_dtype": lambda d, a: d.pick((torch.int8, "bf16"))}),
    ]
