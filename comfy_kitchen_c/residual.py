# SPDX-License-Identifier: Apache-2.0
"""rms_gated_residual of backend "c": ``residual + gate * rms_norm(activation, norm_weight, eps)``
as comfy_kitchen's eager backend computes it (each of its three steps rounded to its result's
dtype: csrc/math/residual.h), in one pass over the rows (the C op rms_gated_residual,
csrc/ops/residual.c).  gate and residual may broadcast over a block of the activation's leading
dims (a gate per batch [B, 1, D], per position, one for all); other broadcasts, and results larger
than the activation, are refused (the registry then gives the call to eager).  Re-exported by
``comfy_kitchen_c.ops``."""
from __future__ import annotations

import numbers
import struct

import torch

from . import _checks as check
from ._C import ArgumentError, ArgumentTypeError
from ._call import _run
from ._proved import checked as _checked

OP = "rms_gated_residual"


def _rows_of_block(name: str, t: torch.Tensor, act: torch.Tensor) -> tuple[int, int]:
    """(div, mod) such that t's row for the activation's row r is (r // div) % mod: t's leading
    dims (after prepended ones) are the activation's over one block of dims and 1 elsewhere."""
    lead = act.shape[:-1]
    tl = (1,) * (len(lead) - (t.dim() - 1)) + tuple(t.shape[:-1])
    if t.dim() - 1 > len(lead) or t.shape[-1] != act.shape[-1]:
        raise ArgumentError(f"{OP}: argument '{name}': shape {list(t.shape)} is not served beside 'activation' "
                            f"of shape {list(act.shape)} (leading dims of 1 or the activation's, last {act.shape[-1]})")
    kept = [i for i, (a, b) in enumerate(zip(tl, lead)) if a == b and a != 1]
    if any(a not in (1, b) for a, b in zip(tl, lead)) or (kept and kept != list(range(kept[0], kept[-1] + 1))):
        raise ArgumentError(f"{OP}: argument '{name}': shape {list(t.shape)} broadcasts to 'activation' of shape "
                            f"{list(act.shape)} in a way not served (its leading dims: one block of the activation's)")
    if not kept:
        return 1, 1
    mod, div = 1, 1
    for n in lead[kept[0]:kept[-1] + 1]:
        mod *= n
    for n in lead[kept[-1] + 1:]:
        div *= n
    return div, mod


def check_rms_gated_residual(activation, norm_weight, residual, gate, eps=1.0e-5):
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise ArgumentTypeError(f"{OP}: argument 'eps': expected a float, got {type(eps).__name__}")
    check.tensor(OP, "activation", activation, check.FLOAT_DTYPES, min_ndim=1, empty=True)
    check.tensor(OP, "norm_weight", norm_weight, check.FLOAT_DTYPES, ndim=1)
    check.tensor(OP, "residual", residual, check.FLOAT_DTYPES, min_ndim=1, empty=True)
    check.tensor(OP, "gate", gate, check.FLOAT_DTYPES, min_ndim=1, empty=True)
    check.same_device(OP, activation=activation, norm_weight=norm_weight, residual=residual, gate=gate)
    check.rows_of(OP, "activation", activation)
    d = activation.shape[-1]
    if norm_weight.shape[0] != d:
        raise ArgumentError(f"{OP}: argument 'norm_weight': {norm_weight.shape[0]} values for 'activation' of last "
                            f"dimension {d}")
    if d == 0:
        raise ArgumentError(f"{OP}: argument 'activation': rows of no values (shape {list(activation.shape)})")
    if torch.is_grad_enabled() and any(t.requires_grad for t in (activation, norm_weight, residual, gate)):
        raise ArgumentError(f"{OP}: argument 'activation': requires grad (backend 'c' is inference only)")
    g = _rows_of_block("gate", gate, activation)
    r = _rows_of_block("residual", residual, activation)
    out_dtype = torch.promote_types(residual.dtype, torch.promote_types(gate.dtype, activation.dtype))
    return g, r, out_dtype, struct.unpack("<I", struct.pack("<f", float(eps)))[0]


def rms_gated_residual(activation, norm_weight, residual, gate, eps=1.0e-5):
    """residual + gate * rms_norm(activation, (D,), norm_weight, eps), in the promoted dtype."""
    (gd, gm), (rd, rm), out_dtype, bits = _checked(check_rms_gated_residual, activation, norm_weight, residual,
                                                   gate, eps)
    act = activation.contiguous()
    out = torch.empty(size=act.shape, dtype=out_dtype, device=act.device)
    _run(OP, OP, act.device, (act, norm_weight.contiguous(), residual.contiguous(), gate.contiguous(), out),
         (gd, gm, rd, rm, bits))
    return out
