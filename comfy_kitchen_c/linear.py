# SPDX-License-Identifier: Apache-2.0
"""The int8 linear ops of backend "c": int8_linear (every input activation of comfy_kitchen
0.2.40, the residual form), int8_linear_modulated and int8_linear_rms_modulated.

All three are one C op (csrc/ops/linear.c): the activation (or modulation) is applied where
the row quantizer loads x (csrc/math/activation.h), the residual where the epilogue
stores y (csrc/math/linear.h).  Re-exported by ``comfy_kitchen_c.ops``.
"""
from __future__ import annotations

import functools
import math
import struct

import torch

from . import _C, cpu_speed, settings, weight_cache
from . import _checks as check
from ._C import ArgumentError, ArgumentTypeError
from ._call import _blas_search_dirs, _gpu_path, _run, compute_capability, gemm_workspace
from ._proved import checked as _checked

# Codes shared with C (csrc/contract/codes.h, csrc/math/activation.h), read from _C: comfy_kitchen's
# input_act names, and this package's own codes of the modulations; C's float kinds are its dtype codes.
INPUT_ACT_CODES = {None: _C.INPUT_ACTS["none"], **_C.INPUT_ACTS}
ACT_RMS_NORM, ACT_MODULATE, ACT_RMS_MODULATE = _C.INPUT_ACTS["rms_norm"], _C.ACT_MODULATE, _C.ACT_RMS_MODULATE
_PAIRED = {"swiglu": "[gate | up]", "situ": "[hidden | gate]"}
_KIND = {getattr(torch, name): _C.DTYPES[name] for name in ("float32", "float16", "bfloat16")}

# The largest bound C's plan takes (an int64): any larger bound (set_linear_memory_limit takes any
# positive integer) means the same, no chunking.
_PLAN_LIMIT_MAX = 2**62
_GEMV_ROWS = _C.LINEAR_GEMV_ROWS  # rows up to this take the GPU's GEMV, not cuBLASLt

# w4a8_linear's decoded weight rows (GPU): at most this many bytes of the int8 grid at a time, each
# part multiplied right after it is decoded, so a call never holds the whole decoded weight (what
# the 4-bit format exists to avoid) and the part stays in the L2 cache of GPUs with >= 16 MB of it
# between its decode and its GEMM.  8 MiB: 2,720 rows of K = 3072, 576 of K = 14336; at most half of
# the linear memory limit (set_linear_memory_limit) where that is smaller.
W4A8_DECODE_BYTES = 8 << 20

# Set by set_linear_memory_limit, else read from COMFY_KITCHEN_C_LINEAR_MEMORY_MB (settings.py) at
# the first use (a refused value was reported at import and its default, 256, is used).
_linear_memory_limit: int | None = None


def set_linear_memory_limit(nbytes: int) -> None:
    """Bound on the extra memory one int8_linear call allocates (bytes; default 256 MiB, or
    COMFY_KITCHEN_C_LINEAR_MEMORY_MB): rows are processed in chunks so that the quantized rows,
    their scales, the int32 accumulator (and, for shapes cuBLASLt needs padded, a padded weight
    copy) stay under it.  At least one row is processed at a time whatever the bound."""
    global _linear_memory_limit
    nbytes = check.integer("set_linear_memory_limit", "nbytes", nbytes)
    if nbytes < 1:
        raise ArgumentError(f"set_linear_memory_limit: argument 'nbytes': expected a positive size, got {nbytes}")
    _linear_memory_limit = nbytes


def linear_memory_limit() -> int:
    """The current bound of set_linear_memory_limit, in bytes."""
    global _linear_memory_limit
    if _linear_memory_limit is None:
        _linear_memory_limit = max(1, int(settings.value("COMFY_KITCHEN_C_LINEAR_MEMORY_MB") * 2**20))
    return _linear_memory_limit


def _gemm_alignment(device: torch.device) -> tuple[int, int]:
    """(k, n) multiples the GPU GEMM is given: cuBLASLt's int8 IMMA needs k and n multiples of 4;
    16 keeps rows 16-byte aligned, and Turing rejects some n not a multiple of 32 (comfy_kitchen
    pads to 32 there for the same reason)."""
    if device.type == "cuda" and compute_capability(device.index) == (7, 5):
        return 16, 32
    return 16, 16


