# SPDX-License-Identifier: Apache-2.0
"""The ops of backend "c", with comfy_kitchen's names, parameters and results.

Each op checks its arguments (``check_<op>``, also used by the backend's
constraint rules), allocates its outputs with torch, and runs the C kernels of
``_C`` on the tensors' device.  Inputs that are not contiguous are copied to a
contiguous tensor first, after the check and only where the copy fits the device's memory
(``_checks.copies_fit``; the int8 linears serve an expanded x from its distinct rows); outputs
are always new tensors.
"""
from __future__ import annotations

import functools

import torch

from . import _C
from . import _checks as check
from . import faults
from ._C import ArgumentError, ArgumentTypeError
from ._call import (  # noqa: F401 (re-exported: tests and backend.py use them through ops)
    CAPTURED_TENSORS,
    _blas_search_dirs,
    _capsule,
    _gpu_path,
    _round_up,
    _run,
    compute_capability,
    gemm_workspace,
    gpu_compute_capability,
)
from ._kernels import KERNELS
from ._proved import checked as _checked
from .fp8 import (  # noqa: F401 (the per-tensor FP8 ops, part of this module's interface)
    check_dequantize_per_tensor_fp8,
    check_quantize_per_tensor_fp8,
    check_stochastic_rounding_fp8,
    dequantize_per_tensor_fp8,
    quantize_per_tensor_fp8,
    stochastic_rounding_fp8,
)
from .linear import (  # noqa: F401 (the int8 linear ops, part of this module's interface)
    check_int8_linear,
    check_int8_linear_modulated,
    check_int8_linear_rms_modulated,
    int8_linear,
    int8_linear_modulated,
    int8_linear_rms_modulated,
    linear_memory_limit,
    set_linear_memory_limit,
)
from .mxfp8 import (  # noqa: F401 (the MXFP8 ops, part of this module's interface)
    check_dequantize_mxfp8,
    check_quantize_mxfp8,
    check_scaled_mm_mxfp8,
    dequantize_mxfp8,
    quantize_mxfp8,
    scaled_mm_mxfp8,
)
from .rope import (  # noqa: F401 (the RoPE ops, part of this module's interface)
    apply_rope,
    apply_rope1,
    apply_rope1_,
    apply_rope_,
    apply_rope_split_half,
    apply_rope_split_half1,
    apply_rope_split_half1_,
    apply_rope_split_half_,
    check_apply_rope,
    check_apply_rope1,
    check_apply_rope1_,
    check_apply_rope_,
    check_apply_rope_split_half,
    check_apply_rope_split_half1,
    check_apply_rope_split_half1_,
    check_apply_rope_split_half_,
)
from .rms_rope import (  # noqa: F401 (the rms_rope ops, part of this module's interface)
    rms_rope,
    rms_rope1,
    rms_rope1_,
    rms_rope_,
    rms_rope_split_half,
    rms_rope_split_half1,
    rms_rope_split_half1_,
    rms_rope_split_half_,
    check_rms_rope,
    check_rms_rope1,
    check_rms_rope1_,
    check_rms_rope_,
    check_rms_rope_split_half,
    check_rms_rope_split_half1,
    check_rms_rope_split_half1_,
    check_rms_rope_split_half_,
)
from .residual import (  # noqa: F401 (rms_gated_residual, part of this module's interface)
    check_rms_gated_residual,
    rms_gated_residual,
)
from .w4a4 import (  # noqa: F401 (the ConvRot W4A4 ops, part of this module's interface)
    check_convrot_w4a4_linear,
    check_dequantize_convrot_w4a4_weight,
    check_prepare_int4_weight_for_int8_linear,
    check_quantize_convrot_w4a4_weight,
    convrot_w4a4_linear,
    dequantize_convrot_w4a4_weight,
    prepare_int4_weight_for_int8_linear,
    quantize_convrot_w4a4_weight,
)
from .w4a8_quant import (  # noqa: F401 (the W4A8 / W6A8 quantizer, part of this module's interface)
    check_quantize_w4a8_int8_weight,
    quantize_w4a8_int8_weight,
)
from .w4a8 import (  # noqa: F401 (the W4A8 / W6A8 ops, part of this module's interface)
    check_dequantize_w4a8_int8_weight,
    check_w4a8_int8_linear,
    check_w4a8_packed_linear,
    dequantize_w4a8_int8_weight,
    w4a8_int8_linear,
    w4a8_packed_linear,
)
from .awq import (  # noqa: F401 (the AWQ W4A16 op, part of this module's interface)
    check_gemv_awq_w4a16,
    gemv_awq_w4a16,
)

# Codes shared with C, read from _C (csrc/contract/codes.h), never written here again.
# comfy_kitchen's output_dtype_code numbers the float dtypes as C's dtype codes do (_checks.py).
DTYPE_CODE_TO_DTYPE = check.DTYPE_CODE_TO_DTYPE
_SCALE_SCALAR, _SCALE_PER_ROW, _SCALE_FULL = _C.SCALE_SCALAR, _C.SCALE_PER_ROW, _C.SCALE_FULL
_NVFP4_BLOCK = _C.NVFP4_BLOCK


# ---- plumbing (the call into C: _call.py) ---------------------------------------------------

