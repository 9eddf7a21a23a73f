# SPDX-License-Identifier: Apache-2.0
"""Version skew between comfy_kitchen and "c" cannot break a run (issue 21, item 4): a call with
a keyword argument "c" does not know falls through with the reason logged, an op only a newer
comfy_kitchen declares is registered only beside it, and "c" keeps the place in the backend
priority the user gave it when other code resets the priority."""
import dataclasses
import os
import sys

import pytest

pytest.importorskip("comfy_kitchen")
from comfy_kitchen.registry import registry  # noqa: E402

import comfy_kitchen_c  # noqa: E402
from comfy_kitchen_c import backend, op_list  # noqa: E402
from conftest import saved_priority  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz"))
from draw import Draw  # noqa: E402
from targets import TARGETS  # noqa: E402

REGISTERED = sorted(op.name for op in op_list.OPS if op.registered and op.name in registry._capabilities["c"])


def _valid_kwargs(op: str) -> dict:
    """A call of op that the op's check accepts (the first of a few drawn)."""
    target, check = TARGETS[op], getattr(comfy_kitchen_c.ops, f"check_{op}")
    for i in range(200):
        kwargs = target.make(Draw(11, i))
        try:
            check(**kwargs)
        except comfy_kitchen_c.KitchenError:
            continue
        return kwargs
    raise AssertionError(f"no call of {op} that 'c' serves was drawn")


# The registry's CPU calls of these go to eager, which is faster there (op_list.Op.registry_cpu)
EAGER_ON_CPU = sorted(op.name for op in op_list.OPS if not op.registry_cpu)


@pytest.mark.parametrize("op", EAGER_ON_CPU)
def test_an_op_eager_runs_faster_on_the_cpu_gives_the_registrys_cpu_calls_to_eager(op, caplog):
    kwargs = _valid_kwargs(op)
    with caplog.at_level("DEBUG", logger="comfy_kitchen_c"):
        result = registry.validate_backend_for_call("c", op, kwargs)
    assert not result.success and result.failed_param == "__device__" and "eager is faster" in result.failure_reason
    assert any(f"backend 'c' declines {op}: eager is faster" in r.getMessage() for r in caplog.records)
    comfy_kitchen_c.ops.__dict__[op](**kwargs)  # a direct call runs ours


def test_the_rule_of_an_op_marked_slower_on_the_cpu_gives_its_cpu_calls_to_eager(caplog):
    """The mechanism itself, on a planted entry (the list may hold no such op)."""
    op = dataclasses.replace(op_list.BY_NAME["quantize_int8_rowwise"], registry_cpu=False)
    with caplog.at_level("DEBUG", logger="comfy_kitchen_c"):
        result = backend._call_rule(op)(_valid_kwargs(op.name))
    assert not result.success and result.failed_param == "__device__" and "eager is faster" in result.failure_reason
    assert any(f"backend 'c' declines {op.name}: eager is faster" in r.getMessage() for r in caplog.records)
    assert backend._call_rule(op_list.BY_NAME[op.name])(_valid_kwargs(op.name)).success


@pytest.mark.parametrize("op", [op for op in REGISTERED if op not in EAGER_ON_CPU])
def test_an_unknown_keyword_falls_through_with_its_reason_logged(op, caplog):
    kwargs = {**_valid_kwargs(op), "added_by_a_newer_comfy_kitchen": 1}
    with caplog.at_level("DEBUG", logger="comfy_kitchen_c"):
        result = registry.validate_backend_for_call("c", op, kwargs)  # raises nothing
    assert not result.success and result.failed_param == "added_by_a_newer_comfy_kitchen"
    assert f"{op}: argument 'added_by_a_newer_comfy_kitchen': backend 'c' does not take it" in result.failure_reason
    assert any(f"backend 'c' declines {op}" in r.getMessage() and "added_by_a_newer_comfy_kitchen" in r.getMessage()
               for r in caplog.records)


def test_the_dispatch_picks_the_next_backend_for_an_unknown_keyword(activated):
    kwargs = {**_valid_kwargs("quantize_int8_rowwise"), "added_by_a_newer_comfy_kitchen": 1}
    assert registry.get_capable_backend("quantize_int8_rowwise", dict(kwargs)) != "c"
    del kwargs["added_by_a_newer_comfy_kitchen"]
    assert registry.get_capable_backend("quantize_int8_rowwise", kwargs) == "c"


def test_an_op_the_installed_comfy_kitchen_lacks_is_not_registered(monkeypatch):
    declared = backend.declared_ops()
    listed = {op.name for op in op_list.OPS if op.registered}
    # the newest comfy_kitchen has them all; an older one (0.2.31) lacks exactly the ops its
    # eager lacks, and those are not registered
    lacking = {name for name in listed if name not in registry._capabilities.get("eager", ())
               or not backend._contract_present(name)}
    assert listed - declared == lacking == listed - set(backend.capabilities())
    monkeypatch.setattr(backend, "declared_ops", lambda: declared - {"int8_linear_rms_modulated"})
    caps = backend.capabilities()
    assert "int8_linear_rms_modulated" not in caps and "int8_linear" in caps


def test_c_keeps_its_place_when_the_priority_is_reset():
    with saved_priority(registry):
        comfy_kitchen_c.activate()
        registry.set_priority(["hip", "cuda", "triton", "eager"])  # comfy_kitchen's ROCm set-up
        assert registry._priority == ["c", "hip", "cuda", "triton", "eager"]
        registry.set_priority(["cuda", "eager", "c"])  # a place the user gives
        registry.set_priority(["cuda", "triton", "eager"])
        assert registry._priority == ["cuda", "triton", "c", "eager"]
        comfy_kitchen_c.deactivate()
        assert "c" not in registry._priority
        registry.set_priority(["cuda", "eager"])
        assert registry._priority == ["cuda", "eager"]  # taken out: not put back


def test_a_backend_registered_later_keeps_c_first():
    import types

    from comfy_kitchen.constraints import FunctionConstraints

    with saved_priority(registry):
        comfy_kitchen_c.activate()
        late = types.SimpleNamespace(quantize_int8_rowwise=lambda **kw: None)
        registry.register("late_test_backend", late, {"quantize_int8_rowwise": FunctionConstraints(params={})})
        try:
            assert registry._priority[0] == "c"
        finally:
            registry._backends.pop("late_test_backend", None)
            registry._capabilities.pop("late_test_backend", None)
            registry._constraints.pop(("late_test_backend", "quantize_int8_rowwise"), None)
