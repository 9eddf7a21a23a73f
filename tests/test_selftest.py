# SPDX-License-Identifier: Apache-2.0
"""``python -m comfy_kitchen_c selftest``: it passes on this build, covers every op the
backend serves, and reports FAIL when an op is wrong (so it can actually fail)."""
import importlib.util
import io
import re
import subprocess
import sys

import pytest
import torch

import comfy_kitchen_c
from comfy_kitchen_c import selftest

needs_eager = pytest.mark.skipif(importlib.util.find_spec("comfy_kitchen") is None,
                                 reason="selftest compares against comfy_kitchen")


def _cli(*args, prelude: str | None = None):
    """``python -m comfy_kitchen_c *args`` in a fresh interpreter; a prelude runs before the import."""
    command = [sys.executable, "-m", "comfy_kitchen_c", *args]
    if prelude is not None:
        command = [sys.executable, "-c", f"{prelude}\nimport runpy, sys\nsys.argv = {['comfy_kitchen_c', *args]!r}\n"
                   "runpy.run_module('comfy_kitchen_c', run_name='__main__', alter_sys=True)"]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def _served_ops() -> list[str]:
    from comfy_kitchen_c.backend import capabilities
    return sorted(capabilities())


def _verdicts(table: str, op: str) -> list[str]:
    """The verdict column of every table row of op (any variant)."""
    rows = [line.split() for line in table.splitlines() if line.split()[:1] == [op]]
    return [cell for row in rows for cell in row if cell in ("PASS", "FAIL")]


@needs_eager
def test_selftest_command_passes_and_covers_every_op():
    result = _cli("selftest")
    assert result.returncode == 0, result.stdout + result.stderr
    # the op's own name, not inside another's (quantize_w4a8_int8_weight in dequantize_w4a8_int8_weight)
    missing = [op for op in _served_ops() if not re.search(rf"(?<![\w]){op}(?![\w])", result.stdout)]
    assert not missing, f"selftest does not check {missing}"
    assert "FAIL" not in result.stdout


@needs_eager
def test_every_case_names_an_op_of_both_implementations():
    """Each case's op exists in ours and in eager, or the case builds its own reference."""
    from comfy_kitchen.backends.eager import quantization as eager
    for case in selftest.CASES:
        assert callable(getattr(comfy_kitchen_c.ops, case.op)), case.op
        reference = case.reference(eager) if case.reference else getattr(eager, case.op)
        assert callable(reference), case.op


def _off_by_one_codes(real):
    def wrong(x, stochastic_rounding=0):
        q, s = real(x, stochastic_rounding)
        return (q.int() + 1).clamp(-128, 127).to(torch.int8), s
    return wrong


def _raises(real):
    def wrong(*args, **kwargs):
        raise RuntimeError("kernel exploded")
    return wrong


@needs_eager
@pytest.mark.parametrize("breakage, detail", [(_off_by_one_codes, "elements differ"),
                                              (_raises, "kernel exploded")])
def test_selftest_reports_a_wrong_op(monkeypatch, breakage, detail):
    monkeypatch.setattr(comfy_kitchen_c.ops, "quantize_int8_rowwise",
                        breakage(comfy_kitchen_c.ops.quantize_int8_rowwise))
    out = io.StringIO()
    passed = selftest.run(["cpu"], out, only={"quantize_int8_rowwise", "quantize_int8_tensorwise"})
    table = out.getvalue()
    assert passed is False
    assert set(_verdicts(table, "quantize_int8_rowwise")) == {"FAIL"}
    assert set(_verdicts(table, "quantize_int8_tensorwise")) == {"PASS"}  # the other op is unaffected
    assert "FAIL quantize_int8_rowwise on cpu, float32: " in table and detail in table


def test_rules_reject_beyond_the_tolerances():
    """The tolerance rules are not vacuous: each rejects a result just outside its bound."""
    q = torch.zeros(100, 100, dtype=torch.int8)
    s = torch.ones(100, 1)
    off = q.clone()
    off[0, :5] = 1  # 0.05% of codes off by one: allowed
    assert selftest.rotated_int8((off, s), (q, s)) is None
    off[0, :20] = 1  # 0.2%: not allowed
    assert "codes differ" in selftest.rotated_int8((off, s), (q, s))
    off = q.clone()
    off[0, 0] = 2
    assert "up to 2" in selftest.rotated_int8((off, s), (q, s))
    assert "scales" in selftest.rotated_int8((q, s * (1 + 1e-4)), (q, s))

    ref = torch.tensor([[1.0, 2.0, 4.0]], dtype=torch.bfloat16)
    one_ulp = torch.tensor([[1.0078125, 2.015625, 4.03125]], dtype=torch.bfloat16)
    assert selftest.rotated_dequant((one_ulp,), (ref,)) is None
    assert selftest.rotated_dequant((one_ulp * 1.0078125,), (ref,)) is not None
    assert selftest.rotation((ref * 1.05,), (ref,)) is not None
    assert selftest.exact((torch.tensor([-0.0]),), (torch.tensor([0.0]),)) is not None

    codes, srel = torch.zeros(10, 100, dtype=torch.int8), torch.ones(10, 20).to(torch.float8_e4m3fn)
    sch, table = torch.ones(10), torch.linspace(-1, 1, 16)
    ref = (codes, srel, sch, None, table)
    moved = codes.clone()
    moved[0, :5] = 1  # 0.5% of the code bytes: allowed
    assert selftest.w4a8_codes((moved, srel, sch, None, table), ref) is None
    moved[0, :20] = 1  # 2%: not
    assert "code bytes differ" in selftest.w4a8_codes((moved, srel, sch, None, table), ref)
    assert "channel scales" in selftest.w4a8_codes((codes, srel, sch * (1 + 1e-4), None, table), ref)
    assert "codebooks differ" in selftest.w4a8_codes((codes, srel, sch, None, table * 1.5), ref)
    assert "None" in selftest.w4a8_codes((codes, srel, sch, None, None), ref)