def _as_rows(x: torch.Tensor) -> torch.Tensor:
    """x as the contiguous [rows, K] the dequantizers take: x itself when it already is one (a
    reshape and a view back cost a few microseconds per call)."""
    if x.dim() == 2 and x.is_contiguous():
        return x
    return x.reshape(-1, x.shape[-1] if x.dim() else 1).contiguous()


def _noise(x: torch.Tensor, seed: int) -> torch.Tensor | None:
    """The uniform noise eager draws for stochastic rounding, bit for bit."""
    if seed <= 0:
        return None
    generator = torch.Generator(device=x.device)
    generator.manual_seed(seed)
    return torch.rand(x.shape, dtype=x.dtype, device=x.device, generator=generator)


def _out_dtype(op: str, code) -> torch.dtype:
    check.integer(op, "output_dtype_code", code)
    if code not in DTYPE_CODE_TO_DTYPE:
        codes = ", ".join(f"{c} ({str(d).replace('torch.', '')})" for c, d in DTYPE_CODE_TO_DTYPE.items())
        raise ArgumentError(f"{op}: argument 'output_dtype_code': {code} is not one of {codes}")
    return DTYPE_CODE_TO_DTYPE[code]


# ---- int8: quantization ---------------------------------------------------------------------

def _quantize_rows(op: str, x: torch.Tensor, group: int, seed: int):
    """Row-wise quantization of x viewed as [-1, K], rotated first when group > 0.  The C op takes
    x of any rank as its rows of K, so q and scale are allocated in their final shapes."""
    xc = x.contiguous()
    q = torch.empty(size=xc.shape, dtype=torch.int8, device=x.device)
    scale = torch.empty(size=(*xc.shape[:-1], 1), dtype=torch.float32, device=x.device)
    _run("quantize_int8_rowwise", op, x.device, (xc, q, scale, _noise(xc, seed)), (group,))
    return q, scale


def check_quantize_int8_rowwise(x, stochastic_rounding=0):
    op = "quantize_int8_rowwise"
    _, k = check.rows_of(op, "x", check.tensor(op, "x", x, check.FLOAT_DTYPES, min_ndim=1, empty=True))
    check.row_length(op, "x", k)
    return check.seed(op, stochastic_rounding)


def quantize_int8_rowwise(x, stochastic_rounding=0):
    """(q int8 like x, scale float32 [..., 1]): one scale per row of the last dim."""
    seed = _checked(check_quantize_int8_rowwise, x, stochastic_rounding)
    return _quantize_rows("quantize_int8_rowwise", x, 0, seed)


def check_quantize_and_rotate_rowwise(x, h, group_size, stochastic_rounding=0):
    op = "quantize_and_rotate_rowwise"
    _, k = check.rows_of(op, "x", check.tensor(op, "x", x, check.FLOAT_DTYPES, min_ndim=1, empty=True))
    check.row_length(op, "x", k)
    check.group_size(op, group_size, k)
    if h is not None:
        # h is comfy_kitchen's prebuilt H_G; the kernels compute the same rotation directly.
        check.tensor(op, "h", h, check.FLOAT_DTYPES, ndim=2)
        if tuple(h.shape) != (group_size, group_size):
            raise ArgumentError(f"{op}: argument 'h': expected shape [{group_size}, {group_size}], "
                                f"got {list(h.shape)}")
    return check.seed(op, stochastic_rounding)


def quantize_and_rotate_rowwise(x, h, group_size, stochastic_rounding=0):
    """Row-wise int8 quantization of x rotated group-wise by the regular Hadamard matrix, fused."""
    seed = _checked(check_quantize_and_rotate_rowwise, x, h, group_size, stochastic_rounding)
    return _quantize_rows("quantize_and_rotate_rowwise", x, group_size, seed)


def check_quantize_int8_convrot_weight(weight, group_size, stochastic_rounding=0):
    op = "quantize_int8_convrot_weight"
    _, k = check.rows_of(op, "weight", check.tensor(op, "weight", weight, check.FLOAT_DTYPES, ndim=2, empty=True))
    check.row_length(op, "weight", k)
    check.group_size(op, group_size, k)
    return check.seed(op, stochastic_rounding)


def quantize_int8_convrot_weight(weight, group_size, stochastic_rounding=0):
    """ConvRot weight: rotate each group of in_features, then row-wise int8 quantization."""
    seed = _checked(check_quantize_int8_convrot_weight, weight, group_size, stochastic_rounding)
    return _quantize_rows("quantize_int8_convrot_weight", weight, group_size, seed)


def _check_tensorwise_scale(op: str, scale) -> None:
    if scale is None or (isinstance(scale, str) and scale == "recalculate"):
        return
    if isinstance(scale, torch.Tensor):
        check.strided(op, "scale", scale)
        if scale.numel() != 1:
            raise ArgumentError(f"{op}: argument 'scale': expected one element, got shape {list(scale.shape)}")
        if not scale.dtype.is_floating_point:
            raise ArgumentTypeError(f"{op}: argument 'scale': expected a floating dtype, got {scale.dtype}")
    elif not check.number(scale):
        raise ArgumentTypeError(f"{op}: argument 'scale': expected a number, a one-element tensor, None or "
                                f"'recalculate', got {scale!r}")


