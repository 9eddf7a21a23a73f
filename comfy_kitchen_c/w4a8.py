# SPDX-License-Identifier: Apache-2.0
"""The W4A8 / W6A8 ops of backend "c": dequantize_w4a8_int8_weight, w4a8_int8_linear and
w4a8_packed_linear, with comfy_kitchen 0.2.40's signatures.

One C op (csrc/ops/w4a8.c) decodes the weight codes to eager's int8 grid
(round(clamp(level * s_rel)), csrc/math/w4a8.h) or on to the float weight; the rest is the
int8 family's: the dequantizer rotates with rotate_int8_convrot_weight's C op, the linears run
comfy_kitchen_c's int8_linear on the decoded int8 weight, as eager runs its int8_linear.  So
the parity of each op is that of the int8 op it reuses (docs/parity.md).

On the CPU the linears decode the int8 weight once per call (N x K bytes, a quarter of eager's
own int32 code tensor) and hand it to int8_linear.  On CUDA (and on the emulated device, which
runs the CUDA path) a decoded copy of the weight per call is what the format exists to avoid:
the C op w4a8_linear decodes a part of the weight's rows at a time into int8_linear's scratch
(linear.W4A8_DECODE_BYTES) and multiplies each part at once, int8_linear's quantizer, GEMM and
epilogue around it, so the bits are int8_linear's on the decoded weight.  The correction form
(eager's float F.linear on the dequantized weight) is torch's F.linear on our dequantized
weight; on CUDA a part of the rows at a time, as the int8 path.  Re-exported by
``comfy_kitchen_c.ops``.
"""
from __future__ import annotations

import torch

from . import _checks as check, linear
from ._C import ArgumentError, KitchenError
from ._call import _gpu_path, _run
from ._proved import checked as _checked
from .linear import _PAIRED, ACT_RMS_NORM, _eps, _linear, check_int8_linear

_SCALE_DTYPES = (torch.float32, torch.float8_e4m3fn)
_MMA_N, _MMA_K = 16, 256  # unpack_w4a8_mma_weight's tiles: N % 16, K % 256


def _group(op: str, group_size) -> int:
    check.integer(op, "group_size", group_size)
    if group_size < 4 or (16 % group_size != 0 and group_size % 16 != 0):
        raise ArgumentError(f"{op}: argument 'group_size': {group_size} must be >= 4 and divide 16 or be a "
                            "multiple of 16")
    return group_size


def _bits(op: str, cols: int, k: int, group_size: int) -> int:
    """The code width of rows of `cols` bytes holding K codes (eager's _w4a8_geometry)."""
    bits = (cols * 8) // k if k > 0 else 0
    if k <= 0 or bits not in (4, 6) or k * bits != cols * 8:
        raise ArgumentError(f"{op}: argument 'qdata': packed row width {cols} does not match K={k} at 4 or 6 bits")
    if bits == 6 and (k % 32 or group_size < 16 or group_size % 16):
        raise ArgumentError(f"{op}: argument 'group_size': 6-bit storage needs K divisible by 32 and group_size a "
                            f"multiple of 16, got K={k}, group_size={group_size}")
    return bits


def _shape(op: str, name: str, value, shape: tuple) -> None:
    if tuple(value.shape) != shape:
        raise ArgumentError(f"{op}: argument '{name}': expected shape {list(shape)}, got {list(value.shape)}")