def test_no_command_prints_help_and_exits_2():
    result = _cli()
    assert result.returncode == 2
    assert "selftest" in result.stderr


def test_without_comfy_kitchen_exits_2_with_a_message():
    result = _cli("selftest", prelude="import sys; sys.modules['comfy_kitchen'] = None")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "comfy_kitchen" in result.stderr and "pip install comfy-kitchen" in result.stderr


# ---- the report: header, error columns, timing in blocks ------------------------------------

@needs_eager
def test_report_opens_with_versions_and_hardware():
    out = io.StringIO()
    assert selftest.run(["cpu"], out, only={"quantize_int8_tensorwise"}, timing=False)
    head = out.getvalue().splitlines()[:5]
    assert head[0].startswith(f"comfy-kitchen-c {comfy_kitchen_c.__version__} selftest")
    assert f"torch {torch.__version__}" in head[1] and "Python " in head[1] and "comfy_kitchen " in head[1]
    assert f"kernels for {comfy_kitchen_c._C.cpu_isa()}" in head[2] and f"{torch.get_num_threads()} threads" in head[2]
    assert head[3].startswith("  GPU") and head[4] == ""


@needs_eager
def test_codes_and_floats_are_reported_separately(monkeypatch):
    monkeypatch.setattr(comfy_kitchen_c.ops, "quantize_int8_rowwise",
                        _off_by_one_codes(comfy_kitchen_c.ops.quantize_int8_rowwise))
    out = io.StringIO()
    selftest.run(["cpu"], out, only={"quantize_int8_rowwise"}, timing=False)
    row = next(line for line in out.getvalue().splitlines() if line.startswith("quantize_int8_rowwise "))
    import re
    # codes off by one (except those clamped at 127); the scales untouched: float error 0
    match = re.search(r" (\d+)/(\d+) off, max 1 +0 +FAIL ", row)
    assert match and int(match.group(2)) == selftest.ROWS * selftest.COLS and int(match.group(1)) > 0, row
    assert "int8/fp4 codes" in out.getvalue() and "float err (rel)" in out.getvalue()


def test_differences():
    from comfy_kitchen_c.selftest_report import differences
    q = torch.zeros(10, dtype=torch.int8)
    s = torch.tensor([2.0, 4.0])
    assert differences((q, s), (q, s)) == ("exact", 0.0)
    q2 = q.clone()
    q2[3] = 2
    assert differences((q2, s), (q, s))[0] == "1/10 off, max 2"
    assert differences((q, s * 1.01), (q, s))[1] == pytest.approx(0.01)
    nan = torch.tensor([float("nan"), 1.0])
    assert differences((nan,), (nan,)) == ("-", 0.0)
    assert differences((torch.tensor([1.0, 1.0]),), (nan,))[1] == float("inf")


def test_timing_is_in_blocks_of_consecutive_calls():
    from comfy_kitchen_c import selftest_report
    calls = []
    ours = lambda: calls.append("ours")  # noqa: E731
    eager = lambda: calls.append("eager")  # noqa: E731
    selftest_report.time_blocks(ours, eager, (), torch.device("cpu"))
    runs = [calls[0]]
    for c in calls[1:]:
        if c != runs[-1]:
            runs.append(c)
    # calibration (eager, then ours), then ROUNDS x (a block of ours, a block of eager): consecutive
    # calls of one implementation, never interleaved one by one
    assert runs == ["eager"] + ["ours", "eager"] * selftest_report.ROUNDS
    assert calls.count("ours") >= selftest_report.ROUNDS * selftest_report.MIN_CALLS


def test_the_speed_column_is_the_median_with_the_rounds_spread():
    from comfy_kitchen_c import selftest_report
    ours_ms, eager_ms, low, high = selftest_report.time_blocks(lambda: None, lambda: sum(range(2000)), (),
                                                               torch.device("cpu"))
    assert ours_ms > 0 and eager_ms > 0 and 0 < low <= high
    row = selftest.Row("op", "cpu", torch.float32, ours_ms=1.0, eager_ms=3.0, spread=(2.5, 3.5))
    assert selftest._cells(row)[-1] == "3.00x (2.5-3.5)"