def _number_scale(value, shape: tuple, device: torch.device) -> torch.Tensor:
    """A scale given as a Python number, as a float32 tensor of `shape` on device, without a
    synchronization: torch.full passes the value to its fill kernel as an argument, where
    torch.tensor(value, device=cuda) would be a blocking host-to-device copy (which also
    breaks CUDA-graph capture).  Both round the number to float32 the same way."""
    return torch.full(shape, float(value), dtype=torch.float32, device=device)


def _tensorwise_scale(x: torch.Tensor, scale):
    """(float32 scale tensor, 1 if the kernel computes it) for a checked scale."""
    if scale is None or isinstance(scale, str):
        return torch.empty(size=(), dtype=torch.float32, device=x.device), 1
    if isinstance(scale, torch.Tensor):
        return scale.to(device=x.device, dtype=torch.float32), 0
    return _number_scale(scale, (), x.device), 0


def check_quantize_int8_tensorwise(x, scale=None, stochastic_rounding=0):
    op = "quantize_int8_tensorwise"
    check.tensor(op, "x", x, check.FLOAT_DTYPES, empty=True)
    _check_tensorwise_scale(op, scale)
    if x.numel() == 0 and (scale is None or isinstance(scale, str)):
        # eager fails the same way (max() of an empty tensor)
        raise ArgumentError(f"{op}: argument 'x': an empty tensor has no maximum to take the scale from; "
                            "pass a scale")
    return check.seed(op, stochastic_rounding)


def quantize_int8_tensorwise(x, scale=None, stochastic_rounding=0):
    """(q int8 like x, float32 scale): one scale for the whole tensor, computed or given."""
    op = "quantize_int8_tensorwise"
    seed = _checked(check_quantize_int8_tensorwise, x, scale, stochastic_rounding)
    scale_t, compute = _tensorwise_scale(x, scale)
    xc = x.contiguous()
    q = torch.empty(size=xc.shape, dtype=torch.int8, device=x.device)
    _run("quantize_int8_tensorwise", op, x.device, (xc, q, scale_t, _noise(x, seed)), (compute,))
    if isinstance(scale, torch.Tensor) and scale.dim() > x.dim():
        # eager's q is x / scale: broadcast, it takes the one-element scale's extra leading dims
        q = q.view((1,) * (scale.dim() - x.dim()) + tuple(x.shape))
    return q, scale_t


def check_rotate_int8_convrot_weight(weight, group_size):
    op = "rotate_int8_convrot_weight"
    _, k = check.rows_of(op, "weight", check.tensor(op, "weight", weight, check.FLOAT_DTYPES, ndim=2, empty=True))
    check.group_size(op, group_size, k)


def rotate_int8_convrot_weight(weight, group_size):
    """weight with each group of in_features rotated by the regular Hadamard matrix, in its dtype."""
    op = "rotate_int8_convrot_weight"
    _checked(check_rotate_int8_convrot_weight, weight, group_size)
    w = weight.contiguous()
    out = torch.empty_like(w)
    _run("rotate_int8_convrot_weight", op, w.device, (w, out), (group_size,))
    return out


# ---- int8: dequantization -------------------------------------------------------------------

def _scale_mode(op: str, q: torch.Tensor, scale: torch.Tensor) -> int:
    """How eager's ``q.float() * scale`` broadcast maps scale onto q viewed as [rows, K]."""
    # scale broadcasts to q exactly when, aligned from the right, each of its sizes is 1 or q's
    # (torch.broadcast_shapes decides the same but costs ~20 us per call)
    if scale.dim() > q.dim() or any(s != 1 and s != n for s, n in zip(reversed(scale.shape), reversed(q.shape))):
        raise ArgumentError(f"{op}: argument 'scale': shape {list(scale.shape)} does not broadcast to "
                            f"q's shape {list(q.shape)}")
    if scale.numel() == 1:
        return _SCALE_SCALAR
    padded = (1,) * (q.dim() - scale.dim()) + tuple(scale.shape)
    if padded == tuple(q.shape[:-1]) + (1,):
        return _SCALE_PER_ROW
    return _SCALE_FULL


def _check_dequant(op, q, scale, ndim=None) -> int:
    """The scale mode (_scale_mode) of a valid call."""
    check.tensor(op, "q", q, (torch.int8,), ndim=ndim, empty=True)
    check.rows_of(op, "q", q)
    check.tensor(op, "scale", scale, check.FLOAT_DTYPES, empty=q.numel() == 0)
    check.same_device(op, q=q, scale=scale)
    return _scale_mode(op, q, scale)


def _dequantize(op: str, q: torch.Tensor, scale: torch.Tensor, mode: int, out_dtype: torch.dtype, group: int):
    if q.numel() == 0:  # as eager: an empty result of q's shape (no rows to view q as)
        return torch.empty(size=q.shape, dtype=out_dtype, device=q.device)
    s = scale.to(dtype=torch.float32)  # exact: scale values are float16/bfloat16/float32
    s = s.expand(q.shape).contiguous() if mode == _SCALE_FULL else s.contiguous()
    q2 = _as_rows(q)
    out = torch.empty(size=q2.shape, dtype=out_dtype, device=q.device)
    _run("dequantize_int8_convrot_weight_dtype", op, q.device, (q2, s, out), (mode, group))
    return out if q2 is q else out.view(q.shape)


def check_dequantize_int8_simple(q, scale):
    return _check_dequant("dequantize_int8_simple", q, scale)


