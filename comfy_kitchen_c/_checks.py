# SPDX-License-Identifier: Apache-2.0
"""Argument checks shared by the ops and by the backend's constraint rules.

Every failure raises ``ArgumentError`` (a ValueError) or ``ArgumentTypeError``
(a TypeError) whose message starts with the op and names the argument.
"""
from __future__ import annotations

import functools
import numbers
import operator
import os

import torch

from . import _C
from ._C import ArgumentError, ArgumentTypeError

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
# Argument types that are never tensors: skipped by identity (isinstance against torch.Tensor, with
# its subclass check, costs more than a set look-up of the type).
_PLAIN = frozenset({type(None), int, float, bool, str, torch.dtype})
_TENSOR = torch.Tensor
_STRIDED = torch.strided
# comfy_kitchen's output dtype codes (its DTYPE_CODE_TO_DTYPE), from the codes C exports
DTYPE_CODE_TO_DTYPE = {_C.DTYPES[name]: getattr(torch, name) for name in ("float32", "float16", "bfloat16")}
# From C (csrc/contract/codes.h): rows and row length each stay below 2^31 (C kernels, CUDA
# grids); the group sizes of the Hadamard rotation (powers of 4).
MAX_EXTENT = _C.MAX_EXTENT
HADAMARD_GROUPS = _C.HADAMARD_GROUPS


def _names(dtypes) -> str:
    return ", ".join(str(d).replace("torch.", "") for d in dtypes)


def tensor(op: str, name: str, value, dtypes, ndim: int | None = None, min_ndim: int = 0, empty: bool = False):
    """A tensor of one of ``dtypes`` with ``ndim`` (or at least ``min_ndim``) dims; with no
    elements only where ``empty`` (the op's own rules then say which empty shapes it serves).

    Every call of every op runs this once per tensor argument, so the passing case reads each
    attribute once and calls nothing else (strided() inlined): 0.25-0.33 us, where the layered
    form cost 0.42 (benchmarks/results/host_time_per_call.md)."""
    if not isinstance(value, _TENSOR):
        raise ArgumentTypeError(f"{op}: argument '{name}': expected a torch.Tensor, got {type(value).__name__}")
    if value.layout is not _STRIDED:
        strided(op, name, value)
    if value.dtype not in dtypes:
        raise ArgumentTypeError(
            f"{op}: argument '{name}': expected dtype {_names(dtypes)}, got {_names([value.dtype])}")
    if not (value.is_cpu or value.is_cuda):  # a third of the cost of comparing value.device.type
        raise ArgumentTypeError(f"{op}: argument '{name}': unsupported device {value.device} (cpu or cuda)")
    dims = value.dim()
    if ndim is not None and dims != ndim:
        raise ArgumentError(f"{op}: argument '{name}': expected {ndim} dimensions, got shape {list(value.shape)}")
    if dims < min_ndim:
        raise ArgumentError(
            f"{op}: argument '{name}': expected at least {min_ndim} dimensions, got shape {list(value.shape)}")
    if not empty and value.numel() == 0:
        raise ArgumentError(f"{op}: argument '{name}': empty tensor of shape {list(value.shape)}")
    return value


def strided(op: str, name: str, value: torch.Tensor) -> None:
    """A tensor in torch's strided layout: the kernels read strided memory, and torch's own error
    for a sparse, sparse_csr or mkldnn tensor (from .contiguous() or DLPack) names neither."""
    if value.layout is not torch.strided:
        raise ArgumentTypeError(f"{op}: argument '{name}': expected a strided (dense) tensor, got layout "
                                f"{str(value.layout).replace('torch.', '')}; pass {name}.to_dense()")


