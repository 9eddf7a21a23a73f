# SPDX-License-Identifier: Apache-2.0
"""Registration of backend "c" in comfy_kitchen's registry.

The constraints say exactly what the C kernels serve; each function also has a
call rule that runs the op's own argument check (``ops.check_<name>``), so a
call the kernels would reject (a group size that is not a power of 4, an
empty tensor, a scale that does not broadcast, ...) falls through to the next
backend instead of failing inside "c".
"""
from __future__ import annotations

import logging

import torch

from . import _C, ops
from ._C import KitchenError

BACKEND_NAME = "c"

# Why "c" declined a call (a call rule's refusal), at DEBUG: the call then runs on the next
# backend, and a user who sees that backend's error finds "c"'s reason here.
logger = logging.getLogger("comfy_kitchen_c")

# Ops served, with the parameters the registry checks before a call.
_FLOATS = frozenset({torch.float32, torch.float16, torch.bfloat16})


def _devices() -> frozenset[str]:
    return frozenset({"cpu", "cuda"}) if _C.HAS_CUDA else frozenset({"cpu"})


# The CUDA kernels are built for compute capability 7.5 (Turing) and newer.
MIN_COMPUTE_CAPABILITY = (7, 5)


def unsupported_gpu(kwargs, minimum=MIN_COMPUTE_CAPABILITY) -> str | None:
    """Why a call's CUDA tensors are on a GPU the kernels were not built for, or None.

    Checked per call and per tensor device (the registry's own compute-capability
    check looks only at the current device, and would reject CPU-only machines)."""
    for name, value in kwargs.items():
        if isinstance(value, torch.Tensor) and value.is_cuda:
            cc = ops.compute_capability(value.device.index)
            if cc < minimum:
                return (f"argument '{name}' is on {value.device} with compute capability {cc[0]}.{cc[1]}; "
                        f"the CUDA kernels need {minimum[0]}.{minimum[1]}+")
    return None


def _call_rule(check, minimum=MIN_COMPUTE_CAPABILITY):
    from comfy_kitchen.constraints import ValidationResult

    name = check.__name__.removeprefix("check_")

    def rule(kwargs):
        gpu = unsupported_gpu(kwargs, minimum)
        if gpu is not None:
            logger.debug("backend 'c' declines %s: %s", name, gpu)
            return ValidationResult.fail("__hardware__", gpu)
        try:
            check(**kwargs)
        except (KitchenError, TypeError) as exc:
            # TypeError: a required argument missing, or one the op does not have (a newer comfy_kitchen's)
            logger.debug("backend 'c' declines %s: %s", name, exc)
            return ValidationResult.fail("__call__", str(exc))
        return ValidationResult.ok()

    rule.__name__ = f"rule_{check.__name__}"
    return rule


def capabilities() -> dict:
    """{function name: FunctionConstraints} of everything "c" serves."""
    from comfy_kitchen.constraints import ExactDims, FunctionConstraints, MinDims, ParamConstraint

    floats = ParamConstraint(dtypes=_FLOATS)
    integer = ParamConstraint(dtypes=frozenset({int}))
    boolean = ParamConstraint(dtypes=frozenset({bool}))
    int8_2d = ParamConstraint(dtypes=frozenset({torch.int8}), shape_rules=(ExactDims(2),))
    params = {
        "quantize_int8_rowwise": {
            "x": ParamConstraint(dtypes=_FLOATS, shape_rules=(MinDims(1),)),
            "stochastic_rounding": integer,
        },
        "quantize_int8_tensorwise": {
            "x": floats,
            "scale": ParamConstraint(dtypes=_FLOATS | {float, int, str}),
            "stochastic_rounding": integer,
        },
        "quantize_and_rotate_rowwise": {
            "x": ParamConstraint(dtypes=_FLOATS, shape_rules=(MinDims(1),)),
            "h": ParamConstraint(dtypes=_FLOATS, shape_rules=(ExactDims(2),)),
            "group_size": integer,
            "stochastic_rounding": integer,
        },
        "quantize_int8_convrot_weight": {
            "weight": ParamConstraint(dtypes=_FLOATS, shape_rules=(ExactDims(2),)),
            "group_size": integer,
            "stochastic_rounding": integer,
        },
        "rotate_int8_convrot_weight": {
            "weight": ParamConstraint(dtypes=_FLOATS, shape_rules=(ExactDims(2),)),
            "group_size": integer,
        },
        "dequantize_int8_simple": {
            "q": ParamConstraint(dtypes=frozenset({torch.int8})),
            "scale": floats,
        },
        "dequantize_int8_simple_dtype": {
            "q": ParamConstraint(dtypes=frozenset({torch.int8})),
            "scale": floats,
            "output_dtype_code": integer,
        },
        "dequantize_int8_convrot_weight": {
            "q": int8_2d,
            "scale": floats,
            "group_size": integer,
        },
        "dequantize_int8_convrot_weight_dtype": {
            "q": int8_2d,
            "scale": floats,
            "group_size": integer,
            "output_dtype_code": integer,
        },
        "dequantize_int8_embedding": {
            "q": int8_2d,
            "scale": floats,
            "indices": ParamConstraint(dtypes=frozenset({torch.int32, torch.int64})),
            "group_size": integer,
            "output_dtype_code": integer,
        },
        "quantize_nvfp4": {
            "x": ParamConstraint(dtypes=_FLOATS, shape_rules=(ExactDims(2),)),
            "per_tensor_scale": ParamConstraint(dtypes=frozenset({torch.float32})),
            "pad_16x": boolean,
            "hi_first": boolean,
        },
        "dequantize_nvfp4": {
            "qx": ParamConstraint(dtypes=frozenset({torch.uint8}), shape_rules=(ExactDims(2),)),
            "per_tensor_scale": ParamConstraint(dtypes=frozenset({torch.float32})),
            "block_scales": ParamConstraint(dtypes=frozenset({torch.float8_e4m3fn})),
            "output_type": ParamConstraint(dtypes=_FLOATS),
            "hi_first": boolean,
        },
    }
    devices = _devices()
    caps = {
        name: FunctionConstraints(
            params=p,
            default_devices=devices,
            call_rules=(_call_rule(getattr(ops, f"check_{name}")),),
        )
        for name, p in params.items()
    }
    caps.update(_linear_capabilities(devices))
    return caps


