# SPDX-License-Identifier: Apache-2.0
"""``python -m comfy_kitchen_c selftest``: every op against comfy_kitchen's eager backend.

The parity contract of backend "c" is comfy_kitchen's eager implementation: same
names, same signatures, same results (bit for bit, except where the kernels
rotate with a fast Walsh-Hadamard transform; see ``TOLERANCES``).  This module
checks that contract on the installed build, on every device it serves, on
built-in synthetic data, so a user can verify a wheel without the test suite.
It also times both implementations (in blocks, see selftest_report.py), which is the
other reason to use "c"; the report opens with the versions and hardware it ran on.

``run()`` prints one table row per (case, device, dtype) and returns whether all
passed.  The dtype column is the dtype the case varies: the input's for the
quantize and rotate ops, the output's for the dequantize ops that choose one
(``*_dtype``, ``dequantize_nvfp4``), and the scale's for the dequantize ops that
always return float32.

``quantize_and_rotate_nvfp4`` has no eager counterpart; it is checked bit for bit
against the composition it is defined as: our ``rotate_int8_convrot_weight``
(itself checked against eager here) then eager's ``quantize_nvfp4``.
"""
from __future__ import annotations

import argparse
import importlib
import inspect
import sys
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, TextIO

import torch

from . import _C, cpu_speed, ops
from . import selftest_report as report

HELP = "check every op against comfy_kitchen's eager backend and time both"

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
DTYPE_CODE = {dtype: code for code, dtype in ops.DTYPE_CODE_TO_DTYPE.items()}

# Synthetic data: big enough to time, small enough to keep the whole run short.
ROWS, COLS = 256, 1024
ODD_SHAPE = (33, 65)  # NVFP4 with pad_16x: neither extent is a multiple of 16
SEED = 0
OUTLIER_FACTOR = 50.0  # a few large channels in a few rows, as in real activations

# Where our results may differ from eager's, and why.  Eager rotates by a dense
# matmul with the Hadamard matrix H; our kernels use a fast Walsh-Hadamard
# transform (FWHT), which adds the same products in another order.  So float32
# rotations differ in the last bits, and a value next to a rounding boundary (of
# float16/bfloat16, or of the int8 grid) can round the other way.  Every op that
# does not rotate (plain int8, NVFP4, stochastic rounding with eager's noise)
# must be bit-exact.
TOLERANCES = {
    # quantize_and_rotate_rowwise, quantize_int8_convrot_weight: int8 codes off by
    # at most 1 on at most 0.1% of elements; scales within 1e-5 relative.
    "rotated_int8": {"code_max_diff": 1, "code_max_fraction": 1e-3, "scale_rtol": 1e-5},
    # rotate_int8_convrot_weight: |d| <= rtol * |eager| + row_atol * max|eager row|,
    # rtol one ulp of the dtype (float32: 1e-5, as the row term dominates there).
    "rotation": {"rtol": {torch.float32: 1e-5, torch.float16: 2**-10, torch.bfloat16: 2**-7},
                 "row_atol": 1e-5},
    # dequantize_int8_convrot_weight(_dtype): the float32 rotation within
    # atol * max|eager| + rtol * |eager|, plus out_ulps ulp of the output dtype
    # for the final rounding (float16/bfloat16).
    "rotated_dequant": {"atol": 1e-6, "rtol": 1e-6, "out_ulps": 1},
    # int8_linear with a rotation or an input activation: the rotation can move a code (as
    # above) and a row's scale by float32 ulps, and the activation uses libm's tanhf/expf where
    # aten has its own: at least min_agreeing of the outputs within agree_rel of the output's
    # range, all within max_rel of it (about two quantization steps).  Without either: exact.
    "linear": {"agree_rel": 1e-5, "min_agreeing": 0.99, "max_rel": 2.0**-6},
    # scaled_mm_nvfp4 (where eager runs: CUDA with the block-scaled FP4 GEMM): exact products
    # summed in float32 in another order, then one rounding: out_ulps of the output dtype plus
    # sum_rel of the output's range.
    "fp4_gemm": {"out_ulps": 2, "sum_rel": 1e-5},
    # quantize_w4a8_int8_weight: on the CPU eager's bits wherever the rotation agrees (the case's
    # weight is few-bit, so it does); eager on CUDA sums ALS's groups in another order, which can
    # move a group's scale by a float32 ulp and a code at a decision: code bytes and s_rel bytes
    # differing in at most max_fraction, s_channel within rtol.
    "w4a8_codes": {"max_fraction": 1e-2, "rtol": 1e-5},
}


class ReferenceMissing(RuntimeError):
    """comfy_kitchen (the reference) cannot be imported, so nothing can be checked."""


def load_reference():
    """comfy_kitchen's eager quantization module and its Hadamard builder."""
    try:
        from comfy_kitchen.backends.eager import quantization
        from comfy_kitchen.tensor.int8_utils import _build_hadamard
    except ImportError as exc:
        raise ReferenceMissing(
            "selftest compares against comfy_kitchen's eager backend, which cannot be imported "
            f"({exc}); install it with: pip install comfy-kitchen") from exc
    return quantization, _build_hadamard


def available_devices() -> list[str]:
    """CPU always; CUDA when both torch and this build have it."""
    cuda = torch.cuda.is_available() and bool(_C.HAS_CUDA)
    return ["cpu", "cuda"] if cuda else ["cpu"]


# ---- synthetic inputs -----------------------------------------------------------------------