def _check_storage(op: str, qdata, s_rel, s_channel, codebook, correction, group_size, convrot_groupsize):
    """eager's validate_w4a8_operands, with the types its constraints declare: (n, k, bits)."""
    check.tensor(op, "qdata", qdata, (torch.int8,), ndim=2, empty=True)
    check.tensor(op, "s_rel", s_rel, _SCALE_DTYPES, ndim=2, empty=True)
    check.tensor(op, "s_channel", s_channel, (torch.float32,), ndim=1, empty=True)
    group = _group(op, group_size)
    n, cols = check.rows_of(op, "qdata", qdata)
    k = s_rel.shape[1] * group
    bits = _bits(op, cols, k, group)
    if bits == 6 and (codebook is not None or correction is not None):
        raise ArgumentError(f"{op}: argument '{'codebook' if codebook is not None else 'correction'}': 6-bit "
                            "storage is uniform and symmetric: no codebook or correction")
    check.group_size(op, convrot_groupsize, k, name="convrot_groupsize")
    if k % 16:
        raise ArgumentError(f"{op}: argument 's_rel': K={k} is not divisible by 16")
    _shape(op, "s_rel", s_rel, (n, k // group))
    _shape(op, "s_channel", s_channel, (n,))
    if codebook is not None:
        check.tensor(op, "codebook", codebook, (torch.float32,), ndim=1)
        _shape(op, "codebook", codebook, (16,))
    if correction is not None:
        check.tensor(op, "correction", correction, check.FLOAT_DTYPES, ndim=2, empty=True)
        _shape(op, "correction", correction, (k // group, n))
    check.same_device(op, qdata=qdata, s_rel=s_rel, s_channel=s_channel, codebook=codebook, correction=correction)
    return n, k, bits


def _srel(s_rel):
    """s_rel as the C ops take it (e4m3 scales as their bytes), and whether it is e4m3."""
    if s_rel is None:
        return None, False
    e4m3 = s_rel.dtype == torch.float8_e4m3fn
    return (s_rel.contiguous().view(torch.uint8) if e4m3 else s_rel.contiguous()), e4m3


def _decode(op: str, qdata, s_rel, codebook, s_channel, correction, out, group: int, bits: int, packed: bool):
    """The C op: codes -> int8 grid (out int8) or -> the float weight before rotation."""
    srel, e4m3 = _srel(s_rel)
    _run("dequantize_w4a8_int8_weight", op, out.device,
         (qdata.contiguous(), srel, None if codebook is None else codebook.contiguous(),
          None if s_channel is None else s_channel.contiguous(),
          None if correction is None else correction.contiguous(), out),
         (group, bits, int(packed), int(e4m3)))
    return out


# ---- dequantize_w4a8_int8_weight -----------------------------------------------------------

def check_dequantize_w4a8_int8_weight(qdata, s_rel, s_channel, codebook=None, correction=None, group_size=16,
                                      convrot_groupsize=256, output_dtype=torch.bfloat16):
    op = "dequantize_w4a8_int8_weight"
    check.result_dtype(op, "output_dtype", output_dtype)
    return _check_storage(op, qdata, s_rel, s_channel, codebook, correction, group_size, convrot_groupsize)


def dequantize_w4a8_int8_weight(qdata, s_rel, s_channel, codebook=None, correction=None, group_size=16,
                                convrot_groupsize=256, output_dtype=torch.bfloat16):
    """The physical [N, K] weight: codes -> int8 grid -> * s_channel (+ correction) in
    output_dtype (one C op), then rotated back group-wise in output_dtype (the C op of
    rotate_int8_convrot_weight), as eager's steps; None: float32, as eager's .to(None)."""
    op = "dequantize_w4a8_int8_weight"
    n, k, bits = _checked(check_dequantize_w4a8_int8_weight, qdata, s_rel, s_channel, codebook, correction,
                          group_size, convrot_groupsize, output_dtype)
    output_dtype = check.result_dtype(op, "output_dtype", output_dtype)
    return _dequantize(op, qdata, s_rel, s_channel, codebook, correction, group_size, convrot_groupsize,
                       output_dtype, n, k, bits)


def _dequantize(op: str, qdata, s_rel, s_channel, codebook, correction, group: int, convrot: int, dtype, n: int,
                k: int, bits: int):
    """dequantize_w4a8_int8_weight on checked arguments: the decode (C), then the rotation (C)."""
    out = torch.empty(size=(n, k), dtype=dtype, device=qdata.device)
    if n == 0:
        return out
    _decode(op, qdata, s_rel, codebook, s_channel, correction, out, group, bits, False)
    rotated = torch.empty_like(out)
    _run("rotate_int8_convrot_weight", op, out.device, (out, rotated), (convrot,))
    return rotated


# ---- the linears ----------------------------------------------------------------------------

def _check_linear_rest(op: str, x, s_channel, codebook, correction, bias, convrot_groupsize, out_dtype, input_act,
                       input_act_weight, input_act_eps, residual, residual_scale, k: int, n: int) -> int:
    """What the linears add to the storage: the device, the correction form's limits and
    int8_linear's own check of x, bias, activation and residual on a stand-in weight of the
    decoded shape (an expanded scalar: no memory).  Returns the activation code."""
    if correction is not None and (input_act is not None or residual is not None):
        raise ArgumentError(f"{op}: argument 'correction': served without input_act and residual only (eager's "
                            "float F.linear path)")
    if n == 0:  # int8_linear's check refuses an empty weight: refused here, named as this op's argument
        raise ArgumentError(f"{op}: argument 'qdata': empty weight (0 output features)")
    paired = isinstance(input_act, str) and input_act in _PAIRED
    k_x = x.shape[-1] // 2 if paired else x.shape[-1]
    if k_x != k:
        raise ArgumentError(f"{op}: argument 'x': input K={k_x}{' (activated)' if paired else ''} does not match "
                            f"qdata K={k}")
    stand_in = torch.empty(size=(), dtype=torch.int8, device=s_channel.device).expand(n, k)
    try:
        _, _, act = check_int8_linear(x, stand_in, s_channel, bias, out_dtype, True, convrot_groupsize, input_act,
                                      input_act_weight, input_act_eps, residual, residual_scale)
    except KitchenError as exc:  # int8_linear's words, under this op's name
        raise type(exc)(str(exc).replace("int8_linear:", f"{op}:", 1)) from None
    return act


def check_w4a8_int8_linear(x, qdata, s_rel, s_channel, codebook=None, correction=None, bias=None, group_size=16,
                           convrot_groupsize=256, out_dtype=torch.bfloat16, input_act=None, input_act_weight=None,
                           input_act_eps=0.0, residual=None, residual_scale=None):
    op = "w4a8_int8_linear"
    check.tensor(op, "x", x, check.FLOAT_DTYPES, min_ndim=1)
    n, k, bits = _check_storage(op, qdata, s_rel, s_channel, codebook, correction, group_size, convrot_groupsize)
    act = _check_linear_rest(op, x, s_channel, codebook, correction, bias, convrot_groupsize, out_dtype, input_act,
                             input_act_weight, input_act_eps, residual, residual_scale, k, n)
    return n, k, bits, act


def _linear_tail(op, x, weight, s_channel, bias, convrot_groupsize, out_dtype, act, input_act_weight,
                 input_act_eps, residual, residual_scale, k: int, n: int, codes=None):
    """eager's int8_linear(act(x), weight8, s_channel, convrot=True) and its residual form:
    comfy_kitchen_c's int8_linear (its body, linear._linear: the arguments are checked) does
    both steps, the activation fused into its quantizer, the residual into its epilogue.
    weight: the decoded int8 weight (CPU), or with codes the codes themselves (GPU)."""
    rms = act == ACT_RMS_NORM
    return _linear(op, x, weight, s_channel, bias, out_dtype, convrot_groupsize, act, k, n,
                   act_weight=input_act_weight if rms else None,
                   eps=_eps(op, "input_act_eps", input_act_eps) if rms else 0.0,
                   residual=residual, residual_scale=residual_scale, codes=codes)


def _codes(qdata, s_rel, codebook, group: int, bits: int, packed: bool):
    """The codes as the C op w4a8_linear takes them: (qdata, (s_rel, codebook, its ints))."""
    srel, e4m3 = _srel(s_rel)
    return qdata.contiguous(), (srel, None if codebook is None else codebook.contiguous(),
                                (group, bits, int(packed), int(e4m3)))


def _correction_linear(op: str, x, qdata, s_rel, s_channel, codebook, correction, bias, group: int, convrot: int,
                       out_dtype, n: int, k: int, bits: int):
    """Eager's float path for a weight with a correction (asymmetric codes): F.linear on the
    dequantized weight in x's dtype, then out_dtype.  On the CPU the whole weight is dequantized,
    as eager does, so the product is torch's on our weight.  On CUDA a part of the rows at a time
    (linear.W4A8_DECODE_BYTES of x's dtype, as the int8 path's decoded parts), each part's F.linear
    written into its columns of the output: a call never holds the whole float weight (N x K in
    x's dtype, 2-4x the codes' bytes times 4), only a part, still in L2 when its GEMM reads it.
    Each output is the same dot product of K terms either way; only the GEMM's summation order
    may depend on the part's width (the bound in docs/parity.md)."""
    fl = torch.nn.functional.linear
    if not _gpu_path(x.device):
        weight = _dequantize(op, qdata, s_rel, s_channel, codebook, correction, group, convrot, x.dtype, n, k, bits)
        return fl(x, weight, bias).to(out_dtype)
    rows = max(1, linear.W4A8_DECODE_BYTES // (k * x.element_size()))
    y = torch.empty(size=x.shape[:-1] + (n,), dtype=x.dtype, device=x.device)
    for n0 in range(0, n, rows):
        n1 = min(n, n0 + rows)
        part = _dequantize(op, qdata[n0:n1], None if s_rel is None else s_rel[n0:n1], s_channel[n0:n1], codebook,
                           correction[:, n0:n1], group, convrot, x.dtype, n1 - n0, k, bits)
        y[..., n0:n1] = fl(x, part, None if bias is None else bias[n0:n1])
    return y.to(out_dtype)


def w4a8_int8_linear(x, qdata, s_rel, s_channel, codebook=None, correction=None, bias=None, group_size=16,
                     convrot_groupsize=256, out_dtype=torch.bfloat16, input_act=None, input_act_weight=None,
                     input_act_eps=0.0, residual=None, residual_scale=None):
    """x @ W.T + bias for a W4A8/W6A8 weight: the codes decoded to the int8 grid (C), then
    int8_linear with the per-channel s_channel and ConvRot, as eager.  With a correction,
    eager's float path: the dequantized weight (ours, in x's dtype) through torch's F.linear."""
    op = "w4a8_int8_linear"
    n, k, bits, act = _checked(check_w4a8_int8_linear, x, qdata, s_rel, s_channel, codebook, correction, bias, group_size,
                          convrot_groupsize, out_dtype, input_act, input_act_weight, input_act_eps, residual,
                          residual_scale)
    if correction is not None:
        return _correction_linear(op, x, qdata, s_rel, s_channel, codebook, correction, bias, group_size,
                                  convrot_groupsize, out_dtype, n, k, bits)
    if _gpu_path(x.device):
        q, codes = _codes(qdata, s_rel, codebook, group_size, bits, False)
        return _linear_tail(op, x, q, s_channel, bias, convrot_groupsize, out_dtype, act, input_act_weight,
                            input_act_eps, residual, residual_scale, k, n, codes)
    weight8 = torch.empty(size=(n, k), dtype=torch.int8, device=qdata.device)
    _decode(op, qdata, s_rel, codebook, None, None, weight8, group_size, bits, False)
    return _linear_tail(op, x, weight8, s_channel, bias, convrot_groupsize, out_dtype, act, input_act_weight,
                        input_act_eps, residual, residual_scale, k, n)


def check_w4a8_packed_linear(x, qdata, s_rel, s_channel, codebook=None, correction=None, bias=None, group_size=16,
                             convrot_groupsize=256, out_dtype=torch.bfloat16, input_act=None, input_act_weight=None,
                             input_act_eps=0.0, residual=None, residual_scale=None):
    """The MMA-packed weight (unpack_w4a8_mma_weight's records: N % 16, K % 256, group 16, e4m3
    scales in the records; s_rel empty): (n, k, bits)."""
    op = "w4a8_packed_linear"
    check.tensor(op, "x", x, check.FLOAT_DTYPES, min_ndim=1)
    check.tensor(op, "qdata", qdata, (torch.int8,), ndim=1)
    check.tensor(op, "s_channel", s_channel, (torch.float32,), ndim=1)
    if isinstance(s_rel, torch.Tensor) and s_rel.numel():
        raise ArgumentError(f"{op}: argument 's_rel': the packed records carry the scales; expected an empty "
                            f"tensor, got shape {list(s_rel.shape)}")
    if check.integer(op, "group_size", group_size) != 16:
        raise ArgumentError(f"{op}: argument 'group_size': the packed records hold groups of 16, got {group_size}")
    if correction is not None:
        raise ArgumentError(f"{op}: argument 'correction': packed records are symmetric (no correction)")
    n = s_channel.shape[0]
    k = x.shape[-1] // 2 if input_act in ("swiglu", "situ") else x.shape[-1]
    if n % _MMA_N or k % _MMA_K or not qdata.is_contiguous():
        raise ArgumentError(f"{op}: argument 'qdata': MMA packed weight requires N % 16 == 0 and K % 256 == 0 and "
                            f"a contiguous tensor, got N={n}, K={k}")
    bits = next((b for b in (4, 6) if qdata.numel() == n * k * (512 * b // 8 + 32) // 512), 0)
    if not bits:
        raise ArgumentError(f"{op}: argument 'qdata': {qdata.numel()} bytes are not the records of a 4- or 6-bit "
                            f"[{n}, {k}] weight")
    if codebook is not None:
        if bits == 6:
            raise ArgumentError(f"{op}: argument 'codebook': 6-bit storage is uniform: no codebook")
        check.tensor(op, "codebook", codebook, (torch.float32,), ndim=1)
        _shape(op, "codebook", codebook, (16,))
    check.same_device(op, x=x, qdata=qdata, s_channel=s_channel, codebook=codebook)
    act = _check_linear_rest(op, x, s_channel, codebook, None, bias, convrot_groupsize, out_dtype, input_act,
                             input_act_weight, input_act_eps, residual, residual_scale, k, n)
    return n, k, bits, act


def w4a8_packed_linear(x, qdata, s_rel, s_channel, codebook=None, correction=None, bias=None, group_size=16,
                       convrot_groupsize=256, out_dtype=torch.bfloat16, input_act=None, input_act_weight=None,
                       input_act_eps=0.0, residual=None, residual_scale=None):
    """w4a8_int8_linear on the MMA-packed records, decoded directly (no canonical unpack)."""
    op = "w4a8_packed_linear"
    n, k, bits, act = _checked(check_w4a8_packed_linear, x, qdata, s_rel, s_channel, codebook, correction, bias,
                          group_size, convrot_groupsize, out_dtype, input_act, input_act_weight, input_act_eps,
                          residual, residual_scale)
    if _gpu_path(x.device):
        q, codes = _codes(qdata, None, codebook, 16, bits, True)
        return _linear_tail(op, x, q, s_channel, bias, convrot_groupsize, out_dtype, act, input_act_weight,
                            input_act_eps, residual, residual_scale, k, n, codes)
    weight8 = torch.empty(size=(n, k), dtype=torch.int8, device=qdata.device)
    _decode(op, qdata, None, codebook, None, None, weight8, 16, bits, True)
    return _linear_tail(op, x, weight8, s_channel, bias, convrot_groupsize, out_dtype, act, input_act_weight,
                        input_act_eps, residual, residual_scale, k, n)