# ---- argument checks (also the backend's call rules: an argument the registry's probe leaves
# out, None, is not checked there; the ops require what they need) ------------------------------

def _eps(op: str, name: str, value) -> float:
    """rms_norm's eps as aten takes it: a number, or None for float32's epsilon."""
    if value is None:
        return float(torch.finfo(torch.float32).eps)
    if not check.number(value):
        raise ArgumentTypeError(f"{op}: argument '{name}': expected a number or None, got {type(value).__name__}")
    if abs(value) > torch.finfo(torch.float32).max:
        raise ArgumentError(f"{op}: argument '{name}': {value} does not fit a float32")
    return float(value)


def _norm_weight(op: str, name: str, value, k: int, x) -> None:
    """A norm weight of normalized_shape (k,), as torch's rms_norm requires."""
    if value is None:
        raise ArgumentTypeError(f"{op}: argument '{name}' is required")
    check.tensor(op, name, value, check.FLOAT_DTYPES)
    if tuple(value.shape) != (k,):
        raise ArgumentError(f"{op}: argument '{name}': expected shape [{k}] (the normalized row), got "
                            f"{list(value.shape)}")
    check.same_device(op, x=x, **{name: value})


def _modulation(op: str, value, k: int, x) -> None:
    """A modulation scale of k values (one batch row, as comfy_kitchen's portable contract)."""
    if value is None:
        raise ArgumentTypeError(f"{op}: argument 'modulation_scale' is required")
    check.tensor(op, "modulation_scale", value, check.FLOAT_DTYPES)
    if value.numel() != k:
        raise ArgumentError(f"{op}: argument 'modulation_scale': expected one row of {k} values, got shape "
                            f"{list(value.shape)}")
    check.same_device(op, x=x, modulation_scale=value)


def _broadcasts_to(shape, target) -> bool:
    """Whether a tensor of `shape` broadcasts to `target` without enlarging it."""
    return len(shape) <= len(target) and all(s in (1, t) for s, t in zip(reversed(shape), reversed(target)))


def _check_residual(op: str, residual, residual_scale, out_shape, x) -> None:
    if residual is None:
        return  # eager ignores residual_scale without a residual
    check.tensor(op, "residual", residual, check.FLOAT_DTYPES)
    if not _broadcasts_to(tuple(residual.shape), out_shape):
        raise ArgumentError(f"{op}: argument 'residual': shape {list(residual.shape)} does not broadcast to the "
                            f"output's {list(out_shape)}")
    if residual_scale is None:
        raise ArgumentError(f"{op}: argument 'residual_scale' is required with a residual")
    check.tensor(op, "residual_scale", residual_scale, check.FLOAT_DTYPES)
    n = out_shape[-1]
    if residual_scale.numel() not in (1, n) or not _broadcasts_to(tuple(residual_scale.shape), out_shape):
        raise ArgumentError(f"{op}: argument 'residual_scale': expected 1 or {n} values (per output channel), "
                            f"got shape {list(residual_scale.shape)}")
    check.same_device(op, x=x, residual=residual, residual_scale=residual_scale)


def _check_product(op: str, x, k: int, weight, weight_scale, bias, out_dtype, convrot, convrot_groupsize,
                   activated: str = "") -> int:
    """The linear product's arguments for an activated row of k values: returns n."""
    if weight is None:
        raise ArgumentTypeError(f"{op}: argument 'weight' is required")
    check.tensor(op, "weight", weight, (torch.int8,), ndim=2)
    n = weight.shape[0]
    if weight.shape[1] != k:
        raise ArgumentError(f"{op}: argument 'weight': shape {list(weight.shape)} does not match the "
                            f"{activated}input's {k} features")
    if weight_scale is not None:
        check.tensor(op, "weight_scale", weight_scale, check.FLOAT_DTYPES)
        if weight_scale.numel() not in (1, n):
            raise ArgumentError(f"{op}: argument 'weight_scale': expected 1 or {n} values (scalar or per output "
                                f"channel), got shape {list(weight_scale.shape)}")
    if bias is not None:
        check.tensor(op, "bias", bias, check.FLOAT_DTYPES)
        if bias.numel() not in (1, n):
            raise ArgumentError(f"{op}: argument 'bias': expected {n} values, got shape {list(bias.shape)}")
    check.result_dtype(op, "out_dtype", out_dtype)
    if not isinstance(convrot, bool):
        raise ArgumentTypeError(f"{op}: argument 'convrot': expected a bool, got {type(convrot).__name__}")
    if convrot:
        check.group_size(op, convrot_groupsize, k, name="convrot_groupsize")
    check.same_device(op, x=x, weight=weight, weight_scale=weight_scale, bias=bias)
    return n


