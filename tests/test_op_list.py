# SPDX-License-Identifier: Apache-2.0
"""The op list (comfy_kitchen_c/op_list.py) is the one source: every op in it has its C op, its
contract and its tests; every C op serves an op of it; the registration and docs/ops.md's table
come from it; an op added without one of its parts, or removed, is caught with words saying what.
And one validation per call: through comfy_kitchen's registry an op's check runs once."""
import sys
from pathlib import Path

import pytest
import torch

from comfy_kitchen_c import _C, _checks, _proved, backend, op_list, ops

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))
from targets import TARGETS  # noqa: E402
from conftest import skip_unless_ck  # noqa: E402


def _c_modules():
    """_C, and _C_emu where the build has it (in-place and editable builds)."""
    try:
        from comfy_kitchen_c import _C_emu
    except ImportError:
        return [_C]
    return [_C, _C_emu]


@pytest.mark.parametrize("op", op_list.OPS, ids=lambda op: op.name)
def test_every_op_of_the_list_has_its_parts(op):
    if not backend._contract_present(op.name):
        pytest.skip(f"{op.name}: the installed comfy_kitchen lacks its contract; not registered, no target")
    for module in _c_modules():
        assert op_list.missing(op, ops, module, TARGETS) == []


@pytest.mark.parametrize("module", _c_modules(), ids=lambda m: m.__name__)
def test_every_c_op_serves_an_op_of_the_list(module):
    assert op_list.unused_c_ops(module) == []
    assert all(callable(getattr(module, name)) for name in module.OP_FUNCTIONS)


def test_an_op_without_its_parts_is_named_with_what_it_lacks():
    planted = op_list.Op("quantize_fake", op_list.INT8, ("quantize_fake",))
    problems = op_list.missing(planted, ops, _C, TARGETS)
    assert len(problems) == 4, problems
    assert "its C op quantize_fake is not a function of comfy_kitchen_c._C" in problems[0]
    assert "csrc/ops/op_list.h" in problems[0]
    assert "no op function comfy_kitchen_c.ops.quantize_fake" in problems[1]
    assert "no contract comfy_kitchen_c.ops.check_quantize_fake" in problems[2]
    assert "no test" in problems[3] and "tests/fuzz/targets.py" in problems[3]


def test_a_contract_that_takes_other_parameters_is_named(monkeypatch):
    monkeypatch.setattr(ops, "check_quantize_int8_rowwise", lambda x, seed=0: 0)
    problems = op_list.missing(op_list.BY_NAME["quantize_int8_rowwise"], ops, _C, TARGETS)
    assert problems == ["quantize_int8_rowwise: check_quantize_int8_rowwise takes other parameters than "
                        "quantize_int8_rowwise"]


def test_removing_an_op_removes_it_from_the_registration_and_names_its_c_op(monkeypatch):
    kept = tuple(op for op in op_list.OPS if op.name != "dequantize_nvfp4")
    monkeypatch.setattr(op_list, "OPS", kept)
    assert "dequantize_nvfp4" not in backend.capabilities()
    assert "dequantize_nvfp4" not in op_list.readme_table(kept)
    unused = op_list.unused_c_ops(_C, kept)
    assert len(unused) == 1 and unused[0].startswith("C op dequantize_nvfp4 of comfy_kitchen_c._C serves no op")


def test_the_registration_is_the_lists_registered_ops():
    from comfy_kitchen.registry import registry

    # the ops of the list that the installed comfy_kitchen declares (all of them in the newest;
    # 0.2.31 lacks the modulated ones): backend.py registers no op its comfy_kitchen lacks
    listed = {op.name for op in op_list.OPS if op.registered} & backend.declared_ops()
    assert set(backend.capabilities()) == listed
    # what comfy_kitchen's registry holds for "c": an op registered but not listed, or listed and
    # not registered, fails here with its name
    assert set(registry._capabilities["c"]) == listed


def test_the_readme_table_is_the_lists():
    assert op_list.readme_table() in (ROOT / "docs" / "ops.md").read_text(), (
        "docs/ops.md's op table differs from the list: paste `python -m comfy_kitchen_c.op_list`")