def rows_of(op: str, name: str, value: torch.Tensor) -> tuple[int, int]:
    """(rows, row length) of a tensor seen as [-1, shape[-1]], within the kernels' limits."""
    shape = value.shape
    k = shape[-1] if shape else 1
    if k:
        rows = value.numel() // k
    else:  # not numel // k, which a row length of 0 would divide by zero
        rows = 1
        for n in shape[:-1]:
            rows *= n
    if rows > MAX_EXTENT or k > MAX_EXTENT:
        raise ArgumentError(
            f"{op}: argument '{name}': {rows} rows of {k} elements; rows and row length must each be below 2^31")
    return rows, k


def same_device(op: str, **tensors) -> None:
    """All tensors among the arguments (None and numbers are skipped) on one device."""
    first_name, device = None, None
    for n, t in tensors.items():
        if type(t) in _PLAIN or not isinstance(t, _TENSOR):
            continue
        if device is None:
            first_name, device = n, t.device
        elif t.device != device:
            raise ArgumentTypeError(f"{op}: argument '{n}' is on {t.device} but '{first_name}' is on {device}")


def integer(op: str, name: str, value) -> int:
    """An integer as Python's operator.index takes it (int, numpy's integer scalars, any type with
    __index__), as a Python int.  Refused: bool and numpy.bool_ (True as a size is a mistake, and
    comfy_kitchen's constraints say int), floats (3.0 included, as range() refuses them) and
    tensors (a one-element integer tensor has __index__, but on CUDA reading it is a host sync)."""
    if isinstance(value, (bool, torch.Tensor)) or type(value).__name__ in ("bool", "bool_"):
        raise ArgumentTypeError(f"{op}: argument '{name}': expected an int, got {type(value).__name__}")
    try:
        return int(operator.index(value))
    except TypeError:
        raise ArgumentTypeError(f"{op}: argument '{name}': expected an int (or an integer scalar such as "
                                f"numpy.int64), got {type(value).__name__}") from None


def result_dtype(op: str, name: str, value) -> torch.dtype:
    """A float result dtype argument; None is float32, as eager's direct call gives it where eager
    computes in float32 and ends with .to(None) (which keeps float32): int8_linear and its
    modulated forms, the W4A8 linears without a correction, dequantize_mxfp8,
    dequantize_convrot_w4a4_weight, dequantize_w4a8_int8_weight."""
    if value is None:
        return torch.float32
    if value not in FLOAT_DTYPES:
        raise ArgumentTypeError(f"{op}: argument '{name}': expected None, float32, float16 or bfloat16, got {value!r}")
    return value


def number(value) -> bool:
    """A real number as a Python int or float takes it: numpy's scalars too (numbers.Real), never
    a bool (nor numpy.bool_, which numbers does not register)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def boolean(op: str, name: str, value) -> bool:
    """A flag: True or False only (comfy_kitchen's constraints say bool; "no" or 2 is a mistake)."""
    if not isinstance(value, bool):
        raise ArgumentTypeError(f"{op}: argument '{name}': expected a bool, got {value!r}")
    return value


MAX_SEED = 2**64 - 1  # torch.Generator.manual_seed's range (the noise eager draws)


def seed(op: str, value) -> int:
    """stochastic_rounding: None or <= 0 disables it, else it is the seed."""
    if value is None:
        return 0
    value = integer(op, "stochastic_rounding", value)
    if value > MAX_SEED:
        raise ArgumentError(f"{op}: argument 'stochastic_rounding': seed {value} is above 2^64 - 1")
    return max(value, 0)


def row_length(op: str, name: str, k: int) -> None:
    """Row-wise quantization of rows of length 0: each row's scale would be the maximum of no
    values.  Eager fails there too (amax of an empty dim); zero rows of any length are fine."""
    if k == 0:
        raise ArgumentError(f"{op}: argument '{name}': rows of length 0 have no scale")


def group_size(op: str, group: int, k: int, name: str = "group_size") -> int:
    group = integer(op, name, group)
    if group not in HADAMARD_GROUPS:
        raise ArgumentError(f"{op}: argument '{name}': {group} is not a power of 4 in "
                            f"[{HADAMARD_GROUPS[0]}, {HADAMARD_GROUPS[-1]}]")
    if k % group:
        raise ArgumentError(f"{op}: argument '{name}': row length {k} is not divisible by group size {group}")
    return group


# ---- copies of non-contiguous inputs ----------------------------------------------------------
# The kernels read contiguous rows, so an op copies a non-contiguous input first.  An expanded
# input (stride 0: torch.randn(1, 3072).expand(1 << 22, 3072) is 12 KiB of memory for 51 GiB of
# values) would be copied whole, and the allocator's error would be all the user sees.  A copy
# larger than the device's whole memory cannot succeed for any backend (eager makes the same copy),
# so it is refused here, before it is tried, with the op, the argument and the sizes; nothing that
# could have run is refused.  The int8 linears serve a broadcast x without the copy (linear.py).

def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):  # Windows: no sysconf
        pass
    try:
        import ctypes

        class _Status(ctypes.Structure):
            _fields_ = [("length", ctypes.c_ulong), ("load", ctypes.c_ulong), ("total", ctypes.c_ulonglong),
                        ("avail", ctypes.c_ulonglong), ("rest", ctypes.c_ulonglong * 5)]
        status = _Status(length=ctypes.sizeof(_Status))
        if ctypes.windll.kernel32.GlobalMemoryStatusEx(ctypes.byref(status)):
            return int(status.total)
    except (AttributeError, OSError):
        pass
    return None


