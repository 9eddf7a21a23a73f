# SPDX-License-Identifier: Apache-2.0
"""Registration of backend "c" in comfy_kitchen's registry.

Every op of op_list.OPS marked registered, each with one call rule: the op's own
argument check (``ops.check_<name>``), so a call the kernels would reject (a group
size that is not a power of 4, an empty tensor, a scale that does not broadcast,
...) falls through to the next backend instead of failing inside "c"; the op then
takes the rule's result instead of checking again (_proved.py).
"""
from __future__ import annotations

import importlib
import inspect
import logging

import torch

from . import _C, _proved, cpu_speed, op_list, ops
from ._C import KitchenError
from ._checks import _PLAIN
from ._kernels import KERNELS

BACKEND_NAME = "c"

# Why "c" declined a call (a call rule's refusal), at DEBUG: the call then runs on the next
# backend, and a user who sees that backend's error finds "c"'s reason here.
logger = logging.getLogger("comfy_kitchen_c")


def _devices() -> frozenset[str]:
    return frozenset({"cpu", "cuda"}) if _C.HAS_CUDA else frozenset({"cpu"})


# The CUDA kernels are built for compute capability 7.5 (Turing) and newer (op_list.py).
MIN_COMPUTE_CAPABILITY = op_list.MIN_CC


def unsupported_gpu(kwargs, minimum=MIN_COMPUTE_CAPABILITY) -> str | None:
    """Why a call's CUDA tensors are on a GPU the kernels were not built for, or None.

    Checked per call and per tensor device (the registry's own compute-capability
    check looks only at the current device, and would reject CPU-only machines)."""
    for name, value in kwargs.items():
        # a type look-up first: most arguments are None, numbers, strings or dtypes (_checks._PLAIN)
        if type(value) not in _PLAIN and isinstance(value, torch.Tensor) and value.is_cuda:
            cc = ops.compute_capability(value.device.index)
            if cc < minimum:
                return (f"argument '{name}' is on {value.device} with compute capability {cc[0]}.{cc[1]}; "
                        f"the CUDA kernels need {minimum[0]}.{minimum[1]}+")
    return None


def _on_cpu(kwargs) -> bool:
    """Whether a call runs our CPU kernels: its first tensor on the CPU, and not on the emulated
    device (whose CPU tensors run the GPU kernels: the CPU's speed rules are not its).  The first
    tensor speaks for the call: a call whose tensors are on different devices is refused by the
    op's check (check.same_device) whatever this says, so only the refusal's reason could differ."""
    if KERNELS.get() is not _C:
        return False
    for value in kwargs.values():
        if type(value) not in _PLAIN and isinstance(value, torch.Tensor):
            return value.is_cpu
    return False


def _call_rule(op: op_list.Op):
    """The registry's one check of a call of op: the op's own (ops.check_<name>), whose result
    the op then takes instead of checking again (_proved.py)."""
    from comfy_kitchen.constraints import ValidationResult

    check = getattr(ops, f"check_{op.name}")
    names = tuple(inspect.signature(check).parameters)
    minimum = op.min_cc

    def rule(kwargs):
        on_cpu = _on_cpu(kwargs)
        if not op.registry_cpu and on_cpu:
            reason = "eager is faster on the CPU (comfy_kitchen_c/op_list.py); ours runs on CUDA tensors"
            logger.debug("backend 'c' declines %s: %s", op.name, reason)
            return ValidationResult.fail("__device__", reason)
        gpu = unsupported_gpu(kwargs, minimum)
        if gpu is not None:
            logger.debug("backend 'c' declines %s: %s", op.name, gpu)
            return ValidationResult.fail("__hardware__", gpu)
        try:
            result = check(**kwargs)
        except (KitchenError, TypeError) as exc:
            # TypeError: a required argument missing, or one the op does not have (a newer comfy_kitchen's)
            logger.debug("backend 'c' declines %s: %s", op.name, exc)
            return ValidationResult.fail("__call__", str(exc))
        slower = cpu_speed.decline(op.name, kwargs) if on_cpu else None
        if slower is not None:  # a valid call eager runs faster (cpu_speed.py: the shapes, the figures)
            logger.debug("backend 'c' declines %s: %s", op.name, slower)
            return ValidationResult.fail("__speed__", slower)
        _proved.prove(check, tuple(map(kwargs.get, names)), result)
        return ValidationResult.ok()

    rule.__name__ = f"rule_check_{op.name}"
    return rule