def test_every_served_op_is_fuzzed_through_the_registry_as_the_list_says():
    # less the ops whose 0.2.40 contract the installed comfy_kitchen lacks (backend.py): no target there
    assert {t.op for t in TARGETS.values() if t.registered} == {
        op.name for op in op_list.OPS if op.registered and backend._contract_present(op.name)}


# ---- one validation per call ---------------------------------------------------------------------

@pytest.fixture
def tensor_checks(monkeypatch):
    """How many tensor arguments the checks look at (_checks.tensor is every check's first step)."""
    seen = []
    real = _checks.tensor

    def counting(op, name, *args, **kwargs):
        seen.append((op, name))
        return real(op, name, *args, **kwargs)

    monkeypatch.setattr(_checks, "tensor", counting)
    return seen


def test_a_registry_call_is_checked_once(activated, tensor_checks):
    import comfy_kitchen as ck

    x = torch.randn(2, 3, 64, dtype=torch.bfloat16)
    tensor_checks.clear()
    ck.quantize_int8_rowwise(x)
    assert tensor_checks == [("quantize_int8_rowwise", "x")]
    # comfy_kitchen 0.2.31's int8_linear passes no input_act_eps (nor the other 0.2.40 arguments):
    # the op's default 0.0 is not the proof's None, so the op checks again (_proved.py: a missed
    # saving, the result is the same)
    skip_unless_ck("ck.int8_linear(input_act_eps)")
    w, ws = ops.quantize_int8_rowwise(torch.randn(32, 64, dtype=torch.bfloat16))
    tensor_checks.clear()
    ops.int8_linear(x, w, ws)
    direct = list(tensor_checks)
    tensor_checks.clear()
    ours = ck.int8_linear(x, w, ws)
    assert direct and tensor_checks == direct  # the rule's check; the op took its result
    torch.testing.assert_close(ours, ops.int8_linear(x, w, ws), rtol=0, atol=0)


def test_a_proof_is_not_taken_for_other_arguments(activated):
    from comfy_kitchen.registry import registry

    good = torch.randn(4, 64)
    assert registry.get_capable_backend("quantize_int8_rowwise", {"x": good, "stochastic_rounding": 0}) == "c"
    bad = torch.randn(4, 0)  # rows of length 0: the check refuses them
    with pytest.raises(_C.ArgumentError, match="quantize_int8_rowwise: argument 'x'"):
        ops.quantize_int8_rowwise(bad)


def test_a_proof_is_taken_once_and_only_by_its_own_check():
    def check(x):
        raise AssertionError("not called")

    x = object()
    _proved.prove(check, (x,), "proved")
    assert _proved.checked(check, x) == "proved"
    with pytest.raises(AssertionError, match="not called"):
        _proved.checked(check, x)  # taken: the next call checks
    _proved.prove(check, (x,), "proved")
    with pytest.raises(AssertionError, match="not called"):
        _proved.checked(check, object())  # another argument in its place
    _proved.prove(check, (x,), "proved")
    assert _proved.checked(lambda x: "own", x) == "own"  # another op's check


def test_the_linear_plan_is_asked_once_per_shape(monkeypatch):
    from comfy_kitchen_c import linear

    asked = []
    real = _C.int8_linear_plan
    monkeypatch.setattr(_C, "int8_linear_plan", lambda *a: asked.append(a) or real(*a))
    linear._plan.cache_clear()
    x = torch.randn(1, 3, 64)
    w, ws = ops.quantize_int8_rowwise(torch.randn(16, 64))
    monkeypatch.setattr(linear, "_library_gemm", lambda m, k, n: False)
    first = ops.int8_linear(x, w, ws)
    again = ops.int8_linear(x, w, ws)
    torch.testing.assert_close(first, again, rtol=0, atol=0)
    assert len(asked) == 1
    ops.int8_linear(torch.randn(1, 5, 64), w, ws)
    assert len(asked) == 2
    linear._plan.cache_clear()