# ---- linear ops: the int8 linears (cuBLASLt IMMA: compute capability 7.5+) and scaled_mm_nvfp4
# (cuBLASLt block-scaled FP4: 10.0+; on the CPU a dequantize-and-matmul, which comfy_kitchen's
# eager backend cannot run there).  On a GPU below the minimum the call falls through.

IMMA_MIN_COMPUTE_CAPABILITY = (7, 5)
FP4_GEMM_MIN_COMPUTE_CAPABILITY = (10, 0)


def _linear_capabilities(devices) -> dict:
    from comfy_kitchen.constraints import ExactDims, FunctionConstraints, MinDims, ParamConstraint

    floats = ParamConstraint(dtypes=_FLOATS)
    uint8_2d = ParamConstraint(dtypes=frozenset({torch.uint8}), shape_rules=(ExactDims(2),))
    f32 = ParamConstraint(dtypes=frozenset({torch.float32}))
    e4m3 = ParamConstraint(dtypes=frozenset({torch.float8_e4m3fn}))
    # What every int8 linear op takes for its product.
    product = {
        "x": ParamConstraint(dtypes=_FLOATS, shape_rules=(MinDims(1),)),
        "weight": ParamConstraint(dtypes=frozenset({torch.int8}), shape_rules=(ExactDims(2),)),
        "weight_scale": floats,
        "bias": floats,
        "out_dtype": floats,
        "convrot": ParamConstraint(dtypes=frozenset({bool})),
        "convrot_groupsize": ParamConstraint(dtypes=frozenset({int})),
    }
    return {
        "int8_linear": FunctionConstraints(
            params=product | {
                "input_act": ParamConstraint(dtypes=frozenset({str, type(None)})),
                "input_act_weight": floats,
                "input_act_eps": ParamConstraint(dtypes=frozenset({float, int, type(None)})),
                "residual": floats,
                "residual_scale": floats,
            },
            default_devices=devices,
            call_rules=(_call_rule(ops.check_int8_linear, IMMA_MIN_COMPUTE_CAPABILITY),),
        ),
        "int8_linear_modulated": FunctionConstraints(
            params=product | {"modulation_scale": floats},
            default_devices=devices,
            call_rules=(_call_rule(ops.check_int8_linear_modulated, IMMA_MIN_COMPUTE_CAPABILITY),),
        ),
        "int8_linear_rms_modulated": FunctionConstraints(
            params=product | {
                "norm_weight": floats,
                "norm_eps": ParamConstraint(dtypes=frozenset({float, int, type(None)})),
                "modulation_scale": floats,
            },
            default_devices=devices,
            call_rules=(_call_rule(ops.check_int8_linear_rms_modulated, IMMA_MIN_COMPUTE_CAPABILITY),),
        ),
        "scaled_mm_nvfp4": FunctionConstraints(
            params={
                "a": uint8_2d,
                "b": uint8_2d,
                "tensor_scale_a": f32,
                "tensor_scale_b": f32,
                "block_scale_a": e4m3,
                "block_scale_b": e4m3,
                "bias": floats,
                "out_dtype": floats,
                "alpha": f32,
            },
            default_devices=devices,
            call_rules=(_call_rule(ops.check_scaled_mm_nvfp4, FP4_GEMM_MIN_COMPUTE_CAPABILITY),),
        ),
    }


def _registry():
    try:
        from comfy_kitchen.registry import registry
    except ImportError:
        return None
    return registry


def register() -> bool:
    """Registers "c" in comfy_kitchen's registry (priorities unchanged); False without comfy_kitchen."""
    registry = _registry()
    if registry is None:
        return False
    registry.register(BACKEND_NAME, ops, capabilities())
    return True


def activate() -> None:
    """Registers "c" if needed and puts it first in comfy_kitchen's backend priority."""
    registry = _registry()
    if registry is None:
        raise ImportError("comfy_kitchen_c.activate() needs comfy_kitchen installed")
    if BACKEND_NAME not in registry.list_backends() or not registry.is_available(BACKEND_NAME):
        register()
    rest = [name for name in registry._priority if name != BACKEND_NAME]
    registry.set_priority([BACKEND_NAME] + rest)