def declared_ops() -> frozenset[str] | None:
    """The op names the installed comfy_kitchen declares (its public functions and its eager
    backend's ops), or None without comfy_kitchen.  An op of the list that only a newer
    comfy_kitchen declares is not registered beside an older one: nothing there would call it,
    and a newer layout's probe must not find "c" for an op its own comfy_kitchen lacks."""
    try:
        import comfy_kitchen
        from comfy_kitchen.registry import registry
    except ImportError:
        return None
    eager = registry.list_backends().get("eager", {}).get("capabilities", ())
    names = frozenset(eager) | frozenset(n for n in dir(comfy_kitchen) if callable(getattr(comfy_kitchen, n, None)))
    return frozenset(n for n in names if _contract_present(n))


# Ops whose contract (the one "c" is at parity with: comfy_kitchen 0.2.40's) lives in a module an
# older comfy_kitchen lacks although it declares the op: 0.2.31 has rms_gated_residual's name but no
# eager residual module, and an older W4A8 storage without the MMA-packed records (whose quantizer
# takes no bits=, 6-bit storage being newer too).  There "c" does not register them: an older
# contract is not the one its kernels serve.
_CONTRACT_MODULES = {
    "rms_gated_residual": "comfy_kitchen.backends.eager.residual",
    "quantize_w4a8_int8_weight": "comfy_kitchen.tensor.w4a8_packed",
    "dequantize_w4a8_int8_weight": "comfy_kitchen.tensor.w4a8_packed",
    "w4a8_int8_linear": "comfy_kitchen.tensor.w4a8_packed",
    "w4a8_packed_linear": "comfy_kitchen.tensor.w4a8_packed",
}


def _contract_present(op: str) -> bool:
    module = _CONTRACT_MODULES.get(op)
    if module is None:
        return True
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def capabilities() -> dict:
    """{function name: FunctionConstraints} of every registered op of op_list.OPS that the
    installed comfy_kitchen declares.

    The op's check is its whole contract (dtypes, ranks, devices, shapes, values: what the C
    kernels serve), run once per call as the call rule; no per-parameter constraints are
    declared beside it, which comfy_kitchen would check a second time (about 13 us per
    int8_linear call) with nothing the check does not already refuse.  A call with an argument
    the op does not know (a newer comfy_kitchen's keyword) fails the rule, so it falls through
    to the next backend with the reason logged, never a TypeError from "c"."""
    from comfy_kitchen.constraints import FunctionConstraints

    devices = _devices()
    declared = declared_ops()
    return {op.name: FunctionConstraints(params={}, default_devices=devices, call_rules=(_call_rule(op),))
            for op in op_list.OPS if op.registered and (declared is None or op.name in declared)}


def _registry():
    try:
        from comfy_kitchen.registry import registry
    except ImportError:
        return None
    return registry


# The place in comfy_kitchen's backend priority the user gave "c" (activate(): first; a priority list
# naming "c": its index there), or None while "c" has none.  Other code that resets the priority
# without naming "c" (comfy_kitchen's ROCm set-up sets ["hip", "cuda", "triton", "eager"]) would
# otherwise drop "c" from the dispatch for the rest of the process.
_place: int | None = None


def _keep_place(registry) -> None:
    """Wraps the registry's set_priority (once) so that a list without "c" gets "c" back at the
    user's place.  To take "c" out, disable it (registry.disable("c")) or name it last."""
    if getattr(registry.set_priority, "_ckc_keeps_place", False):
        return
    original = registry.set_priority

    def set_priority(priority_list):
        global _place
        order = list(priority_list)
        if BACKEND_NAME in order:
            _place = order.index(BACKEND_NAME)
        elif _place is not None:
            order.insert(min(_place, len(order)), BACKEND_NAME)
            logger.debug("backend 'c' keeps place %d of comfy_kitchen's priority, reset to %s", _place,
                         list(priority_list))
        original(order)

    set_priority._ckc_keeps_place = True
    registry.set_priority = set_priority


def register() -> bool:
    """Registers "c" in comfy_kitchen's registry (priorities unchanged); False without comfy_kitchen."""
    registry = _registry()
    if registry is None:
        return False
    registry.register(BACKEND_NAME, ops, capabilities())
    _keep_place(registry)
    return True


def activate() -> None:
    """Registers "c" if needed and puts it first in comfy_kitchen's backend priority, a place it
    keeps when other code resets the priority without naming it."""
    registry = _registry()
    if registry is None:
        raise ImportError("comfy_kitchen_c.activate() needs comfy_kitchen installed")
    if BACKEND_NAME not in registry.list_backends() or not registry.is_available(BACKEND_NAME):
        register()
    _keep_place(registry)
    rest = [name for name in registry._priority if name != BACKEND_NAME]
    registry.set_priority([BACKEND_NAME] + rest)


def deactivate() -> None:
    """Takes "c" out of comfy_kitchen's backend priority, and forgets its place; it stays
    registered (comfy_kitchen.use_backend("c") still reaches it)."""
    global _place
    registry = _registry()
    if registry is None:
        return
    _place = None
    registry.set_priority([name for name in registry._priority if name != BACKEND_NAME])