def check_int8_linear(x, weight=None, weight_scale=None, bias=None, out_dtype=None, convrot=False,
                      convrot_groupsize=256, input_act=None, input_act_weight=None, input_act_eps=0.0,
                      residual=None, residual_scale=None):
    """(k, n, activation code) of a valid call."""
    op = "int8_linear"
    check.rows_of(op, "x", check.tensor(op, "x", x, check.FLOAT_DTYPES, min_ndim=1))
    if not isinstance(input_act, (str, type(None))) or input_act not in INPUT_ACT_CODES:
        raise ArgumentError(f"{op}: argument 'input_act': {input_act!r} is not one of None, "
                            + ", ".join(repr(a) for a in INPUT_ACT_CODES if a))
    act = INPUT_ACT_CODES[input_act]
    if input_act in _PAIRED and x.shape[-1] % 2:
        raise ArgumentError(f"{op}: argument 'x': {input_act} needs an even row length ({_PAIRED[input_act]}), "
                            f"got {x.shape[-1]}")
    k = x.shape[-1] // 2 if input_act in _PAIRED else x.shape[-1]
    if act == ACT_RMS_NORM:
        _norm_weight(op, "input_act_weight", input_act_weight, k, x)
        _eps(op, "input_act_eps", input_act_eps)
    n = _check_product(op, x, k, weight, weight_scale, bias, out_dtype, convrot, convrot_groupsize,
                       "activated " if input_act in _PAIRED else "")
    if residual is not None:  # eager ignores residual_scale without a residual (_check_residual)
        _check_residual(op, residual, residual_scale, (*x.shape[:-1], n), x)
    return k, n, act


def check_int8_linear_modulated(x, modulation_scale=None, weight=None, weight_scale=None, bias=None,
                                out_dtype=None, convrot=False, convrot_groupsize=256):
    op = "int8_linear_modulated"
    _, k = check.rows_of(op, "x", check.tensor(op, "x", x, check.FLOAT_DTYPES, min_ndim=1))
    _modulation(op, modulation_scale, k, x)
    _check_product(op, x, k, weight, weight_scale, bias, out_dtype, convrot, convrot_groupsize)


def check_int8_linear_rms_modulated(x, norm_weight=None, norm_eps=None, modulation_scale=None, weight=None,
                                    weight_scale=None, bias=None, out_dtype=None, convrot=False,
                                    convrot_groupsize=256):
    op = "int8_linear_rms_modulated"
    _, k = check.rows_of(op, "x", check.tensor(op, "x", x, check.FLOAT_DTYPES, min_ndim=1))
    _norm_weight(op, "norm_weight", norm_weight, k, x)
    _eps(op, "norm_eps", norm_eps)
    _modulation(op, modulation_scale, k, x)
    _check_product(op, x, k, weight, weight_scale, bias, out_dtype, convrot, convrot_groupsize)


# ---- the ops ------------------------------------------------------------------------------------

def _float_bits(value: float) -> int:
    """The bits of value rounded to float32 (to nearest even, as c10's double -> float).  +0.0 (every
    call without rms_norm) skips the struct round trip; -0.0 compares equal to it but has a bit set."""
    if value == 0.0 and math.copysign(1.0, value) > 0:
        return 0
    return struct.unpack("<I", struct.pack("<f", value))[0]


@functools.lru_cache(maxsize=4096)
def _plan(*args):
    """_C.int8_linear_plan, asked once per shape class: a model's steps repeat a few shapes, so
    a call crosses into C once (the op), not twice (plan, then op).  The plan is a pure function
    of its arguments (sizes, alignment, memory limit), so a remembered answer is the answer."""
    return _C.int8_linear_plan(*args)