def dequantize_int8_simple(q, scale):
    """float32 q * scale (scale: scalar, per row, or any shape broadcasting to q)."""
    mode = _checked(check_dequantize_int8_simple, q, scale)
    return _dequantize("dequantize_int8_simple", q, scale, mode, torch.float32, 0)


def check_dequantize_int8_simple_dtype(q, scale, output_dtype_code):
    op = "dequantize_int8_simple_dtype"
    mode = _check_dequant(op, q, scale)
    return mode, _out_dtype(op, output_dtype_code)


def dequantize_int8_simple_dtype(q, scale, output_dtype_code):
    """q * scale rounded to the dtype of output_dtype_code (0 float32, 1 float16, 2 bfloat16)."""
    op = "dequantize_int8_simple_dtype"
    mode, out_dtype = _checked(check_dequantize_int8_simple_dtype, q, scale, output_dtype_code)
    return _dequantize(op, q, scale, mode, out_dtype, 0)


def check_dequantize_int8_convrot_weight(q, scale, group_size):
    op = "dequantize_int8_convrot_weight"
    mode = _check_dequant(op, q, scale, ndim=2)
    check.group_size(op, group_size, q.shape[-1])
    return mode


def dequantize_int8_convrot_weight(q, scale, group_size):
    """float32 (q * scale) rotated back group-wise: the ConvRot weight in its original basis."""
    mode = _checked(check_dequantize_int8_convrot_weight, q, scale, group_size)
    return _dequantize("dequantize_int8_convrot_weight", q, scale, mode, torch.float32, group_size)


def check_dequantize_int8_convrot_weight_dtype(q, scale, group_size, output_dtype_code):
    op = "dequantize_int8_convrot_weight_dtype"
    mode = _check_dequant(op, q, scale, ndim=2)
    check.group_size(op, group_size, q.shape[-1])
    return mode, _out_dtype(op, output_dtype_code)


def dequantize_int8_convrot_weight_dtype(q, scale, group_size, output_dtype_code):
    """dequantize_int8_convrot_weight rounded to the dtype of output_dtype_code."""
    op = "dequantize_int8_convrot_weight_dtype"
    mode, out_dtype = _checked(check_dequantize_int8_convrot_weight_dtype, q, scale, group_size, output_dtype_code)
    return _dequantize(op, q, scale, mode, out_dtype, group_size)


def _embedding_scale_mode(op: str, q: torch.Tensor, scale: torch.Tensor) -> int:
    """Eager's two cases: a scale of >= 2 dims is gathered with the rows (F.embedding(indices,
    scale): [vocab, 1] per row, [vocab, dim] per element), any other is one value."""
    if scale.dim() >= 2:
        if scale.dim() == 2 and scale.shape[0] == q.shape[0] and scale.shape[1] in (1, q.shape[1]):
            return _SCALE_PER_ROW if scale.shape[1] == 1 else _SCALE_FULL
        raise ArgumentError(f"{op}: argument 'scale': expected [{q.shape[0]}, 1] (per row) or "
                            f"[{q.shape[0]}, {q.shape[1]}], got shape {list(scale.shape)}")
    if scale.numel() != 1:
        raise ArgumentError(f"{op}: argument 'scale': a scale of fewer than 2 dimensions must be one value, got "
                            f"shape {list(scale.shape)}")
    return _SCALE_SCALAR


def check_dequantize_int8_embedding(q, scale, indices=None, group_size=0, output_dtype_code=0):
    """(scale mode, rotation group or 0, output dtype) of a valid call."""
    op = "dequantize_int8_embedding"
    check.tensor(op, "q", q, (torch.int8,), ndim=2)
    check.rows_of(op, "q", q)
    check.tensor(op, "scale", scale, check.FLOAT_DTYPES)
    mode = _embedding_scale_mode(op, q, scale)
    if indices is not None:
        if not isinstance(indices, torch.Tensor) or indices.dtype not in (torch.int32, torch.int64):
            raise ArgumentTypeError(f"{op}: argument 'indices': expected an int32 or int64 tensor, got "
                                    f"{getattr(indices, 'dtype', type(indices).__name__)}")
        check.strided(op, "indices", indices)
        if indices.numel() > check.MAX_EXTENT:
            raise ArgumentError(f"{op}: argument 'indices': {indices.numel()} indices; at most 2^31 - 1")
        # CPU indices are checked here, so the registry's rules refuse what the CPU op would; the GPU
        # path's are not (on CUDA that needs a host sync): their rows are NaN (docs/linear.md), which the
        # emulated device shows for CPU tensors.
        if indices.device.type == "cpu" and not _gpu_path(indices.device) and indices.numel():
            low, high = (int(v) for v in torch.aminmax(indices))  # one pass
            if low < 0 or high >= q.shape[0]:
                raise ArgumentError(f"{op}: argument 'indices': index {low if low < 0 else high} is out of range "
                                    f"for {q.shape[0]} rows")
    check.same_device(op, q=q, scale=scale, indices=indices)
    check.integer(op, "group_size", group_size)
    group = check.group_size(op, group_size, q.shape[1]) if group_size > 0 else 0
    return mode, group, _out_dtype(op, output_dtype_code)