@functools.lru_cache(maxsize=None)
def memory_bound(device: torch.device) -> int:
    """The most bytes one allocation on device can take: its total memory (the host's physical
    memory for CPU tensors, and for the emulated device's), or 2^63 where it cannot be read."""
    if device.type == "cuda":
        try:
            return int(torch.cuda.get_device_properties(device.index or 0).total_memory)
        except (RuntimeError, AssertionError, AttributeError):
            return 2**63
    return _physical_memory() or 2**63


def fits(op: str, name: str, what: str, nbytes: int, device: torch.device) -> None:
    """Refuses an allocation of nbytes for `what` (caused by argument `name`) beyond the device's memory."""
    bound = memory_bound(device)
    if nbytes > bound:
        raise ArgumentError(f"{op}: argument '{name}': {what} would take {nbytes} bytes, more than the memory of "
                            f"{device} ({bound} bytes)")


def _copy_what(value: torch.Tensor) -> str:
    return (f"a non-contiguous tensor of shape {list(value.shape)} (strides {list(value.stride())}) copied "
            "whole to contiguous rows")


def dense(op: str, name: str, value: torch.Tensor) -> torch.Tensor:
    """value as the contiguous tensor the kernels read: itself, or its copy where that fits (fits)."""
    if value.is_contiguous():
        return value
    fits(op, name, _copy_what(value), value.numel() * value.element_size(), value.device)
    return value.contiguous()


# Arguments an op copies only through its own bounded copies (dense, fits; or none at all): left
# out of copies_fit (the op registers them: linear.py).
COPIED_BY_THE_OP: dict[str, tuple[str, ...]] = {}


@functools.lru_cache(maxsize=None)
def _params(check) -> tuple[str, tuple[str, ...]]:
    import inspect
    return check.__name__.removeprefix("check_"), tuple(inspect.signature(check).parameters)


def copies_fit(check, args) -> None:
    """Every non-contiguous tensor among a call's arguments (check's parameters in order) has a copy
    that fits its device (fits): run after the op's check, before the op copies anything."""
    for value in args:
        kind = type(value)
        if (kind is _TENSOR or (kind not in _PLAIN and isinstance(value, _TENSOR))) and not value.is_contiguous():
            break
    else:
        return
    op, names = _params(check)
    for name, value in zip(names + tuple(f"#{i}" for i in range(len(names), len(args))), args):
        if isinstance(value, _TENSOR) and not value.is_contiguous() and name not in COPIED_BY_THE_OP.get(op, ()):
            fits(op, name, _copy_what(value), value.numel() * value.element_size(), value.device)
