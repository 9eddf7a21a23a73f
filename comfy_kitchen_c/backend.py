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
import re
import sys

import torch

from . import _C, _proved, awq, cpu_speed, op_list, ops
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


# ---- an explicit "c" or a pick by priority ----------------------------------------------------
# Speed preferences (cpu_speed.py on the CPU, awq.GPU_MAX_ROWS on CUDA) apply only where comfy_kitchen
# picks a backend by priority.  A caller who names "c", with comfy_kitchen.use_backend("c") (comfy_kitchen's
# own suites and layouts read its thread-local override the same way: tensor/int8.py) or with
# registry.get_implementation(name, backend="c", kwargs=...), gets "c"'s own code for every call "c"
# can serve.  The registry passes the rule only the call's kwargs, so the explicit form is told by the
# frame that asked: comfy_kitchen's get_implementation with backend="c", not its get_capable_backend
# (the priority loop).  A registry whose methods moved reads as a pick by priority: the speed rules
# then apply, and tests/test_forced_backend.py fails on it.
_REGISTRY = None
_OVERRIDE = None       # the registry's thread-local object: use_backend's override is in its __dict__
_PICK_CODE = None      # BackendRegistry.get_capable_backend's code: a pick by priority (or the override)
_EXPLICIT_CODE = None  # BackendRegistry.get_implementation's code: backend= named, or none


def _bind_registry() -> None:
    global _REGISTRY, _OVERRIDE, _PICK_CODE, _EXPLICIT_CODE
    from comfy_kitchen.registry import BackendRegistry, registry
    # (0.2.31 to 0.2.40 have all of these; a registry without one reads as a pick by priority, and
    # tests/test_registry_private.py fails naming the one that moved)
    _REGISTRY, _OVERRIDE = registry, getattr(registry, "_thread_local", None) or type("NoOverride", (), {})()
    _PICK_CODE = getattr(getattr(BackendRegistry, "get_capable_backend", None), "__code__", None)
    _EXPLICIT_CODE = getattr(getattr(BackendRegistry, "get_implementation", None), "__code__", None)


def forced() -> bool:
    """Whether the call being validated asked for "c" by name (use_backend("c"), or
    get_implementation(..., backend="c")) rather than by priority.  Only the registry's rule asks."""
    if _REGISTRY is None:
        _bind_registry()
    # the override's own dict: getattr with a default raises and catches AttributeError where none is set
    if _OVERRIDE.__dict__.get("backend_override") == BACKEND_NAME:
        return True
    try:  # comfy_kitchen's chain: rule <- validate_function_call <- validate_backend_for_call <- the asker
        asker = sys._getframe(4)
    except ValueError:
        return False
    if asker.f_code is _PICK_CODE:
        return False
    if asker.f_code is _EXPLICIT_CODE:
        return asker.f_locals.get("backend") == BACKEND_NAME
    frame = sys._getframe(1)  # another chain (a wrapper in between): walk up to the asker
    for _ in range(12):
        if frame is None:
            return False
        code = frame.f_code
        if code is _PICK_CODE:
            return False
        if code is _EXPLICIT_CODE:
            return frame.f_locals.get("backend") == BACKEND_NAME
        frame = frame.f_back
    return False


_ARGUMENT = re.compile(r"argument '(\w+)'")
_MISSING = re.compile(r"missing \d+ required (?:positional |keyword-only )?arguments?: (.*)")
_UNEXPECTED = re.compile(r"unexpected keyword argument '(\w+)'")


def refusal(op: str, exc: Exception) -> tuple[str, str]:
    """(the argument, the reason) of a refused call, in the words of the op's signature: a check's
    KitchenError names them ("op: argument 'x': ..."); Python's TypeError from binding the call
    (an argument missing, or a newer comfy_kitchen's keyword "c" does not take) is put in the same form."""
    text = str(exc)
    if isinstance(exc, TypeError) and not isinstance(exc, KitchenError):
        missing, unexpected = _MISSING.search(text), _UNEXPECTED.search(text)
        if unexpected:
            name = unexpected.group(1)
            return name, (f"{op}: argument '{name}': backend 'c' does not take it (a newer comfy_kitchen's "
                          "argument?); the next backend serves the call")
        if missing:
            names = re.findall(r"'(\w+)'", missing.group(1))
            if names:
                return names[0], f"{op}: argument '{names[0]}': missing (required by backend 'c')"
    found = _ARGUMENT.search(text)
    return (found.group(1) if found else "__call__"), text