def dequantize_int8_embedding(q, scale, indices, group_size, output_dtype_code):
    """Rows of the int8 table q [vocab, dim] picked by indices (any shape), dequantized (scale per
    row [vocab, 1], per element, or one value) and rotated back group-wise when group_size > 0:
    [*indices.shape, dim] in the dtype of output_dtype_code.  Only the picked rows are read.
    An index out of range raises ArgumentError on the CPU; on a GPU (no host sync to check it)
    its row is NaN."""
    op = "dequantize_int8_embedding"
    if indices is None:
        raise ArgumentTypeError(f"{op}: argument 'indices' is required")
    mode, group, out_dtype = _checked(check_dequantize_int8_embedding, q, scale, indices, group_size, output_dtype_code)
    out = torch.empty(size=(*indices.shape, q.shape[1]), dtype=out_dtype, device=q.device)
    if out.numel() == 0:
        return out
    s = scale.to(dtype=torch.float32).contiguous()  # exact: scale values are float16/bfloat16/float32
    _run("dequantize_int8_embedding", op, q.device, (q.contiguous(), s, indices.contiguous(), out), (mode, group))
    return out


# ---- NVFP4 ----------------------------------------------------------------------------------

# Swizzled block-scale buffer of rows x cols values, (roundup(rows,128), roundup(cols/16,4)):
# the formula of csrc/math/nvfp4.h, asked of C rather than written again.
# The block-scale buffer's shape, written once in C (csrc/math/nvfp4.h); remembered per shape, so
# a call of a shape seen before crosses into C once (the op), not twice.
_scale_shape = functools.lru_cache(maxsize=4096)(_C.nvfp4_scale_shape)


def _is_number(value) -> bool:
    return check.number(value)


def _check_per_tensor_scale(op: str, value, name: str = "per_tensor_scale", **same_device_as) -> None:
    """A number, or a one-element float32 tensor on the same device as the others."""
    if value is None:
        raise ArgumentTypeError(f"{op}: argument '{name}' is required")
    if _is_number(value):
        if isinstance(value, int) and abs(value) >= 2**64:  # eager fails too: torch takes ints of 64 bits
            raise ArgumentError(f"{op}: argument '{name}': integer {value} does not fit 64 bits")
        return
    check.tensor(op, name, value, (torch.float32,))
    if value.numel() != 1:
        raise ArgumentError(f"{op}: argument '{name}': expected one element, got shape "
                            f"{list(value.shape)}")
    check.same_device(op, **same_device_as, **{name: value})


def _per_tensor_scale(value, device) -> torch.Tensor:
    """The checked per-tensor scale as the one-element float32 tensor the kernels read."""
    if _is_number(value):
        return _number_scale(value, (1,), device)
    return value.reshape(1)


def _check_nvfp4_input(op: str, x) -> None:
    """x of the NVFP4 quantizers: 2-D, any number of columns (0 too), at least one row (eager's
    quantize_nvfp4 fails on zero rows: it reshapes x to [rows, -1, 16])."""
    check.tensor(op, "x", x, check.FLOAT_DTYPES, ndim=2, empty=True)
    check.rows_of(op, "x", x)
    if x.shape[0] == 0:
        raise ArgumentError(f"{op}: argument 'x': 0 rows (shape {list(x.shape)}): nothing to quantize")


def _check_flags(op: str, pad_16x, hi_first) -> None:
    check.boolean(op, "pad_16x", pad_16x)
    check.boolean(op, "hi_first", hi_first)


def check_quantize_nvfp4(x, per_tensor_scale=None, epsilon=0.0, pad_16x=False, hi_first=True):
    op = "quantize_nvfp4"
    _check_nvfp4_input(op, x)
    _check_per_tensor_scale(op, per_tensor_scale, x=x)
    _check_flags(op, pad_16x, hi_first)
    if not pad_16x and x.shape[1] % 16:
        raise ArgumentError(f"{op}: argument 'x': {x.shape[1]} columns is not a multiple of 16; "
                            "pass pad_16x=True to pad")


def quantize_nvfp4(x, per_tensor_scale, epsilon=0.0, pad_16x=False, hi_first=True):
    """(qx uint8 [R, C/2], block scales float8_e4m3fn swizzled): NVFP4 with 16-element blocks.

    R, C are x's shape, each rounded up to 16 with zero padding when pad_16x.
    ``epsilon`` is accepted for compatibility and ignored, as by every comfy_kitchen backend.
    """
    _checked(check_quantize_nvfp4, x, per_tensor_scale, epsilon, pad_16x, hi_first)
    return _quantize_nvfp4("quantize_nvfp4", x, per_tensor_scale, pad_16x, hi_first, 0)


