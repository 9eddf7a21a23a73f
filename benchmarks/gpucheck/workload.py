# SPDX-License-Identifier: Apache-2.0
"""What gpu_check measures: the ops, the shapes, and each implementation's arguments.

The ops are those of ours that comfy_kitchen's cuda or triton backend also serves (issue
11): the int8 quantizers, rotations and dequantizers, NVFP4 quantization and
dequantization, at M = 4096 and M = 1 rows by K in {3072, 5120, 14336} columns, bfloat16,
G = 256; int8_linear at M in {1, 256, 1024, 4096} by DiT (K, N) pairs; scaled_mm_nvfp4 on
compute capability 10.0+.  Each call's inputs rotate among several sets, so that repeated
calls do not run from the L2 cache when one set would fit in it."""
from __future__ import annotations

import inspect
from typing import Callable

from .records import BACKENDS

GROUP = 256
BF16_CODE = 2  # output_dtype_code of bfloat16
M_VALUES = (4096, 1)
K_VALUES = (3072, 5120, 14336)
QUICK_K_VALUES = K_VALUES   # --quick keeps every shape: the targets are taken on all of them
OPS = ("quantize_int8_rowwise", "quantize_int8_tensorwise", "quantize_and_rotate_rowwise",
       "quantize_int8_convrot_weight", "rotate_int8_convrot_weight", "dequantize_int8_simple",
       "dequantize_int8_simple_dtype", "dequantize_int8_convrot_weight", "dequantize_int8_convrot_weight_dtype",
       "quantize_nvfp4", "dequantize_nvfp4")
LINEAR_OPS = ("int8_linear", "scaled_mm_nvfp4")
LINEAR_M = (4096, 1024, 256, 8, 1)  # 8 and 1: the GEMV (up to CKC_LINEAR_GEMV_ROWS rows)
LINEAR_KN = ((3072, 3072), (5120, 14336), (14336, 5120))  # a DiT's attention, MLP up and MLP down
# The W4A8 linear (issue 21), against comfy_kitchen cuda's (chunked decode + its int8 GEMM; its
# in-register GEMV up to 8 rows) and triton's: the decoded GEMM at 4096 rows, the GEMV at 8 and 1.  Measured
# after every other row, so a budget cut short loses these first; not profiled.
W4A8_OPS = ("w4a8_int8_linear",)
W4A8_M = (4096, 8, 1)  # 8 and 1: the GEMV that decodes in registers
FP4_GEMM_MIN_CC = (10, 0)
DEVICE = "cuda"           # the tests measure on "cpu" with a fake clock
CACHE_MULTIPLE = 3        # a call's input sets together span at least this many L2 caches
MAX_SETS = 8


def shapes() -> list[tuple[int, int]]:
    """(M, K) of the non-linear ops, M = 4096 first (the shapes of the bandwidth targets)."""
    return [(m, k) for m in M_VALUES for k in K_VALUES]


def linear_shapes() -> list[tuple[int, int, int]]:
    return [(m, k, n) for m in LINEAR_M for k, n in LINEAR_KN]


def w4a8_shapes() -> list[tuple[int, int, int]]:
    return [(m, k, n) for m in W4A8_M for k, n in LINEAR_KN]