def _call_rule(op: op_list.Op):
    """The registry's one check of a call of op: first the speed preference where one applies (cheap:
    about a microsecond of ours, beside about one of comfy_kitchen's loop asking "c"; an explicit "c"
    skips it), then the op's own check (ops.check_<name>), whose result the op then takes instead of
    checking again (_proved.py)."""
    from comfy_kitchen.constraints import ValidationResult

    check = getattr(ops, f"check_{op.name}")
    names = tuple(inspect.signature(check).parameters)
    minimum = op.min_cc
    name = op.name
    speed = cpu_speed.rule_for(name, ValidationResult.fail)  # a declined call's result, made once per reason
    gpu_rows = awq.GPU_MAX_ROWS if name == "gemv_awq_w4a16" else None
    if _REGISTRY is None:
        _bind_registry()

    def rule(kwargs):
        if speed is not None and KERNELS.get() is _C:  # the emulated device's CPU tensors run the GPU kernels
            declined = speed(kwargs)
            # forced(), its common case inline: no override, and comfy_kitchen's priority loop asking
            # (rule <- validate_function_call <- validate_backend_for_call <- the asker)
            if declined is not None and _OVERRIDE.__dict__.get("backend_override") != BACKEND_NAME:
                try:
                    asker = sys._getframe(3).f_code
                except ValueError:  # called from the top of a script, not by the registry
                    asker = None
                if asker is _PICK_CODE or not forced():
                    return declined
        if not op.registry_cpu and _on_cpu(kwargs) and not forced():
            reason = "eager is faster on the CPU (comfy_kitchen_c/op_list.py); ours runs on CUDA tensors"
            logger.debug("backend 'c' declines %s: %s", name, reason)
            return ValidationResult.fail("__device__", reason)
        gpu = unsupported_gpu(kwargs, minimum)
        if gpu is not None:
            logger.debug("backend 'c' declines %s: %s", name, gpu)
            return ValidationResult.fail("__hardware__", gpu)
        try:
            result = check(**kwargs)
        except (KitchenError, TypeError) as exc:
            # TypeError: a required argument missing, or one the op does not have (a newer comfy_kitchen's)
            argument, reason = refusal(name, exc)
            logger.debug("backend 'c' declines %s: %s", name, reason)
            return ValidationResult.fail(argument, reason)
        if gpu_rows is not None and result[0] > gpu_rows and not _on_cpu(kwargs) and not forced():
            reason = (f"{name}: argument 'x': {result[0]} rows; on CUDA eager's GEMM over the dequantized weight "
                      f"serves more than {gpu_rows} (comfy_kitchen_c/awq.py GPU_MAX_ROWS)")
            logger.debug("backend 'c' declines %s: %s", name, reason)
            return ValidationResult.fail("x", reason)
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


def priority(registry) -> list[str]:
    """comfy_kitchen's backend priority, in order.  Its registry has a setter and no getter, so this
    is the one place that reads the private list (doctor reads it through here);
    tests/test_registry_private.py fails, naming it, if a comfy_kitchen release moves it."""
    return list(registry._priority)


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
    rest = [name for name in priority(registry) if name != BACKEND_NAME]
    registry.set_priority([BACKEND_NAME] + rest)


def deactivate() -> None:
    """Takes "c" out of comfy_kitchen's backend priority, and forgets its place; it stays
    registered (comfy_kitchen.use_backend("c") still reaches it)."""
    global _place
    registry = _registry()
    if registry is None:
        return
    _place = None
    registry.set_priority([name for name in priority(registry) if name != BACKEND_NAME])
