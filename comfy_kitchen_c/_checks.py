# SPDX-License-Identifier: Apache-2.0
"""Argument checks shared by the ops and by the backend's constraint rules.

Every failure raises ``ArgumentError`` (a ValueError) or ``ArgumentTypeError``
(a TypeError) whose message starts with the op and names the argument.
"""
from __future__ import annotations

import torch

from . import _C
from ._C import ArgumentError, ArgumentTypeError

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# From C (csrc/contract/codes.h): rows and row length each stay below 2^31 (C kernels, CUDA
# grids); the group sizes of the Hadamard rotation (powers of 4).
MAX_EXTENT = _C.MAX_EXTENT
HADAMARD_GROUPS = _C.HADAMARD_GROUPS


def _names(dtypes) -> str:
    return ", ".join(str(d).replace("torch.", "") for d in dtypes)


def tensor(op: str, name: str, value, dtypes, ndim: int | None = None, min_ndim: int = 0):
    """A tensor of one of ``dtypes`` with ``ndim`` (or at least ``min_ndim``) dims."""
    if not isinstance(value, torch.Tensor):
        raise ArgumentTypeError(f"{op}: argument '{name}': expected a torch.Tensor, got {type(value).__name__}")
    if value.dtype not in dtypes:
        raise ArgumentTypeError(
            f"{op}: argument '{name}': expected dtype {_names(dtypes)}, got {_names([value.dtype])}")
    if not (value.is_cpu or value.is_cuda):  # a third of the cost of comparing value.device.type
        raise ArgumentTypeError(f"{op}: argument '{name}': unsupported device {value.device} (cpu or cuda)")
    if ndim is not None and value.dim() != ndim:
        raise ArgumentError(f"{op}: argument '{name}': expected {ndim} dimensions, got shape {list(value.shape)}")
    if value.dim() < min_ndim:
        raise ArgumentError(
            f"{op}: argument '{name}': expected at least {min_ndim} dimensions, got shape {list(value.shape)}")
    if value.numel() == 0:
        raise ArgumentError(f"{op}: argument '{name}': empty tensor of shape {list(value.shape)}")
    return value


def rows_of(op: str, name: str, value: torch.Tensor) -> tuple[int, int]:
    """(rows, row length) of a tensor seen as [-1, shape[-1]], within the kernels' limits."""
    k = value.shape[-1] if value.dim() else 1
    rows = value.numel() // k
    if rows > MAX_EXTENT or k > MAX_EXTENT:
        raise ArgumentError(
            f"{op}: argument '{name}': {rows} rows of {k} elements; rows and row length must each be below 2^31")
    return rows, k


def same_device(op: str, **tensors) -> None:
    """All tensors among the arguments (None and numbers are skipped) on one device."""
    first_name, device = None, None
    for n, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            continue
        if device is None:
            first_name, device = n, t.device
        elif t.device != device:
            raise ArgumentTypeError(f"{op}: argument '{n}' is on {t.device} but '{first_name}' is on {device}")


def integer(op: str, name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{op}: argument '{name}': expected an int, got {type(value).__name__}")
    return value


def seed(op: str, value) -> int:
    """stochastic_rounding: None or <= 0 disables it, else it is the seed."""
    if value is None:
        return 0
    return max(integer(op, "stochastic_rounding", value), 0)


def group_size(op: str, group: int, k: int, name: str = "group_size") -> int:
    integer(op, name, group)
    if group not in HADAMARD_GROUPS:
        raise ArgumentError(f"{op}: argument '{name}': {group} is not a power of 4 in "
                            f"[{HADAMARD_GROUPS[0]}, {HADAMARD_GROUPS[-1]}]")
    if k % group:
        raise ArgumentError(f"{op}: argument '{name}': row length {k} is not divisible by group size {group}")
    return group