def _padded(w: torch.Tensor, shape) -> torch.Tensor:
    """w [n, k] zero-padded to shape, for cuBLASLt's int8 GEMM (_gemm_alignment)."""
    padded = torch.zeros(shape, dtype=torch.int8, device=w.device)
    padded[:w.shape[0], :w.shape[1]] = w
    return padded


def _broadcast_served(fn, x, residual, n: int, *args, **kwargs):
    """A linear of an x whose leading dimensions are expanded (stride 0: one row repeated, as
    torch.randn(1, 3072).expand(1 << 22, 3072)) served without copying x whole: each output row
    depends on its x row alone (and on its residual row, so only the dimensions where the residual
    repeats too), so fn computes the distinct rows and the result is expanded to the full output,
    made contiguous as eager's is.  None when x has no such dimension (fn then runs as usual)."""
    if x.is_contiguous():  # no dimension of more than one element has stride 0
        return None
    lead, strides = x.shape[:-1], x.stride()
    dims = [d for d in range(len(lead)) if lead[d] > 1 and strides[d] == 0]  # one stride read per call
    if not dims:
        return None
    res = None if residual is None else residual.expand(*lead, n)
    dims = [d for d in dims if res is None or res.stride(d) == 0]
    if not dims:
        return None
    xs = x
    for d in dims:
        xs = xs.narrow(d, 0, 1)
        res = None if res is None else res.narrow(d, 0, 1)
    y = fn(xs, *args, residual=res, **kwargs) if residual is not None else fn(xs, *args, **kwargs)
    full = y.expand(*lead, n)
    check.fits(fn.__name__, "x", f"the output of shape {list(full.shape)}", full.numel() * full.element_size(),
               full.device)
    return full.contiguous()