def _quantize_nvfp4(op: str, x, per_tensor_scale, pad_16x, hi_first, group: int):
    """The NVFP4 kernel on checked arguments; group > 0 rotates each group of columns first."""
    rows, cols = x.shape
    out_rows, out_cols = (_round_up(rows, _NVFP4_BLOCK), _round_up(cols, _NVFP4_BLOCK)) if pad_16x else (rows, cols)
    xc = x.contiguous()
    qx = torch.empty(size=(out_rows, out_cols // 2), dtype=torch.uint8, device=x.device)
    # The kernels write the scale buffer's padding too (scale 0): no memset launch.
    scales = torch.empty(size=_scale_shape(out_rows, out_cols), dtype=torch.uint8, device=x.device)
    pts = _per_tensor_scale(per_tensor_scale, x.device)
    _run("quantize_nvfp4", op, x.device, (xc, pts, qx, scales), (int(bool(hi_first)), group))
    return qx, scales.view(torch.float8_e4m3fn)


def check_dequantize_nvfp4(qx, per_tensor_scale=None, block_scales=None, output_type=torch.bfloat16,
                           hi_first=True):
    op = "dequantize_nvfp4"
    check.tensor(op, "qx", qx, (torch.uint8,), ndim=2, empty=True)
    check.rows_of(op, "qx", qx)
    if qx.shape[0] == 0:  # as eager, which reshapes the values to [rows, -1]
        raise ArgumentError(f"{op}: argument 'qx': 0 rows (shape {list(qx.shape)}): nothing to dequantize")
    check.boolean(op, "hi_first", hi_first)
    if block_scales is None:
        raise ArgumentTypeError(f"{op}: argument 'block_scales' is required")
    check.tensor(op, "block_scales", block_scales, (torch.float8_e4m3fn, torch.uint8), empty=qx.numel() == 0)
    check.same_device(op, qx=qx, block_scales=block_scales)
    _check_per_tensor_scale(op, per_tensor_scale, qx=qx)
    if output_type not in check.FLOAT_DTYPES:
        raise ArgumentTypeError(f"{op}: argument 'output_type': expected float32, float16 or bfloat16, "
                                f"got {output_type}")
    rows, cols = qx.shape[0], 2 * qx.shape[1]
    if cols % 16:
        raise ArgumentError(f"{op}: argument 'qx': {qx.shape[1]} packed columns hold {cols} values, "
                            "not a multiple of 16")
    want = _scale_shape(rows, cols)
    if block_scales.numel() != want[0] * want[1]:
        raise ArgumentError(f"{op}: argument 'block_scales': expected {want[0] * want[1]} elements "
                            f"(swizzled {list(want)}), got shape {list(block_scales.shape)}")


def dequantize_nvfp4(qx, per_tensor_scale, block_scales, output_type=torch.bfloat16, hi_first=True):
    """NVFP4 codes and swizzled block scales back to values [R, 2 * qx.shape[1]] of output_type."""
    op = "dequantize_nvfp4"
    _checked(check_dequantize_nvfp4, qx, per_tensor_scale, block_scales, output_type, hi_first)
    rows, cols = qx.shape[0], 2 * qx.shape[1]
    scales = block_scales.contiguous().view(torch.uint8).reshape(_scale_shape(rows, cols))
    out = torch.empty(size=(rows, cols), dtype=output_type, device=qx.device)
    pts = _per_tensor_scale(per_tensor_scale, qx.device)
    _run("dequantize_nvfp4", op, qx.device, (qx.contiguous(), pts, scales, out), (int(bool(hi_first)),))
    return out


# ---- linear: scaled_mm_nvfp4 (the int8 linear ops: linear.py, imported at the top) -------------

def check_scaled_mm_nvfp4(a, b, tensor_scale_a, tensor_scale_b, block_scale_a, block_scale_b, bias=None,
                          out_dtype=None, alpha=None):
    op = "scaled_mm_nvfp4"
    check.tensor(op, "a", a, (torch.uint8,), ndim=2)
    check.tensor(op, "b", b, (torch.uint8,), ndim=2)
    check.rows_of(op, "a", a)
    check.rows_of(op, "b", b)
    if a.shape[1] != b.shape[1]:
        raise ArgumentError(f"{op}: argument 'b': {b.shape[1]} packed columns, a has {a.shape[1]}")
    k = 2 * a.shape[1]
    if k % 16:
        raise ArgumentError(f"{op}: argument 'a': {a.shape[1]} packed columns hold {k} values, not a multiple of 16")
    for name, value in (("tensor_scale_a", tensor_scale_a), ("tensor_scale_b", tensor_scale_b), ("alpha", alpha)):
        if value is None and name == "alpha":
            continue
        check.tensor(op, name, value, (torch.float32,))
        if value.numel() != 1:
            raise ArgumentError(f"{op}: argument '{name}': expected one element, got shape {list(value.shape)}")
    for name, value, rows in (("block_scale_a", block_scale_a, a.shape[0]), ("block_scale_b", block_scale_b,
                                                                               b.shape[0])):
        check.tensor(op, name, value, (torch.float8_e4m3fn, torch.uint8))
        want = _scale_shape(rows, k)
        if value.numel() != want[0] * want[1]:
            raise ArgumentError(f"{op}: argument '{name}': expected {want[0] * want[1]} elements (swizzled "
                                f"{list(want)}), got shape {list(value.shape)}")
    if bias is not None:
        check.tensor(op, "bias", bias, check.FLOAT_DTYPES)
        if bias.numel() != b.shape[0]:
            raise ArgumentError(f"{op}: argument 'bias': expected {b.shape[0]} values, got shape {list(bias.shape)}")
    if out_dtype is not None and out_dtype not in check.FLOAT_DTYPES:
        raise ArgumentTypeError(f"{op}: argument 'out_dtype': expected float32, float16 or bfloat16, "
                                f"got {out_dtype}")
    check.same_device(op, a=a, b=b, tensor_scale_a=tensor_scale_a, tensor_scale_b=tensor_scale_b,
                      block_scale_a=block_scale_a, block_scale_b=block_scale_b, bias=bias, alpha=alpha)


def _cublaslt_fp4(device: torch.device, out_dtype: torch.dtype, n: int, k: int) -> bool:
    """Whether cuBLASLt's block-scaled FP4 GEMM takes the call: compute capability 10.0+ and the
    shapes and output types comfy_kitchen's cuda backend passes it (k % 32, n % 8, 16-bit out).
    The emulated device runs its C reference of that GEMM for every shape."""
    cc = gpu_compute_capability(device)
    if cc is None:
        return KERNELS.get() is not _C
    return cc >= (10, 0) and k % 32 == 0 and n % 8 == 0 and out_dtype in (torch.float16, torch.bfloat16)


def scaled_mm_nvfp4(a, b, tensor_scale_a, tensor_scale_b, block_scale_a, block_scale_b, bias=None,
                    out_dtype=None, alpha=None):
    """out[M, N] = alpha * (dec(a) @ dec(b)^T) + bias, alpha = tensor_scale_a * tensor_scale_b unless
    given, out_dtype None: bfloat16.  cuBLASLt's block-scaled FP4 GEMM on compute capability 10.0+;
    elsewhere each operand is dequantized exactly (code x block scale is exact in float32) and
    multiplied in float32, alpha and the bias applied in float32, rounded once to out_dtype."""
    op = "scaled_mm_nvfp4"
    _checked(check_scaled_mm_nvfp4, a, b, tensor_scale_a, tensor_scale_b, block_scale_a, block_scale_b, bias, out_dtype,
                          alpha)
    out_dtype = torch.bfloat16 if out_dtype is None else out_dtype
    device = a.device
    m, n, k = a.shape[0], b.shape[0], 2 * a.shape[1]
    alpha = (tensor_scale_a * tensor_scale_b if alpha is None else alpha).reshape(1)
    bias_out = None if bias is None else bias.to(out_dtype).reshape(-1).contiguous()
    if _gpu_path(device) and _cublaslt_fp4(device, out_dtype, n, k):
        alpha_beta = torch.cat([alpha, torch.zeros(1, dtype=torch.float32, device=device)])
        scale_a = block_scale_a.contiguous().view(torch.uint8).reshape(_scale_shape(m, k))
        scale_b = block_scale_b.contiguous().view(torch.uint8).reshape(_scale_shape(n, k))
        out = torch.empty(size=(m, n), dtype=out_dtype, device=device)
        if device.type == "cuda":
            _blas_search_dirs()
        _run("scaled_mm_nvfp4", op, device, (a.contiguous(), b.contiguous(), scale_a, scale_b, alpha_beta, bias_out, out,
                                             gemm_workspace(device)), ())
        return out
    one = torch.ones(1, dtype=torch.float32, device=device)
    y = dequantize_nvfp4(a, one, block_scale_a, torch.float32) @ dequantize_nvfp4(b, one, block_scale_b,
                                                                                  torch.float32).T
    y = y * alpha
    if bias_out is not None:
        y = y + bias_out.to(torch.float32)
    return y.to(out_dtype)
# ---- NVFP4 with the ConvRot rotation: quantize_and_rotate_nvfp4, nvfp4_linear ---------------
# Ops of comfy_kitchen_c only (no comfy_kitchen backend has them), so not registered there.

NVFP4_ROTATION_GROUPS = _C.NVFP4_ROTATION_GROUPS  # (16, 64, 256)
NVFP4_RANGE = _C.E4M3_MAX * _C.E2M1_MAX  # largest e4m3 block scale times largest e2m1 value: 448 * 6


def _check_nvfp4_group(op: str, name: str, group, k: int) -> None:
    check.integer(op, name, group)
    if group not in NVFP4_ROTATION_GROUPS:
        raise ArgumentError(f"{op}: argument '{name}': {group} is not "
                            f"{', '.join(map(str, NVFP4_ROTATION_GROUPS[:-1]))} or {NVFP4_ROTATION_GROUPS[-1]}")
    check.group_size(op, group, k, name)


def check_quantize_and_rotate_nvfp4(x, per_tensor_scale=None, group_size=16, pad_16x=False, hi_first=True):
    op = "quantize_and_rotate_nvfp4"
    _check_nvfp4_input(op, x)
    _check_per_tensor_scale(op, per_tensor_scale, x=x)
    _check_flags(op, pad_16x, hi_first)
    _check_nvfp4_group(op, "group_size", group_size, x.shape[1])


def quantize_and_rotate_nvfp4(x, per_tensor_scale, group_size=16, pad_16x=False, hi_first=True):
    """quantize_nvfp4 of x with each group of ``group_size`` columns rotated by the regular
    Hadamard matrix first (ConvRot's), fused: x is read once.

    Bit for bit ``quantize_nvfp4(rotate_int8_convrot_weight(x, group_size), per_tensor_scale,
    0.0, pad_16x, hi_first)``: as in the int8 ConvRot ops, rotated values are rounded to
    x's dtype before the block scales are taken.  ``group_size`` is 16 (the default: one
    NVFP4 block, so each block's values are evened out under the block's own scale), 64 or
    256, and must divide x's columns, so ``pad_16x`` pads rows only.  A rotated value can
    exceed amax(|x|) by up to sqrt(group_size), so ``per_tensor_scale`` should come from the
    rotated values, or be amax(|x|) * sqrt(group_size) / (448 * 6), which bounds them.
    """
    op = "quantize_and_rotate_nvfp4"
    _checked(check_quantize_and_rotate_nvfp4, x, per_tensor_scale, group_size, pad_16x, hi_first)
    return _quantize_nvfp4(op, x, per_tensor_scale, pad_16x, hi_first, group_size)


def check_nvfp4_linear(x, weight, weight_tensor_scale=None, weight_block_scales=None, bias=None, out_dtype=None,
                       convrot=False, convrot_groupsize=16):
    op = "nvfp4_linear"
    _, k = check.rows_of(op, "x", check.tensor(op, "x", x, check.FLOAT_DTYPES, min_ndim=1))
    check.tensor(op, "weight", weight, (torch.uint8,), ndim=2)
    check.same_device(op, x=x, weight=weight)
    n, packed = weight.shape
    _check_per_tensor_scale(op, weight_tensor_scale, "weight_tensor_scale", x=x)
    if weight_block_scales is None:
        raise ArgumentTypeError(f"{op}: argument 'weight_block_scales' is required")
    check.tensor(op, "weight_block_scales", weight_block_scales, (torch.float8_e4m3fn, torch.uint8))
    check.same_device(op, x=x, weight_block_scales=weight_block_scales)
    want = _scale_shape(n, 2 * packed)
    if weight_block_scales.numel() != want[0] * want[1]:
        raise ArgumentError(f"{op}: argument 'weight_block_scales': expected {want[0] * want[1]} elements "
                            f"(swizzled {list(want)}), got shape {list(weight_block_scales.shape)}")
    if not isinstance(convrot, bool):
        raise ArgumentTypeError(f"{op}: argument 'convrot': expected a bool, got {type(convrot).__name__}")
    if convrot:
        _check_nvfp4_group(op, "convrot_groupsize", convrot_groupsize, k)
    if 2 * packed != _round_up(k, 16):
        raise ArgumentError(f"{op}: argument 'weight': {packed} packed columns hold {2 * packed} values, but x "
                            f"has {k} features ({_round_up(k, 16)} padded to 16)")
    if bias is not None:
        check.tensor(op, "bias", bias, check.FLOAT_DTYPES, ndim=1)
        check.same_device(op, x=x, bias=bias)
        if bias.shape[0] != n:
            raise ArgumentError(f"{op}: argument 'bias': expected {n} elements (weight rows), got {bias.shape[0]}")
    if out_dtype is not None and out_dtype not in check.FLOAT_DTYPES:
        raise ArgumentTypeError(f"{op}: argument 'out_dtype': expected None, float32, float16 or bfloat16, "
                                f"got {out_dtype}")


def _activation_scale(x2: torch.Tensor, group: int) -> torch.Tensor:
    """amax(|x|) / (448 * 6), times sqrt(group) when rotated (the most a rotated value can
    grow), as a one-element float32 tensor computed on x's device without a host sync.  At
    least float32's smallest normal, so an all-zero x quantizes to zero codes and scales."""
    scale = x2.abs().amax().float() / NVFP4_RANGE
    if group:
        # after the division (the fuzzer found amax * 16 overflowing float32 for bfloat16 inputs
        # near their largest value): 4, 8 or 16, a power of 2, so the product is exact either way
        scale = scale * float(group) ** 0.5
    return scale.clamp_min(torch.finfo(torch.float32).tiny).reshape(1)


def nvfp4_linear(x, weight, weight_tensor_scale, weight_block_scales, bias=None, out_dtype=None, convrot=False,
                 convrot_groupsize=16):
    """x @ W.T (+ bias) with the NVFP4 weight W (packed uint8 [N, K/2], hi_first, its swizzled
    block scales and per-tensor scale, as quantize_nvfp4 makes them) and x [..., K]
    quantized to NVFP4 on the fly -> [..., N] in out_dtype (default x.dtype).

    x's per-tensor scale is amax(|x|) / (448 * 6) (times sqrt(convrot_groupsize) with
    convrot), computed on the device.  Its rows, and its columns when K is not a multiple
    of 16 (the weight then comes from quantize_nvfp4 with pad_16x), are padded to 16.  With
    ``convrot`` the weight must come from quantize_and_rotate_nvfp4 with ``convrot_groupsize``
    and x is rotated the same way: H is orthogonal and symmetric, so (x H)(W H)^T = x W^T.
    """
    op = "nvfp4_linear"
    _checked(check_nvfp4_linear, x, weight, weight_tensor_scale, weight_block_scales, bias, out_dtype, convrot,
                       convrot_groupsize)
    group = convrot_groupsize if convrot else 0
    x2 = x.reshape(-1, x.shape[-1])
    pts = _activation_scale(x2, group)
    qa, bsa = _quantize_nvfp4(op, x2, pts, True, True, group)
    out = scaled_mm_nvfp4(qa, weight, pts, _per_tensor_scale(weight_tensor_scale, x.device), bsa,
                          weight_block_scales, bias, x.dtype if out_dtype is None else out_dtype)
    return out[: x2.shape[0]].reshape(*x.shape[:-1], weight.shape[0])