def synthetic(rows: int, cols: int, seed: int = SEED) -> torch.Tensor:
    """float32 randn * 3 on the CPU, with outliers in a few rows (first, middle, last).

    Drawn on the CPU from a fixed seed so every device and dtype sees the same values.
    """
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=g) * 3
    outlier_rows = sorted({min(1, rows - 1), rows // 2, rows - 1})
    x[outlier_rows, ::97] *= OUTLIER_FACTOR
    return x


def per_tensor_scale(x: torch.Tensor) -> torch.Tensor:
    """NVFP4's usual global scale amax / (6 * 448), so block scales fit float8_e4m3fn."""
    return x.abs().amax().float() / (6.0 * 448.0)


class Inputs:
    """The arguments of one (device, dtype), each built on first use.

    The quantized inputs of the dequantize cases come from eager, so both
    implementations dequantize the same codes and only dequantization is compared.
    """

    def __init__(self, eager, build_hadamard, device: str, dtype: torch.dtype):
        self.eager, self._build_hadamard = eager, build_hadamard
        self.device, self.dtype = torch.device(device), dtype
        self.code = DTYPE_CODE[dtype]

    @cached_property
    def x(self) -> torch.Tensor:
        return synthetic(ROWS, COLS).to(self.device, self.dtype)

    @cached_property
    def x_odd(self) -> torch.Tensor:
        return synthetic(*ODD_SHAPE, seed=SEED + 1).to(self.device, self.dtype)

    def hadamard(self, group: int) -> torch.Tensor:
        return self._build_hadamard(group, self.device, self.dtype)

    @cached_property
    def pts(self) -> torch.Tensor:
        return per_tensor_scale(self.x)

    @cached_property
    def int8(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.eager.quantize_int8_rowwise(self.x)

    @cached_property
    def convrot(self) -> tuple[torch.Tensor, torch.Tensor]:
        return self.eager.quantize_int8_convrot_weight(self.x, 256)

    def nvfp4(self, hi_first: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        return self.eager.quantize_nvfp4(self.x, self.pts, 0.0, False, hi_first)


# ---- comparison rules: (ours, eager) output tuples -> None or what is wrong ------------------

def _bits(t: torch.Tensor) -> torch.Tensor:
    """t's raw bits: float outputs (float8 scales included) compare exactly, -0 and NaN too."""
    if not t.dtype.is_floating_point:
        return t
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def _same_value(o: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Elementwise equality where infinities of one sign and NaN pairs count as equal."""
    return (o == r) | (o.isnan() & r.isnan())


def _within(ours: torch.Tensor, ref: torch.Tensor, tol: torch.Tensor) -> torch.Tensor:
    """Elementwise |ours - ref| <= tol, or the same value."""
    o, r = ours.double(), ref.double()
    return ((o - r).abs() <= tol) | _same_value(o, r)


def _count(bad: torch.Tensor) -> str:
    return f"{int(bad.sum())} of {bad.numel()}"


def exact(ours, ref) -> str | None:
    """Bit-exact: the ops that do not rotate must reproduce eager exactly."""
    for i, (o, r) in enumerate(zip(ours, ref)):
        bad = _bits(o) != _bits(r)
        if bool(bad.any()):
            return f"output {i}: {_count(bad)} elements differ"
    return None


def rotated_int8(ours, ref) -> str | None:
    """(codes, scales) of a rotated quantization: see TOLERANCES["rotated_int8"]."""
    tol = TOLERANCES["rotated_int8"]
    (q, s), (q_ref, s_ref) = ours, ref
    bad = ~_within(s, s_ref, tol["scale_rtol"] * s_ref.double().abs())
    if bool(bad.any()):
        return f"{_count(bad)} scales beyond {tol['scale_rtol']:g} relative"
    d = (q.int() - q_ref.int()).abs()
    if int(d.max()) > tol["code_max_diff"]:
        return f"codes differ by up to {int(d.max())}"
    fraction = float((d > 0).double().mean())
    if fraction > tol["code_max_fraction"]:
        return f"{fraction:.3%} of codes differ (at most {tol['code_max_fraction']:.1%} allowed)"
    return None


def w4a8_codes(ours, ref) -> str | None:
    """The W4A8 quantizer's (qdata, s_rel, s_channel, correction, codebook): see
    TOLERANCES["w4a8_codes"]; the codebook exact (both choose it with torch's own ops)."""
    tol = TOLERANCES["w4a8_codes"]
    for i in (0, 1, 3, 4):
        if (ours[i] is None) != (ref[i] is None):
            return f"output {i}: {'None' if ours[i] is None else 'a tensor'} where eager's is not"
    for i, name in ((0, "code bytes"), (1, "group scales")):
        fraction = float((_bits(ours[i]) != _bits(ref[i])).double().mean()) if ours[i].numel() else 0.0
        if fraction > tol["max_fraction"]:
            return f"{fraction:.3%} of the {name} differ (at most {tol['max_fraction']:.0%} allowed)"
    bad = ~_within(ours[2], ref[2], tol["rtol"] * ref[2].double().abs())
    if bool(bad.any()):
        return f"{_count(bad)} channel scales beyond {tol['rtol']:g} relative"
    if ours[4] is not None and bool((_bits(ours[4]) != _bits(ref[4])).any()):
        return "the codebooks differ"
    return None


def rotation(ours, ref) -> str | None:
    """A rotated weight in its dtype: see TOLERANCES["rotation"]."""
    tol = TOLERANCES["rotation"]
    (o,), (r,) = ours, ref
    rd = r.double()
    bound = tol["rtol"][r.dtype] * rd.abs() + tol["row_atol"] * rd.abs().amax(dim=-1, keepdim=True)
    bad = ~_within(o, r, bound)
    return f"{_count(bad)} elements beyond tolerance" if bool(bad.any()) else None


def ulp(values: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """float64 spacing of dtype at each |value| (subnormal spacing below the normal range)."""
    info = torch.finfo(dtype)
    _, exponent = torch.frexp(values.double().abs().clamp_min(info.tiny))  # |v| = m * 2**e, m in [0.5, 1)
    return torch.ldexp(torch.full(values.shape, info.eps, dtype=torch.float64, device=values.device),
                       exponent - 1)


def rotated_dequant(ours, ref) -> str | None:
    """A dequantized weight rotated back: see TOLERANCES["rotated_dequant"]."""
    tol = TOLERANCES["rotated_dequant"]
    (o,), (r,) = ours, ref
    rd = r.double().abs()
    bound = tol["atol"] * rd.max() + tol["rtol"] * rd + tol["out_ulps"] * ulp(r, r.dtype)
    bad = ~_within(o, r, bound)
    return f"{_count(bad)} elements beyond tolerance" if bool(bad.any()) else None


def _present(ours, ref) -> tuple[tuple, tuple, str | None]:
    """The outputs both sides return (an optional one, the W4A8 quantizer's correction or
    codebook, is None on both or neither), and the problem if one side alone has it."""
    if len(ours) != len(ref):
        return ours, ref, f"{len(ours)} outputs, eager has {len(ref)}"
    for i, (o, r) in enumerate(zip(ours, ref)):
        if (o is None) != (r is None):
            return ours, ref, f"output {i}: {'None' if o is None else 'a tensor'}, eager's is not"
    pairs = [(o, r) for o, r in zip(ours, ref) if o is not None]
    return tuple(o for o, _ in pairs), tuple(r for _, r in pairs), None


def _same_layout(ours, ref) -> str | None:
    """Number, dtypes and shapes of the outputs must match before values are compared."""
    if len(ours) != len(ref):
        return f"{len(ours)} outputs, eager has {len(ref)}"
    for i, (o, r) in enumerate(zip(ours, ref)):
        if o.dtype != r.dtype or o.shape != r.shape:
            return f"output {i}: {o.dtype} {list(o.shape)}, eager has {r.dtype} {list(r.shape)}"
    return None


# ---- cases ----------------------------------------------------------------------------------

def linear(ours, ref) -> str | None:
    """int8_linear with a rotation or an activation: see TOLERANCES["linear"]."""
    tol = TOLERANCES["linear"]
    (o,), (r,) = ours, ref
    diff = (o.double() - r.double()).abs() / r.double().abs().max()
    agreeing = float((diff <= tol["agree_rel"]).double().mean())
    if agreeing < tol["min_agreeing"]:
        return f"only {agreeing:.2%} of outputs within {tol['agree_rel']:g} of the range"
    if float(diff.max()) > tol["max_rel"]:
        return f"an output differs by {float(diff.max()):.3g} of the range"
    return None


def fp4_gemm(ours, ref) -> str | None:
    """scaled_mm_nvfp4: see TOLERANCES["fp4_gemm"]."""
    tol = TOLERANCES["fp4_gemm"]
    (o,), (r,) = ours, ref
    bound = tol["out_ulps"] * ulp(r, r.dtype) + tol["sum_rel"] * r.double().abs().max()
    bad = ~_within(o, r, bound)
    return f"{_count(bad)} elements beyond tolerance" if bool(bad.any()) else None


@dataclass(frozen=True)
class Case:
    """One call checked on every device and dtype.

    ``op`` names the function in both ``comfy_kitchen_c.ops`` and eager (looked up
    at call time); ``args`` builds the positional arguments both get.  ``reference``,
    when set, builds the reference from eager's module instead (for ops eager lacks);
    ``runs`` says on which inputs eager can run it at all.
    """

    op: str
    variant: str
    args: Callable[[Inputs], tuple]
    rule: Callable[[tuple, tuple], str | None]
    reference: Callable[[object], Callable] | None = None
    runs: Callable[[Inputs], bool] = lambda d: True
    not_run: str = ""  # why, where runs() is False

    @property
    def label(self) -> str:
        return f"{self.op} [{self.variant}]" if self.variant else self.op


def _convrot_quant(group: int) -> Case:
    return Case("quantize_int8_convrot_weight", f"group {group}", lambda d: (d.x, group), rotated_int8)


def _nvfp4_dequant(hi_first: bool) -> Case:
    return Case("dequantize_nvfp4", "" if hi_first else "hi_first=False",
                lambda d: (d.nvfp4(hi_first)[0], d.pts, d.nvfp4(hi_first)[1], d.dtype, hi_first), exact)


def _rotate_then_quantize_nvfp4(eager) -> Callable:
    """quantize_and_rotate_nvfp4's definition: the rotation, then eager's quantize_nvfp4."""
    def reference(x, per_tensor_scale, group_size, pad_16x=False):
        return eager.quantize_nvfp4(ops.rotate_int8_convrot_weight(x, group_size), per_tensor_scale, 0.0, pad_16x)
    return reference


def _nvfp4_rotate(group: int, rows: int | None = None) -> Case:
    """Rotated values can exceed amax(|x|) by sqrt(group): the per-tensor scale allows for it."""
    def args(d: Inputs) -> tuple:
        x = d.x if rows is None else d.x[:rows]
        return (x, per_tensor_scale(x) * group**0.5, group) + (() if rows is None else (True,))
    variant = f"group {group}" + ("" if rows is None else f", {rows} rows, pad_16x")
    return Case("quantize_and_rotate_nvfp4", variant, args, exact, _rotate_then_quantize_nvfp4)


CASES = [
    Case("quantize_int8_rowwise", "", lambda d: (d.x,), exact),
    Case("quantize_int8_rowwise", "stochastic_rounding=7", lambda d: (d.x, 7), exact),
    Case("quantize_int8_tensorwise", "", lambda d: (d.x,), exact),
    Case("dequantize_int8_simple", "scale in dtype", lambda d: (d.int8[0], d.int8[1].to(d.dtype)), exact),
    Case("dequantize_int8_simple_dtype", "", lambda d: (*d.int8, d.code), exact),
    Case("quantize_and_rotate_rowwise", "group 256", lambda d: (d.x, d.hadamard(256), 256), rotated_int8),
    *(_convrot_quant(group) for group in (256, 64, 16)),
    Case("rotate_int8_convrot_weight", "group 256", lambda d: (d.x, 256), rotation),
    Case("dequantize_int8_convrot_weight", "group 256, scale in dtype",
         lambda d: (d.convrot[0], d.convrot[1].to(d.dtype), 256), rotated_dequant),
    Case("dequantize_int8_convrot_weight_dtype", "group 256", lambda d: (*d.convrot, 256, d.code), rotated_dequant),
    Case("quantize_nvfp4", "", lambda d: (d.x, d.pts), exact),
    Case("quantize_nvfp4", f"{ODD_SHAPE[0]}x{ODD_SHAPE[1]}, pad_16x",
         lambda d: (d.x_odd, per_tensor_scale(d.x_odd), 0.0, True), exact),
    Case("quantize_nvfp4", "hi_first=False", lambda d: (d.x, d.pts, 0.0, False, False), exact),
    _nvfp4_dequant(hi_first=True),
    _nvfp4_dequant(hi_first=False),
    *(_nvfp4_rotate(group) for group in (16, 64, 256)),
    _nvfp4_rotate(16, rows=33),
]


# ---- linear ops -------------------------------------------------------------------------------

LINEAR_N = 128  # output features of the int8_linear cases (K = COLS)


def _int8_weight(d: Inputs) -> tuple[torch.Tensor, torch.Tensor]:
    """An int8 weight [LINEAR_N, COLS] and its per-channel float32 scale, from eager's quantizer."""
    w = synthetic(LINEAR_N, COLS, seed=SEED + 2).to(d.device)
    q, scale = d.eager.quantize_int8_rowwise(w)
    return q, scale.reshape(-1)


def _linear_case(variant: str, convrot: bool, act: str | None, rule) -> Case:
    return Case("int8_linear", variant,
                lambda d: (d.x, *_int8_weight(d), None, torch.bfloat16, convrot, 256, act), rule)


def _fp4_operands(d: Inputs) -> tuple:
    w = synthetic(LINEAR_N, COLS, seed=SEED + 2).to(d.device, d.dtype)
    (qa, sa), (qb, sb) = d.nvfp4(), d.eager.quantize_nvfp4(w, per_tensor_scale(w))
    return (qa, qb, d.pts, per_tensor_scale(w), sa, sb, None, d.dtype)


def _eager_runs_fp4_gemm(d: Inputs) -> bool:
    """Eager's scaled_mm_nvfp4 is torch's block-scaled FP4 GEMM: CUDA, compute capability 10.0+."""
    return d.device.type == "cuda" and torch.cuda.get_device_capability(d.device) >= (10, 0) \
        and d.dtype != torch.float32


def _eager_takes(op: str, count: int | None = None) -> Callable[[Inputs], bool]:
    """Whether the installed comfy-kitchen has op (taking count positional arguments, when given).
    The fused int8 linears (rms_norm, residual, modulated) came after comfy-kitchen 0.2.31, the
    oldest supported: there they are not checked rather than failed."""
    def runs(d: Inputs) -> bool:
        fn = getattr(d.eager, op, None)
        if fn is None or count is None:
            return fn is not None
        try:
            inspect.signature(fn).bind(*range(count))
        except (TypeError, ValueError):  # ValueError: no signature to read
            return False
        return True
    return runs


NEWER_EAGER = "the installed comfy-kitchen's eager backend lacks this op or these arguments (newer releases have them)"


def _vector(d: Inputs, seed: int, scale: float = 1.0, offset: float = 0.0) -> torch.Tensor:
    """A row of COLS values in the dtype (a norm weight, a modulation scale)."""
    return (synthetic(1, COLS, seed=seed).reshape(-1) * scale + offset).to(d.device, d.dtype)


def _modulation(d: Inputs) -> torch.Tensor:
    """Modulation scales s small enough that x * (1 + s) stays finite in float16 after rms_norm of
    the outlier rows (~1700 there): a row that overflows to inf is where eager's result is
    undefined (docs/parity.md ("Results where eager's are undefined")), not a parity check."""
    return _vector(d, SEED + 4, 0.02)


def _residual_args(d: Inputs) -> tuple:
    residual = synthetic(ROWS, LINEAR_N, seed=SEED + 5).to(d.device, d.dtype)
    return (d.x, *_int8_weight(d), None, torch.bfloat16, False, 256, None, None, 0.0, residual,
            _vector(d, SEED + 6)[:LINEAR_N])


def _embedding_args(d: Inputs, group: int) -> tuple:
    indices = torch.tensor([[3, 0, 255], [17, 17, 128]], device=d.device)
    q, scale = d.convrot if group else d.int8
    return (q, scale, indices, group, d.code)


CASES += [
    _linear_case("per-channel scale", False, None, exact),
    _linear_case("convrot 256", True, None, linear),
    _linear_case("gelu_tanh", False, "gelu_tanh", linear),
    Case("int8_linear", "rms_norm", lambda d: (d.x, *_int8_weight(d), None, torch.bfloat16, False, 256, "rms_norm",
                                               _vector(d, SEED + 3, 0.5, 1.0), 1e-6), exact,
         runs=_eager_takes("int8_linear", 10), not_run=NEWER_EAGER),
    Case("int8_linear", "residual", _residual_args, exact, runs=_eager_takes("int8_linear", 12), not_run=NEWER_EAGER),
    Case("int8_linear_modulated", "", lambda d: (d.x, _modulation(d), *_int8_weight(d)), exact,
         runs=_eager_takes("int8_linear_modulated"), not_run=NEWER_EAGER),
    Case("int8_linear_rms_modulated", "", lambda d: (d.x, _vector(d, SEED + 3, 0.5, 1.0), 1e-6,
                                                     _modulation(d), *_int8_weight(d)), exact,
         runs=_eager_takes("int8_linear_rms_modulated"), not_run=NEWER_EAGER),
    Case("dequantize_int8_embedding", "", lambda d: _embedding_args(d, 0), exact),
    Case("dequantize_int8_embedding", "group 256", lambda d: _embedding_args(d, 256), rotated_dequant),
    Case("scaled_mm_nvfp4", "", _fp4_operands, fp4_gemm, runs=_eager_runs_fp4_gemm,
         not_run="eager's is torch's block-scaled FP4 GEMM (CUDA, compute capability 10.0+, 16-bit output); "
         "tests/test_scaled_mm_nvfp4.py checks ours against the definition"),
]


# ---- FP8 and RoPE ------------------------------------------------------------------------------

def _fp8_scale(d: Inputs) -> torch.Tensor:
    """The usual per-tensor FP8 scale: amax / 448 (e4m3's largest value), float32."""
    return (d.x.abs().amax().float() / 448).reshape(())


def _rng(d: Inputs) -> torch.Tensor:
    generator = torch.Generator().manual_seed(SEED + 7)
    return torch.randint(0, 256, tuple(d.x.shape), dtype=torch.uint8, generator=generator).to(d.device)


def _rope_x(d: Inputs, scale: float = 1.0) -> torch.Tensor:
    """x as a [B, H, L, D] = [1, 1, ROWS, COLS] attention input, a fresh tensor per case (the
    in-place forms write into it)."""
    return (d.x * scale).reshape(1, 1, ROWS, COLS).clone()


def _freqs(d: Inputs) -> torch.Tensor:
    """freqs_cis as ComfyUI's models build it: float32 [1, 1, L, D/2, 2, 2] rotation matrices."""
    pos = torch.arange(ROWS, dtype=torch.float32)[:, None]
    inv = 10000.0 ** (-torch.arange(0, COLS, 2, dtype=torch.float32) / COLS)
    angle = pos * inv
    cos, sin = angle.cos(), angle.sin()
    return torch.stack([cos, -sin, sin, cos], dim=-1).reshape(1, 1, ROWS, COLS // 2, 2, 2).to(d.device)


def _rope_reference(op: str, inplace: bool) -> Callable[[object], Callable]:
    """eager's RoPE op (its rope module, not the quantization one); an in-place form on copies, so
    that ours then rotates the very inputs eager started from."""
    def reference(_eager):
        import importlib

        fn = getattr(importlib.import_module("comfy_kitchen.backends.eager.rope"), op)
        if not inplace:
            return fn
        return lambda *args: fn(*(a.clone() if i < len(args) - 1 else a for i, a in enumerate(args)))
    return reference


def _rope_case(op: str) -> Case:
    pair = not op.endswith(("1", "1_"))
    args = (lambda d: (_rope_x(d), _rope_x(d, 0.5), _freqs(d))) if pair else (lambda d: (_rope_x(d), _freqs(d)))
    why = NEWER_EAGER if "split_half" not in op else (
        "the installed comfy-kitchen's eager lacks this op or rounds split-half RoPE twice (0.2.31); "
        "ours follows the newer one fused multiply-add (docs/parity.md)")
    return Case(op, "", args, exact, _rope_reference(op, op.endswith("_")), runs=_eager_rope(op), not_run=why)


def _eager_rope(op: str) -> Callable[[Inputs], bool]:
    """Whether eager has op and computes it as ours does: its split-half forms add the second
    product with one fused multiply-add (addcmul_) since comfy-kitchen 0.2.40; 0.2.31 rounded
    twice, and ours follows the newer (docs/parity.md)."""
    def runs(_d: Inputs) -> bool:
        import importlib

        try:
            rope = importlib.import_module("comfy_kitchen.backends.eager.rope")
        except ImportError:
            return False
        if not hasattr(rope, op):
            return False
        return "split_half" not in op or "addcmul_" in inspect.getsource(rope.apply_rope_split_half1)
    return runs


CASES += [
    Case("quantize_per_tensor_fp8", "e4m3fn", lambda d: (d.x, _fp8_scale(d)), exact,
         runs=_eager_takes("quantize_per_tensor_fp8"), not_run=NEWER_EAGER),
    Case("quantize_per_tensor_fp8", "e5m2", lambda d: (d.x, _fp8_scale(d), torch.float8_e5m2), exact,
         runs=_eager_takes("quantize_per_tensor_fp8"), not_run=NEWER_EAGER),
    Case("dequantize_per_tensor_fp8", "", lambda d: (ops.quantize_per_tensor_fp8(d.x, _fp8_scale(d)), _fp8_scale(d),
                                                     d.dtype), exact,
         runs=_eager_takes("dequantize_per_tensor_fp8"), not_run=NEWER_EAGER),
    Case("stochastic_rounding_fp8", "", lambda d: (d.x, _rng(d)), exact,
         runs=_eager_takes("stochastic_rounding_fp8"), not_run=NEWER_EAGER),
    *(_rope_case(op) for op in ("apply_rope1", "apply_rope", "apply_rope1_", "apply_rope_", "apply_rope_split_half1",
                                "apply_rope_split_half", "apply_rope_split_half1_", "apply_rope_split_half_")),
]


def _rms_rope_case(op: str) -> Case:
    """rms_rope ops: x as for RoPE, a norm scale of COLS values (q's also serves k)."""
    pair = not op.endswith(("1", "1_"))
    args = ((lambda d: (_rope_x(d), _rope_x(d, 0.5), _freqs(d), _vector(d, 21, 0.5, 1.0))) if pair
            else (lambda d: (_rope_x(d), _freqs(d), _vector(d, 21, 0.5, 1.0))))
    return Case(op, "", args, exact, _rope_reference(op, op.endswith("_")), runs=_eager_rope(op), not_run=NEWER_EAGER)


def _residual_reference(_eager):
    import importlib

    return importlib.import_module("comfy_kitchen.backends.eager.residual").rms_gated_residual


def _eager_residual(_d: Inputs) -> bool:
    import importlib

    try:
        return hasattr(importlib.import_module("comfy_kitchen.backends.eager.residual"), "rms_gated_residual")
    except ImportError:
        return False


CASES += [
    *(_rms_rope_case(op) for op in ("rms_rope1", "rms_rope", "rms_rope1_", "rms_rope_", "rms_rope_split_half1",
                                    "rms_rope_split_half", "rms_rope_split_half1_", "rms_rope_split_half_")),
    Case("rms_gated_residual", "gate per column", lambda d: (d.x, _vector(d, 22, 0.5, 1.0), d.x * 0.5,
                                                             _vector(d, 23)), exact,
         _residual_reference, runs=_eager_residual, not_run=NEWER_EAGER),
]


def _mxfp8_gemm_args(d: Inputs) -> tuple:
    """scaled_mm_mxfp8's operands: x and a [LINEAR_N, COLS] weight quantized by eager."""
    w = synthetic(LINEAR_N, COLS, seed=SEED + 2).to(d.device, d.dtype)
    (qa, sa), (qb, sb) = d.eager.quantize_mxfp8(d.x), d.eager.quantize_mxfp8(w)
    return (qa, qb, sa, sb, None, d.dtype)


CASES += [
    Case("quantize_mxfp8", "", lambda d: (d.x,), exact, runs=_eager_takes("quantize_mxfp8"), not_run=NEWER_EAGER),
    Case("quantize_mxfp8", f"{ODD_SHAPE[0]}x{ODD_SHAPE[1]}, pad_32x", lambda d: (d.x_odd, True), exact,
         runs=_eager_takes("quantize_mxfp8"), not_run=NEWER_EAGER),
    Case("dequantize_mxfp8", "", lambda d: (*d.eager.quantize_mxfp8(d.x), d.dtype), exact,
         runs=_eager_takes("dequantize_mxfp8"), not_run=NEWER_EAGER),
    # the GEMM's rule is the FP4 one: exact products (e4m3 values times powers of two) summed in
    # float32 in another order, then one rounding
    Case("scaled_mm_mxfp8", "", _mxfp8_gemm_args, fp4_gemm,
         runs=lambda d: _eager_takes("scaled_mm_mxfp8")(d) and _eager_runs_fp4_gemm(d),
         not_run="eager's is torch's block-scaled MXFP8 GEMM (CUDA, compute capability 10.0+, 16-bit output); "
         "tests/test_mxfp8_parity.py checks ours against the definition"),
]


# ---- ConvRot W4A4 -----------------------------------------------------------------------------

def _w4a4_module():
    """eager's W4A4 module, or None where the installed comfy-kitchen lacks it."""
    try:
        return importlib.import_module("comfy_kitchen.backends.eager.convrot_w4a4")
    except ImportError:
        return None


def _w4a4_reference(op: str) -> Callable[[object], Callable]:
    return lambda eager: getattr(_w4a4_module(), op)


def rotated_int4(ours, ref) -> str | None:
    """(packed int4 codes, scales) of a rotated quantization: the nibbles as rotated_int8's codes."""
    from comfy_kitchen.backends.eager.svdquant import _unpack_int4_row_major as unpack

    (q, s), (q_ref, s_ref) = ours, ref
    return rotated_int8((unpack(q), s), (unpack(q_ref), s_ref))


def _w4a4_weight(d: Inputs) -> tuple:
    return ops.quantize_convrot_w4a4_weight(d.x, 256)


def _w4a4_case(op: str, args, rule) -> Case:
    return Case(op, "", args, rule, reference=_w4a4_reference(op), runs=lambda d: _w4a4_module() is not None,
                not_run=NEWER_EAGER)


CASES += [
    _w4a4_case("quantize_convrot_w4a4_weight", lambda d: (d.x, 256), rotated_int4),
    _w4a4_case("dequantize_convrot_w4a4_weight", lambda d: (*_w4a4_weight(d), 256, 64, d.dtype), rotated_dequant),
    _w4a4_case("prepare_int4_weight_for_int8_linear", lambda d: (_w4a4_weight(d)[0],), exact),
    _w4a4_case("convrot_w4a4_linear", lambda d: (d.x[:16], *_w4a4_weight(d), None, 256), linear),
]


# ---- W4A8 / W6A8 -------------------------------------------------------------------------------

def _eager_w4a8():
    """comfy_kitchen's eager W4A8 module (not the quantization one), or None before it existed."""
    import importlib

    try:
        return importlib.import_module("comfy_kitchen.backends.eager.w4a8_int8")
    except ImportError:
        return None


def _w4a8_reference(op: str) -> Callable[[object], Callable]:
    return lambda eager: getattr(_eager_w4a8(), op)


def _w4a8_weight(d: Inputs, bits: int = 4) -> tuple:
    """eager's W4A8 storage (qdata, s_rel, s_channel, correction, codebook) of a [LINEAR_N, COLS]
    weight in the dtype."""
    w = synthetic(LINEAR_N, COLS, seed=SEED + 7).to(d.device, d.dtype) * 0.01
    return _eager_w4a8().quantize_w4a8_int8_weight(w, bits=bits)


def _w4a8_quant_args(d: Inputs, bits: int) -> tuple:
    """A [LINEAR_N, COLS] weight of few significant bits (multiples of 2^-6, at most 3 of them):
    its rotation is exact in any order, so on the CPU eager's result is ours bit for bit."""
    g = torch.Generator().manual_seed(SEED + 11)
    w = (torch.randint(-3, 4, (LINEAR_N, COLS), generator=g).float() * 2.0 ** -6).to(d.device, d.dtype)
    return (w, 16, 256, True, torch.float8_e4m3fn, True, None, 0, bits)


def _w4a8_dequant_args(d: Inputs, bits: int) -> tuple:
    q, s, sc, corr, cb = _w4a8_weight(d, bits)
    return (q, s, sc, cb, corr, 16, 256, d.dtype)


# Rows of x for the W4A8 linears: eager's path (decode, float16/float32 rotation by a matmul) is
# slow on the CPU, and the selftest's time budget is shared by every op.
W4A8_ROWS = 16


def _w4a8_linear_args(d: Inputs) -> tuple:
    q, s, sc, corr, cb = _w4a8_weight(d)
    return (d.x[:W4A8_ROWS], q, s, sc, cb, corr, None, 16, 256, torch.bfloat16)


def _w4a8_packed_args(d: Inputs) -> tuple:
    """MMA records (optimize_for_gemv's layout, made on CUDA only) of seeded random codes and scales."""
    g = torch.Generator().manual_seed(SEED + 8)
    records = torch.randint(0, 256, (LINEAR_N // 16 * COLS // 32, 288), generator=g, dtype=torch.int32)
    records[:, 256:] = torch.randint(0x20, 0x50, (records.shape[0], 32), generator=g, dtype=torch.int32)
    packed = records.to(torch.uint8).reshape(-1).view(torch.int8).to(d.device)
    s_channel = (torch.rand(LINEAR_N, generator=g) * 1e-3 + 1e-5).to(d.device)
    return (d.x[:W4A8_ROWS], packed, torch.empty(0, dtype=torch.float8_e4m3fn, device=d.device), s_channel, None,
            None, None,
            16, 256, torch.bfloat16)


def _w4a8_runs(op: str) -> Callable[[Inputs], bool]:
    """Where eager has the W4A8 module with the contract ours serves (0.2.40's: quantize takes
    bits=, the MMA-packed records exist); 0.2.31's older W4A8 is where "c" registers none of
    these (backend._CONTRACT_MODULES), so there is nothing of ours to check against it."""
    from . import backend

    return lambda d: _eager_w4a8() is not None and backend._contract_present(op)


def _w4a8_case(op: str, variant: str, args, rule) -> Case:
    return Case(op, variant, args, rule, _w4a8_reference(op), runs=_w4a8_runs(op), not_run=NEWER_EAGER)


CASES += [
    _w4a8_case("quantize_w4a8_int8_weight", "4-bit", lambda d: _w4a8_quant_args(d, 4), w4a8_codes),
    _w4a8_case("quantize_w4a8_int8_weight", "6-bit", lambda d: _w4a8_quant_args(d, 6), w4a8_codes),
    _w4a8_case("dequantize_w4a8_int8_weight", "4-bit", lambda d: _w4a8_dequant_args(d, 4), rotated_dequant),
    _w4a8_case("dequantize_w4a8_int8_weight", "6-bit", lambda d: _w4a8_dequant_args(d, 6), rotated_dequant),
    _w4a8_case("w4a8_int8_linear", "", _w4a8_linear_args, linear),  # eager's default quantizer: no correction
    _w4a8_case("w4a8_packed_linear", "", _w4a8_packed_args, linear),
]


# ---- AWQ W4A16 ---------------------------------------------------------------------------------

def _awq_args(d: Inputs) -> tuple:
    """x (16 rows: the small batch the op is made for) and a [LINEAR_N, COLS] AWQ weight: codes,
    group scales and zero points of x's dtype, group 64."""
    g = torch.Generator().manual_seed(SEED + 9)
    n, k = LINEAR_N, COLS
    q = torch.randint(-128, 128, (n, k // 2), generator=g, dtype=torch.int8).to(d.device)
    scales = (torch.rand(k // 64, n, generator=g) * 0.02 + 0.001).to(d.device, d.dtype)
    zeros = (torch.randn(k // 64, n, generator=g) * 0.01).to(d.device, d.dtype)
    return (d.x[:16], q, scales, zeros, None, 64)


def _awq_reference(eager):
    """eager's result, carrying the op's bound per output (comfy_kitchen_c/awq_bound.py,
    docs/parity.md) for the rule, which sees only the results."""
    from .awq_bound import bound

    fn = importlib.import_module("comfy_kitchen.backends.eager.awq").gemv_awq_w4a16

    def reference(*args):
        out = fn(*args)
        out.awq_bound = bound(*args)
        return out
    return reference


def awq_within(ours, ref) -> str | None:
    """gemv_awq_w4a16: every output within its bound of eager's (float32 sums in two orders)."""
    (o,), (r,) = ours, ref
    limit = r.awq_bound
    err = (o.double() - r.double()).abs()
    bad = limit.isfinite() & ~(err <= limit)
    return f"{_count(bad)} outputs beyond the bound" if bool(bad.any()) else None


def _eager_awq(_d: Inputs) -> bool:
    try:
        return hasattr(importlib.import_module("comfy_kitchen.backends.eager.awq"), "gemv_awq_w4a16")
    except ImportError:
        return False


CASES += [Case("gemv_awq_w4a16", "", _awq_args, awq_within, _awq_reference, runs=_eager_awq, not_run=NEWER_EAGER)]


# ---- running --------------------------------------------------------------------------------

@dataclass
class Row:
    label: str
    device: str
    dtype: torch.dtype
    codes: str = "-"                 # integer outputs: "exact" or how many differ, by how much
    float_err: float = float("nan")  # float outputs: max |ours - eager| / max |eager|
    problem: str | None = None
    ours_ms: float = float("nan")
    eager_ms: float = float("nan")
    spread: tuple[float, float] = (float("nan"), float("nan"))  # lowest and highest round's speedup
    eager_serves: bool = False  # the registry gives this CPU call to eager (cpu_speed.py)

    @property
    def ok(self) -> bool:
        return self.problem is None


def _as_tuple(result) -> tuple:
    return tuple(result) if isinstance(result, (tuple, list)) else (result,)


def _eager_serves(op: str, fn, args: tuple, device: torch.device) -> bool:
    """Whether the registry gives this call to eager for speed, as measured on this CPU so far
    (cpu_speed.decided: CPU calls only; the selftest times nothing for the rules)."""
    if device.type != "cpu":
        return False
    return bool(cpu_speed.decided(op, dict(inspect.signature(fn).bind_partial(*args).arguments)))


def check_case(case: Case, inputs: Inputs, timing: bool = True) -> Row:
    """Runs one case on one (device, dtype); any exception is a FAIL with its message."""
    row = Row(case.label, inputs.device.type, inputs.dtype)
    stage = "building inputs"
    try:
        args = case.args(inputs)
        stage = "eager"
        eager_fn = case.reference(inputs.eager) if case.reference else getattr(inputs.eager, case.op)
        ref = _as_tuple(eager_fn(*args))
        stage = "comfy_kitchen_c"
        ours_fn = getattr(ops, case.op)  # looked up now, so a patched op is what gets checked
        ours = _as_tuple(ours_fn(*args))
        row.eager_serves = _eager_serves(case.op, ours_fn, args, inputs.device)
        stage = "comparing"
        o_present, r_present, row.problem = _present(ours, ref)
        row.problem = row.problem or _same_layout(o_present, r_present)
        if row.problem is None:
            row.codes, row.float_err = report.differences(o_present, r_present)
            row.problem = case.rule(ours, ref)
        if timing:
            stage = "timing"
            row.ours_ms, row.eager_ms, *spread = report.time_blocks(ours_fn, eager_fn, args, inputs.device)
            row.spread = tuple(spread)
    except Exception as exc:  # noqa: BLE001 - a selftest reports every failure as a row
        row.problem = f"{stage} raised {type(exc).__name__}: {exc}"
    return row


# ---- report ---------------------------------------------------------------------------------

def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).replace("torch.", "")


COLUMNS = ("op", "device", "dtype", "int8/fp4 codes", "float err (rel)", "verdict", "ours ms", "eager ms",
           "speedup (rounds)")


def _num(value: float, spec: str) -> str:
    """value formatted, or "-" where a failure left it unmeasured (NaN)."""
    return "-" if value != value else format(value, spec)


def _cells(row: Row) -> tuple[str, ...]:
    speedup = row.eager_ms / row.ours_ms if row.ours_ms > 0 else float("nan")
    return (row.label, row.device, _dtype_name(row.dtype), row.codes, _num(row.float_err, ".2g"),
            "PASS" if row.ok else "FAIL", _num(row.ours_ms, ".3f"), _num(row.eager_ms, ".3f"),
            "e " * row.eager_serves + _num(speedup, ".2f") + "x" * (speedup == speedup)
            + (f" ({row.spread[0]:.2g}-{row.spread[1]:.2g})" if row.spread[0] == row.spread[0] else ""))


class Table:
    """Prints rows as they finish, in columns sized for the case labels."""

    def __init__(self, out: TextIO, labels):
        self.out = out
        self.widths = [max(len(COLUMNS[0]), *map(len, labels)), 6, 8, 24, 15, 7, 9, 9, 18]

    def _line(self, cells) -> None:
        first, *rest = cells
        print(first.ljust(self.widths[0]), *(c.rjust(w) for c, w in zip(rest, self.widths[1:])),
              sep="  ", file=self.out, flush=True)

    def header(self) -> None:
        self._line(COLUMNS)
        self._line(["-" * w for w in self.widths])

    def row(self, row: Row) -> None:
        self._line(_cells(row))


LEGEND = ("dtype: the input's (quantize, rotate), the output's (*_dtype, dequantize_nvfp4) or the scale's "
          "(float32 dequantize).\n"
          "int8/fp4 codes: integer outputs (int8 codes, packed FP4 bytes): exact, or how many differ from eager "
          "and by how many steps at most.\n"
          "float err (rel): largest |ours - eager| of the float outputs (scales, dequantized values, results) "
          "divided by the largest |eager|; 0 is bit-exact.\n"
          f"Times: median ms per call, in blocks of {report.MIN_CALLS}-{report.MAX_CALLS} consecutive calls of one "
          f"implementation, {report.ROUNDS} alternating rounds (benchmarks/bench_cpu.py's method); speedup = eager / ours "
          "of the medians, (rounds) the lowest and highest speedup of one round: the spread a busy machine makes.\n"
          "A direct call of comfy_kitchen_c.ops is timed: \"e\" before a speedup marks a call the registry gives to eager "
          "because eager measured faster there on this CPU (comfy_kitchen_c/cpu_speed.py, as measured so far: the "
          "selftest times no rule), so a speedup below 1x there is what that rule avoids.")


def _summary(rows: list[Row], out: TextIO, timing: bool = True, other_load: float | None = None) -> None:
    failed = [r for r in rows if not r.ok]
    legend = LEGEND if timing else LEGEND[:LEGEND.index("\nTimes:")]
    print(f"\n{legend}", file=out)
    busy = report.busy_note([r.spread for r in rows], other_load) if timing else None
    if busy:
        print(busy, file=out)
    print(f"{len(rows)} checks: {len(rows) - len(failed)} passed, {len(failed)} failed", file=out)
    for r in failed:
        print(f"FAIL {r.label} on {r.device}, {_dtype_name(r.dtype)}: {r.problem}", file=out)


def run(devices=None, out: TextIO | None = None, *, only=None, timing: bool = True) -> bool:
    """Checks every case (or those whose op is in ``only``) on ``devices`` (default: all
    available), printing the header and the table to ``out`` (default: sys.stdout at call
    time); ``timing=False`` leaves the time columns out.

    Returns True when every row passed.  Raises ReferenceMissing without comfy_kitchen.
    """
    eager, build_hadamard = load_reference()
    out = sys.stdout if out is None else out
    devices = available_devices() if devices is None else [str(d) for d in devices]
    cases = [c for c in CASES if only is None or c.op in only]
    for line in report.header_lines(devices):
        print(line, file=out)
    print(file=out)
    table = Table(out, [c.label for c in cases])
    table.header()
    rows = []
    not_run: dict[tuple[str, str], list[str]] = {}
    load = report.OtherLoad()
    for device in devices:
        for dtype in DTYPES:
            inputs = Inputs(eager, build_hadamard, device, dtype)
            for case in cases:
                if not case.runs(inputs):
                    not_run.setdefault((case.label, case.not_run), []).append(f"{device} {_dtype_name(dtype)}")
                    continue
                rows.append(check_case(case, inputs, timing))
                table.row(rows[-1])
    _summary(rows, out, timing, load.share())
    for (label, why), where in not_run.items():
        print(f"not checked: {label} on {', '.join(where)}: {why}", file=out)
    return all(r.ok for r in rows)


# ---- command line ---------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", action="append", choices=("cpu", "cuda"),
                        help="device to check (repeatable; default: every available device)")
    parser.add_argument("--op", action="append", metavar="NAME",
                        help="check only this op (repeatable; default: every op)")
    parser.add_argument("--no-timing", action="store_true", help="leave the time columns out (faster)")


def main(args: argparse.Namespace) -> int:
    """0 when every check passed, 1 when one failed, 2 when the run cannot happen."""
    missing = sorted(set(args.device or ()) - set(available_devices()))
    if missing:
        print(f"selftest: device {', '.join(missing)} is not available "
              f"(available: {', '.join(available_devices())})", file=sys.stderr)
        return 2
    unknown = sorted(set(args.op or ()) - {c.op for c in CASES})
    if unknown:
        print(f"selftest: no case for op {', '.join(unknown)}", file=sys.stderr)
        return 2
    try:
        passed = run(args.device, only=set(args.op) if args.op else None, timing=not args.no_timing)
    except ReferenceMissing as exc:
        print(f"selftest: {exc}", file=sys.stderr)
        return 2
    return 0 if passed else 1