def _linear(op: str, x, weight, weight_scale, bias, out_dtype, group: int, act: int, k: int, n: int,
            act_weight=None, modulation=None, eps: float = 0.0, norm_kind: int = -1, residual=None,
            residual_scale=None, codes=None):
    """The C op on checked arguments: x [..., k * width] of the row's evaluation type.
    codes (GPU only): weight is then a W4A8 / W6A8 weight's codes and codes its
    (s_rel, codebook, (group_size, bits, packed, s_e4m3)), w4a8.py's; the C op w4a8_linear
    decodes them a part at a time within W4A8_DECODE_BYTES of the scratch, or for a few rows
    of canonical codes in its GEMV's registers."""
    if weight_scale is None:
        raise ArgumentTypeError(f"{op}: argument 'weight_scale' is required")
    out_dtype = check.result_dtype(op, "out_dtype", out_dtype)
    device = x.device
    # x and out go to C in their own shapes ([..., K] and [..., N]): the C op takes them as rows.
    m = x.numel() // x.shape[-1]
    out_shape = (*x.shape[:-1], n)
    # any shape with 1 or n values: the C op reads it as a flat array, in float32 (converted once
    # per scale tensor where it is not, weight_cache.py)
    w_scale = weight_scale if weight_scale.dtype == torch.float32 and weight_scale.is_contiguous() else \
        weight_cache.derived(weight_scale, "float32", lambda: weight_scale.to(dtype=torch.float32).contiguous(),
                             linear_memory_limit())
    # The bias, the residual and its scale go in their own dtypes: the epilogue rounds them to
    # out_dtype, as eager's .to(out_dtype), and adds them as eager does (csrc/math/linear.h).
    if bias is not None:
        bias = bias.contiguous() if bias.numel() == n else bias.reshape(1).expand(n).contiguous()
    if residual is None:
        residual_scale = None  # eager's apply_residual ignores a scale without a residual
    else:
        residual = check.dense(op, "residual", residual if tuple(residual.shape) == out_shape else
                               residual.expand(out_shape))
        residual_scale = residual_scale.reshape(-1).contiguous()
    w = weight.contiguous()
    gpu = _gpu_path(device)
    # the decoded part within the call's memory bound too (half of it at most)
    decode = min(W4A8_DECODE_BYTES, max(linear_memory_limit() // 2, 1)) if codes is not None else 0
    vectors = (None, None) if act_weight is None and modulation is None else \
        [None if t is None else t.contiguous().reshape(-1) for t in (act_weight, modulation)]
    if not gpu and _library_gemm(m, k, n):
        out = torch.empty(size=out_shape, dtype=out_dtype, device=device)
        _linear_cpu_parts(op, _rows_view(op, x), w, w_scale, bias, out, residual, residual_scale, group, act, k, vectors,
                          _float_bits(eps), norm_kind)
        return out
    xc = check.dense(op, "x", x)
    k_align, n_align = _gemm_alignment(device) if gpu else (1, 1)
    # The scratch (quantized rows, scales, accumulator, activated rows, rms_norm's row factors,
    # within the memory limit) and whether the GEMM needs a zero-padded weight copy: C's plan
    # (csrc/contract/linear_plan.h), the very layout the op carves the scratch with.
    scratch_bytes, padded_shape = _plan(m, k, n, k_align, n_align, gpu, act, xc.element_size(), w.data_ptr() % 16 == 0,
                                        min(linear_memory_limit(), _PLAN_LIMIT_MAX), decode,
                                        int(codes is not None and not codes[2][2]))  # the GEMV reads canonical codes
    if padded_shape is not None:
        # once per weight (weight_cache.py: keyed by the caller's tensor), not once per call
        w = weight_cache.derived(weight, f"padded to {padded_shape}", functools.partial(_padded, w, padded_shape),
                                 linear_memory_limit())
    scratch = torch.empty(scratch_bytes, dtype=torch.uint8, device=device)
    out = torch.empty(size=out_shape, dtype=out_dtype, device=device)
    if device.type == "cuda":
        _blas_search_dirs()
    # rows past the GEMV's run cuBLASLt's GEMM, on the workspace torch gives it
    workspace = gemm_workspace(device) if gpu and m > _GEMV_ROWS else None
    ints = (act, group, k_align, n_align, _float_bits(eps), norm_kind)
    if codes is None:
        _run("int8_linear", op, device, (xc, w, w_scale, bias, out, scratch, *vectors, residual, residual_scale,
                                         workspace), ints)
    else:
        s_rel, codebook, form = codes
        _run("w4a8_linear", op, device, (xc, w, w_scale, bias, out, scratch, *vectors, residual, residual_scale, s_rel,
                                         codebook, workspace), ints + (*form, decode))
    return out


# ---- CPU: the GEMM from torch (oneDNN), quantizer and epilogue ours -----------------------------

# Below this many rows our C GEMM (csrc/cpu/linear_impl.h) is the one-call op's and wins: a row or a
# few are a matrix-vector product bound by reading the weight, which ours streams once per call
# with no host work between parts, while torch._int_mm pays oneDNN's per-call setup (a primitive
# for each new m) and two more Python -> C calls.  Measured on AVX512-VNNI (2 cores), K = N = 3072:
# see benchmarks/results/cpu_int8_linear_gemm.md.
LIBRARY_GEMM_MIN_ROWS = 16


def _library_gemm(m: int, k: int, n: int) -> bool:
    """Whether a CPU int8_linear of m x k x n runs its GEMM in torch._int_mm: with oneDNN on
    (torch.backends.mkldnn; without it _int_mm is a plain loop, slower than ours) and rows enough
    (LIBRARY_GEMM_MIN_ROWS).  The choice cannot change a result: int32 sums of int8 products are
    exact in any order, and the quantizer and epilogue are the same C code either way."""
    return (m >= LIBRARY_GEMM_MIN_ROWS and k > 0 and n > 0 and _library_gemm_on()
            and torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled)


_LIBRARY_GEMM_ON: bool | None = None  # COMFY_KITCHEN_C_CPU_GEMM (settings.py), read at first use


def _library_gemm_on() -> bool:
    global _LIBRARY_GEMM_ON
    if _LIBRARY_GEMM_ON is None:
        _LIBRARY_GEMM_ON = hasattr(torch, "_int_mm") and settings.value("COMFY_KITCHEN_C_CPU_GEMM") == "library"
    return _LIBRARY_GEMM_ON


def _rows_view(op: str, x: torch.Tensor) -> torch.Tensor:
    """x as [rows, K] without a copy where its strides allow (contiguous rows, or rows of any
    stride: a transposed or sliced x), for _linear_cpu_parts to copy a chunk at a time; else its
    whole contiguous copy (check.dense: refused beyond the device's memory)."""
    try:
        return x.view(-1, x.shape[-1])
    except RuntimeError:
        return check.dense(op, "x", x).view(-1, x.shape[-1])


def _linear_cpu_parts(op: str, x2, w, w_scale, bias, out, residual, residual_scale, group: int, act: int,
                      k: int, vectors, eps_bits: int, norm_kind: int) -> None:
    """int8_linear on the CPU in chunks of rows bounded by the linear memory limit (the one-call
    op's per-row bytes: codes, scale, int32 accumulator, activated row, and the row's copy where
    x2's rows are not contiguous, _rows_view): per chunk, our quantizer
    (C: activation, rotation, row-wise int8), torch._int_mm into the chunk's accumulator, our
    epilogue (C: scales, bias, residual form) into the output rows."""
    n = w.shape[0]
    m = x2.shape[0]
    elem = x2.element_size() if act else 0
    # rows of a non-contiguous x are copied a chunk at a time, within the same bound
    copied = 0 if x2.is_contiguous() else x2.shape[1] * x2.element_size()
    rows = max(1, min(m, linear_memory_limit() // (k + 4 + 4 * n + k * elem + copied)))
    q = torch.empty(size=(rows, k), dtype=torch.int8)
    x_scale = torch.empty(rows, dtype=torch.float32)
    acc = torch.empty(size=(rows, n), dtype=torch.int32)
    act_rows = torch.empty(rows * k * elem, dtype=torch.uint8) if act else None
    out2 = out.view(m, n)
    res2 = None if residual is None else residual.view(m, n)
    wt = w.t()  # [k, n] with k contiguous: oneDNN takes the transposed weight as it is
    for r0 in range(0, m, rows):
        c = min(rows, m - r0)
        _run("int8_linear_quantize", op, x2.device,
             (x2[r0:r0 + c].contiguous(), q[:c], x_scale[:c], None if act_rows is None else act_rows[:c * k * elem], *vectors),
             (act, group, eps_bits, norm_kind))
        torch._int_mm(q[:c], wt, out=acc[:c])
        _run("int8_linear_epilogue", op, x2.device,
             (acc[:c], x_scale[:c], w_scale, bias, None if res2 is None else res2[r0:r0 + c], residual_scale,
              out2[r0:r0 + c]), ())


def int8_linear(x, weight, weight_scale, bias=None, out_dtype=torch.bfloat16, convrot=False, convrot_groupsize=256,
                input_act=None, input_act_weight=None, input_act_eps=0.0, residual=None, residual_scale=None):
    """y = (rowwise_int8(rotate(act(x))) . weight^T) * x_scale * weight_scale + bias, shape
    (*x.shape[:-1], N), in out_dtype (omitted: bfloat16; None: float32, as eager's int8_linear called
    directly; comfy_kitchen.int8_linear turns None into bfloat16 before dispatch); with a
    residual, residual + residual_scale * y (eager's apply_residual, in out_dtype).

    input_act is comfy_kitchen's: None/"none", "gelu_tanh", "swiglu" ([gate | up], halves the
    row), "rms_norm" (input_act_weight: K values, input_act_eps), "situ" ([hidden | gate]).
    Rows go through in chunks bounded by set_linear_memory_limit."""
    op = "int8_linear"
    k, n, act = _checked(check_int8_linear, x, weight, weight_scale, bias, out_dtype, convrot, convrot_groupsize, input_act,
                                  input_act_weight, input_act_eps, residual, residual_scale)
    served = _broadcast_served(int8_linear, x, residual, n, weight, weight_scale, bias, out_dtype, convrot,
                               convrot_groupsize, input_act, input_act_weight, input_act_eps,
                               residual_scale=residual_scale)
    if served is not None:
        return served
    if act and x.device.type == "cpu" and cpu_speed.torch_act(input_act, x.dtype) \
            and _library_gemm(x.numel() // max(x.shape[-1], 1), k, n):
        # torch's activation is faster there than our fused one (cpu_speed.py), and eager's bits.
        # On contiguous rows: torch's reductions (rms_norm) sum a strided row in another order, and
        # ours is each row's result as a contiguous row whatever the layout (docs/parity.md).
        x, act = cpu_speed.apply_input_act(x.contiguous(), input_act, input_act_weight, input_act_eps), 0
    rms = act == ACT_RMS_NORM
    return _linear(op, x, weight, weight_scale, bias, out_dtype, convrot_groupsize if convrot else 0, act, k, n,
                   act_weight=input_act_weight if rms else None,
                   eps=_eps(op, "input_act_eps", input_act_eps) if rms else 0.0,
                   residual=residual, residual_scale=residual_scale)


def _modulated_rows(op: str, x, modulation_scale):
    """x in the type eager's x * (1 + s) has (the promoted type of the two; an exact upcast
    where that is float32 and x is not), and x's own type code (rms_norm's result type).  The
    upcast is a copy of x: refused beyond the device's memory as any (check.fits)."""
    promoted = torch.promote_types(x.dtype, modulation_scale.dtype)
    if promoted == x.dtype:
        return x, _KIND[x.dtype]
    check.fits(op, "x", f"x of shape {list(x.shape)} in {promoted}", x.numel() * promoted.itemsize, x.device)
    return x.to(promoted), _KIND[x.dtype]


def int8_linear_modulated(x, modulation_scale, weight, weight_scale, bias=None, out_dtype=torch.bfloat16,
                          convrot=False, convrot_groupsize=256):
    """int8_linear(x * (1 + modulation_scale), ...) with the modulation (one row of K values,
    applied to every row) fused into the quantizer's load: eager's batch-one contract, rounded
    as eager rounds (1 + s in s's dtype, the product in the promoted dtype)."""
    op = "int8_linear_modulated"
    _checked(check_int8_linear_modulated, x, modulation_scale, weight, weight_scale, bias, out_dtype, convrot,
                                convrot_groupsize)
    served = _broadcast_served(int8_linear_modulated, x, None, weight.shape[0], modulation_scale, weight,
                               weight_scale, bias, out_dtype, convrot, convrot_groupsize)
    if served is not None:
        return served
    rows, _ = _modulated_rows(op, x, modulation_scale)
    return _linear(op, rows, weight, weight_scale, bias, out_dtype, convrot_groupsize if convrot else 0,
                   ACT_MODULATE, x.shape[-1], weight.shape[0], modulation=modulation_scale)


def int8_linear_rms_modulated(x, norm_weight, norm_eps, modulation_scale, weight, weight_scale, bias=None,
                              out_dtype=torch.bfloat16, convrot=False, convrot_groupsize=256):
    """int8_linear_modulated(rms_norm(x, norm_weight, norm_eps), ...) fused: the row's
    rsqrt(mean(x^2) + eps) first (on the GPU a one-warp reduction before the quantizer), then
    rms_norm, the modulation and the quantization at the quantizer's load; rms_norm as aten's
    (in float32, rounded to x's dtype), the norm weight in its own dtype."""
    op = "int8_linear_rms_modulated"
    _checked(check_int8_linear_rms_modulated, x, norm_weight, norm_eps, modulation_scale, weight, weight_scale, bias,
                                    out_dtype, convrot, convrot_groupsize)
    served = _broadcast_served(int8_linear_rms_modulated, x, None, weight.shape[0], norm_weight, norm_eps,
                               modulation_scale, weight, weight_scale, bias, out_dtype, convrot, convrot_groupsize)
    if served is not None:
        return served
    rows, norm_kind = _modulated_rows(op, x, modulation_scale)
    return _linear(op, rows, weight, weight_scale, bias, out_dtype, convrot_groupsize if convrot else 0,
                   ACT_RMS_MODULATE, x.shape[-1], weight.shape[0], act_weight=norm_weight,
                   modulation=modulation_scale, eps=_eps(op, "norm_eps", norm_eps),
                   norm_kind=norm_kind)


# Their x is never copied whole before _linear's own bounded copies: broadcast rows are served from
# the distinct ones (_broadcast_served), the CPU's chunks copy a chunk at a time (_rows_view), and
# any whole copy goes through check.dense (refused beyond the device's memory).
check.COPIED_BY_THE_OP.update({name: ("x",) for name in ("int8_linear", "int8_linear_modulated",
                                                         "int8_linear_rms_modulated")})

__all__ = ["check_int8_linear", "check_int8_linear_modulated", "check_int8_linear_rms_modulated", "int8_linear",
           "int8_linear_modulated", "int8_linear_rms_modulated", "linear_memory_limit", "set_linear_memory_limit"]