def input_sets(nbytes: int, l2_bytes: int) -> int:
    """How many input sets a call rotates among so that they span CACHE_MULTIPLE L2 caches."""
    want = -(-CACHE_MULTIPLE * l2_bytes // max(nbytes, 1))
    return max(1, min(MAX_SETS, want))


def tensors(value) -> list:
    import torch

    items = value if isinstance(value, (tuple, list)) else (value,)
    return [t for t in items if isinstance(t, torch.Tensor)]


def bytes_moved(args: tuple, result) -> int:
    """Every tensor argument read plus every tensor result written."""
    return sum(t.nbytes for t in tensors(args) + tensors(result))


def op_arguments(ours) -> dict[str, Callable]:
    """{op: x -> (our arguments, theirs)}: the dequantizers get codes and scales that our
    quantizers made from x."""
    import torch
    from comfy_kitchen.tensor.int8_utils import _build_hadamard

    def same(build):
        return lambda x: (build(x),) * 2

    def nvfp4_quantize(x):  # M not a multiple of 16 needs pad_16x for comfy_kitchen cuda
        return (x, (x.abs().amax().float() / ours.NVFP4_RANGE).reshape(()), 0.0, x.shape[0] % 16 != 0)

    def nvfp4_dequantize(x):
        args = nvfp4_quantize(x)
        qx, block_scales = ours.quantize_nvfp4(*args)
        return (qx, args[1], block_scales, torch.bfloat16)

    return {
        "quantize_int8_rowwise": same(lambda x: (x,)),
        "quantize_int8_tensorwise": same(lambda x: (x,)),
        "quantize_and_rotate_rowwise":
            lambda x: ((x, None, GROUP), (x, _build_hadamard(GROUP, x.device, x.dtype), GROUP)),
        "quantize_int8_convrot_weight": same(lambda x: (x, GROUP)),
        "rotate_int8_convrot_weight": same(lambda x: (x, GROUP)),
        "dequantize_int8_simple": same(lambda x: ours.quantize_int8_rowwise(x)),
        "dequantize_int8_simple_dtype": same(lambda x: (*ours.quantize_int8_rowwise(x), BF16_CODE)),
        "dequantize_int8_convrot_weight": same(lambda x: (*ours.quantize_int8_convrot_weight(x, GROUP), GROUP)),
        "dequantize_int8_convrot_weight_dtype":
            same(lambda x: (*ours.quantize_int8_convrot_weight(x, GROUP), GROUP, BF16_CODE)),
        "quantize_nvfp4": same(nvfp4_quantize),
        "dequantize_nvfp4": same(nvfp4_dequantize),
    }


def linear_arguments(op: str, m: int, k: int, n: int, ours, seed: int = 0) -> tuple | None:
    """The call's arguments, the same for every implementation: int8_linear as ComfyUI's
    ConvRot layers call it (bfloat16 x, per-channel float32 scale, bfloat16 bias, G = 256);
    scaled_mm_nvfp4 on operands our quantizer made.  None for scaled_mm_nvfp4 below compute
    capability 10.0."""
    import torch

    g = torch.Generator(device=DEVICE).manual_seed(seed)
    x = torch.randn(m, k, device=DEVICE, dtype=torch.bfloat16, generator=g)
    if op == "w4a8_int8_linear":  # AsymW4A8Int8Layout's default: 4-bit codebook, e4m3 scales of 16 values
        from comfy_kitchen.tensor.w4a8_packed import default_w4a8_codebook

        q = torch.randint(-128, 128, (n, k // 2), device=DEVICE, dtype=torch.int8, generator=g)
        s_rel = (torch.rand(n, k // 16, device=DEVICE, generator=g) * 200 + 1).to(torch.float8_e4m3fn)
        s_channel = torch.rand(n, device=DEVICE, generator=g) * 1e-3 + 1e-5
        bias = torch.randn(n, device=DEVICE, dtype=torch.bfloat16, generator=g)
        return (x, q, s_rel, s_channel, default_w4a8_codebook().to(DEVICE), None, bias, 16, GROUP, torch.bfloat16)
    if op == "int8_linear":
        w = torch.randint(-127, 128, (n, k), device=DEVICE, dtype=torch.int8, generator=g)
        ws = torch.rand(n, device=DEVICE, generator=g) * 0.01
        bias = torch.randn(n, device=DEVICE, dtype=torch.bfloat16, generator=g)
        return (x, w, ws, bias, torch.bfloat16, True, GROUP, None)
    if DEVICE != "cuda" or tuple(torch.cuda.get_device_capability()) < FP4_GEMM_MIN_CC:
        return None
    w = torch.randn(n, k, device=DEVICE, dtype=torch.bfloat16, generator=g)
    sx, sw = ((t.abs().amax().float() / ours.NVFP4_RANGE).reshape(()) for t in (x, w))
    (qa, ba), (qb, bb) = ours.quantize_nvfp4(x, sx, 0.0, m % 16 != 0), ours.quantize_nvfp4(w, sw)
    return (qa, qb, sx, sw, ba, bb, None, torch.bfloat16)


def backend_status() -> dict:
    """{backend: {"available", "reason", "ops": the measured ops it registered}}; every backend
    unavailable, with the reason, where comfy_kitchen cannot be imported (ours are still
    measured)."""
    try:
        import comfy_kitchen as ck

        status = ck.list_backends()
    except Exception as exc:
        return no_backends(one_line(exc))
    result = {}
    for b in BACKENDS:
        info = status.get(b) or {"available": False, "unavailable_reason": "not registered", "capabilities": []}
        usable = info["available"] and not info.get("disabled")
        reason = info.get("unavailable_reason") or ("disabled" if info.get("disabled") else None)
        result[b] = {"available": usable, "reason": reason,
                     "ops": [op for op in OPS + LINEAR_OPS + W4A8_OPS if op in info["capabilities"]]}
    return result


def no_backends(reason: str) -> dict:
    return {b: {"available": False, "reason": reason, "ops": []} for b in BACKENDS}


def their_implementation(backends: dict, backend: str, op: str, args: tuple) -> tuple[Callable | None, str | None]:
    """(the backend's op, None), or (None, why it cannot be measured; None when the whole
    backend is unavailable, which the report says once)."""
    from comfy_kitchen.registry import registry

    info = backends[backend]
    if not info["available"]:
        return None, None
    if op not in info["ops"]:
        return None, "not registered by this backend"
    impl = registry.get_implementation(op, backend=backend)
    kwargs = dict(inspect.signature(impl).bind(*args).arguments)
    check = registry.validate_backend_for_call(backend, op, kwargs)
    if not check.success:
        return None, f"rejects the call: {check.failed_param}: {check.failure_reason}"
    return impl, None


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"
