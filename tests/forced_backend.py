# SPDX-License-Identifier: Apache-2.0
"""pytest plugin: the suites' calls of comfy_kitchen_c.ops through comfy_kitchen's registry with
"c" forced, and every valid one served by "c".

    PYTHONPATH=tests python -m pytest -p forced_backend tests/test_int8_parity.py ...

Each call of a registered op through ``comfy_kitchen_c.ops.<name>`` (how the parity suites call
ours) asks the registry under ``comfy_kitchen.use_backend("c")`` which backend serves it, with the
call's arguments by name (what comfy_kitchen's own functions pass), then runs our op as the test
asked.  A call our op serves (it returns) that the registry gave to another backend fails the
test, naming the op, the backend and "c"'s reason: a parity suite that forces "c" must never
compare eager with eager.  The CPU speed rules (comfy_kitchen_c/cpu_speed.py) are on meanwhile,
with every timing saying eager is faster (instead of the clock), so that each of them would
decline if it leaked into a forced call.  tests/test_forced_backend.py runs the parity suites so;
the counts per op go to the JSON file named by CKC_FORCED_BACKEND_REPORT.
"""
from __future__ import annotations

import functools
import inspect
import json
import os
import tempfile
from collections import Counter

SERVED: Counter = Counter()   # op -> valid calls "c" served
REFUSED: Counter = Counter()  # op -> calls our op refused (invalid input: any backend may serve or refuse them)
ELSEWHERE: list[str] = []     # valid calls served by another backend, with the reason


def _wrap(name: str, original, registry, forced_reason):
    signature = inspect.signature(original)

    def call(*args, **kwargs):
        try:
            named = dict(signature.bind(*args, **kwargs).arguments)
        except TypeError:
            return original(*args, **kwargs)  # a signature error: ours raises it
        with registry.use_backend("c"):
            try:
                picked = registry.get_capable_backend(name, named) if named else "c"
            except Exception:  # noqa: BLE001 - no backend at all: ours must refuse it too (checked below)
                picked = None
        try:
            result = original(*args, **kwargs)
        except Exception:
            REFUSED[name] += 1
            raise
        if picked != "c":
            why = forced_reason(name, named)
            ELSEWHERE.append(f"{name}: {picked}: {why}")
            raise AssertionError(f"{name}: a valid call under use_backend('c') was served by {picked!r}, "
                                 f"not 'c' ('c' declined it: {why})")
        SERVED[name] += 1
        return result

    return functools.update_wrapper(call, original)  # its name and module: tests tell "c"'s ops by them


def pytest_configure(config):
    from comfy_kitchen.registry import registry

    from comfy_kitchen_c import cpu_speed, op_list, ops

    cpu_speed.time_pair = lambda ours, eager, kwargs, rounds=cpu_speed.ROUNDS: (0.5, 1.0)
    cpu_speed.configure(mode="measure", cache_file=os.path.join(tempfile.mkdtemp(prefix="ckc-forced-"),
                                                                "cpu_speed.json"))

    def forced_reason(name, named):
        with registry.use_backend("c"):
            result = registry.validate_backend_for_call("c", name, named)
        return "accepted" if result.success else f"{result.failed_param}: {result.failure_reason}"

    served = registry._capabilities.get("c", set())
    for op in op_list.OPS:
        if op.registered and op.name in served:
            setattr(ops, op.name, _wrap(op.name, getattr(ops, op.name), registry, forced_reason))


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(f"forced backend 'c': {sum(SERVED.values())} valid calls of {len(SERVED)} ops served "
                                f"by 'c', {len(ELSEWHERE)} by another backend, {sum(REFUSED.values())} refused")
    path = os.environ.get("CKC_FORCED_BACKEND_REPORT")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump({"served": dict(SERVED), "refused": dict(REFUSED), "elsewhere": ELSEWHERE}, f, indent=1)
