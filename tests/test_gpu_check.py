"""benchmarks/gpu_check.py: its plan (--dry-run), its exit without a GPU, and the helpers that
turn measurements into the report and the targets (with synthetic numbers)."""
import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def _load():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules["gpu_check"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


G = _load()


def run_script(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          cwd=ROOT)


def row(op="quantize_and_rotate_rowwise", m=4096, k=3072, ours=1.0, cuda=None, triton=None, copy=None,
        notes=None, host=None):
    return G.Row(op, m, k, 10_000_000, {"ours": ours, "cuda": cuda, "triton": triton, "copy": copy, G.HOST: host},
                 dict(notes or {}))


def target(items, op, metric):
    return next(t for t in items if t.op == op and t.metric == metric)


# ---- the command ----------------------------------------------------------------------------

def test_dry_run_prints_every_step_command_op_and_shape():
    result = run_script("--dry-run")
    assert result.returncode == 0, result.stderr
    plan = result.stdout
    for step in ("a. build", "b. tests", "c. memcheck", "d. bench", "e. report"):
        assert step in plan
    for text in ("-m pip install -e . --no-build-isolation", "COMFY_KITCHEN_C_WERROR=1",
                 "COMFY_KITCHEN_C_CUDA_ARCHS=", "-m pytest tests/test_cuda.py tests/test_cuda_linear.py -q",
                 "compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1", "-k small",
                 "benchmarks/results/<gpu name slug>.md"):
        assert text in plan, text
    for op in G.BENCH_OPS:
        assert op in plan, op
    for op in G.LINEAR_OPS:
        assert op in plan, op
    for m, k, n in G.linear_shapes(False):
        assert f"{m}x{k}x{n}" in plan
    for b in G.BACKENDS:
        assert f"comfy_kitchen {b}" in plan
    for m in G.M_VALUES:
        for k in G.K_VALUES:
            assert f"{m}x{k}" in plan
    assert f"shapes ({len(G.M_VALUES) * len(G.K_VALUES)}," in plan
    for t in G.targets([]):
        assert t.label in plan


def test_dry_run_quick_and_no_build():
    plan = run_script("--dry-run", "--quick", "--no-build").stdout
    assert f"shapes ({len(G.QUICK_M_VALUES) * len(G.QUICK_K_VALUES)}," in plan
    assert "skipped (--no-build)" in plan and "pip install" not in plan
    assert "--quick" in plan  # passed on to the benchmark worker


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
@pytest.mark.parametrize("args", [["--no-build"], []], ids=["no-build", "default"])
def test_without_gpu_exits_2_with_a_clear_message(args):
    result = run_script(*args)
    assert result.returncode == 2
    assert "no CUDA GPU" in result.stderr and "Nothing was run" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


# ---- numbers --------------------------------------------------------------------------------

def test_row_ratios():
    r = row(ours=2.0, cuda=3.0, copy=1.0)
    assert r.ratio("copy") == pytest.approx(0.5)   # half the copy's bandwidth
    assert r.ratio("cuda") == pytest.approx(1.5)   # 1.5x faster than cuda
    assert r.ratio("triton") is None
    assert row(ours=None, cuda=1.0).ratio("cuda") is None
    assert r.shape == "4096x3072"


def test_bandwidth_target_counts_large_shapes_only():
    rows = [row(m=1, ours=1.0, copy=0.1), row(m=4096, ours=1.0, copy=0.85), row(m=32768, ours=1.0, copy=0.9)]
    t = target(G.targets(rows), "quantize_and_rotate_rowwise", "copy")
    assert [shape for shape, _ in t.values] == ["4096x3072", "32768x3072"]
    assert t.worst == ("4096x3072", pytest.approx(0.85))
    assert t.result == "PASS"
    rows[2].ms["copy"] = 0.7
    t = target(G.targets(rows), "quantize_and_rotate_rowwise", "copy")
    assert t.worst == ("32768x3072", pytest.approx(0.7)) and t.result == "MISS"


def test_speedup_targets():
    rows = [row(ours=2.0, cuda=1.0), row(m=1, ours=1.0, cuda=1.5),
            row(op="quantize_nvfp4", ours=1.0, cuda=1.2, triton=None)]
    items = G.targets(rows)
    rotate = target(items, "quantize_and_rotate_rowwise", "cuda")
    assert rotate.worst == ("4096x3072", pytest.approx(0.5)) and rotate.result == "MISS"
    assert target(items, "quantize_nvfp4", "cuda").result == "PASS"
    assert target(items, "quantize_nvfp4", "triton").result == "not measured"
    # exactly at the goal passes
    assert target(G.targets([row(op="quantize_nvfp4", ours=1.0, cuda=1.0)]), "quantize_nvfp4", "cuda").result == "PASS"


def test_targets_table():
    rows = [row(m=4096, ours=1.0, cuda=0.8, copy=0.85), row(m=32768, ours=2.0, cuda=4.0, copy=1.9)]
    text = G.targets_table(G.targets(rows))
    lines = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()[2:]}
    bandwidth = lines["fused rotate+quantize >= 80% of copy bandwidth"]
    assert "| M >= 4096 |" in bandwidth and "85% (4096x3072)" in bandwidth and "| 90% |" in bandwidth
    assert bandwidth.endswith("| 2/2 | PASS |")
    speed = lines["fused rotate+quantize >= 1.0x comfy_kitchen cuda"]
    assert "0.80x (4096x3072)" in speed and "| 1/2 | MISS |" in speed
    assert lines["NVFP4 quantize >= 1.0x comfy_kitchen cuda"].endswith("| - | - | - | not measured |")


def test_results_table_and_notes():
    rows = [row(ours=2.0, host=0.05, cuda=4.0, triton=None, copy=1.0, notes={"triton": "rejects the call: x: dtype"}),
            row(m=1, ours=0.01234, cuda=None, triton=None, copy=0.005,
                notes={"triton": "rejects the call: x: dtype", "cuda": "AssertionError: rows"})]
    text = G.results_table(rows)
    header, _, first, second = text.splitlines()
    assert header.split(" | ")[4:] == ["ours ms", "ours host ms", "cuda ms", "triton ms", "copy ms", "of copy BW",
                                       "vs cuda", "vs triton |"]
    assert first == "| quantize_and_rotate_rowwise | 4096 | 3072 | 10 | 2 | 0.05 | 4 | - | 1 | 50% | 2.00x | - |"
    assert "| 0.01234 | - | - | - | 0.005 | 41% | - | - |" in second
    notes = G.notes_list(rows)
    assert "- triton quantize_and_rotate_rowwise (4096x3072, 1x3072): rejects the call: x: dtype\n" in notes
    assert "- cuda quantize_and_rotate_rowwise (1x3072): AssertionError: rows\n" in notes


def test_slug():
    assert G.slug("NVIDIA H200") == "nvidia-h200"
    assert G.slug("NVIDIA GeForce RTX 4090 (Laptop)") == "nvidia-geforce-rtx-4090-laptop"


# ---- steps and report -----------------------------------------------------------------------

def step(key, status, detail="", log_tail=""):
    return G.StepResult(key, {"a": "build", "b": "tests", "c": "memcheck", "d": "bench"}[key], status, 1.25,
                        detail, f"cmd {key}", log_tail)


def test_exit_status():
    assert G.exit_status([step("a", G.SKIPPED), step("b", G.PASSED), step("c", G.SKIPPED)]) == 0
    assert G.exit_status([step("a", G.PASSED), step("b", G.FAILED)]) == 1


def test_steps_table_and_logs():
    results = [step("a", G.SKIPPED, "--no-build"), step("b", G.FAILED, "exit status 1: 1 failed | 2 passed", "E boom")]
    text = G.steps_table(results)
    assert "| a. build | skipped | 1.2 s | --no-build |" in text
    assert "| b. tests | failed | 1.2 s | exit status 1: 1 failed \\| 2 passed |" in text
    logs = G.step_logs(results)
    assert "`cmd a`" in logs and "E boom" in logs and logs.count("<details>") == 1


def test_report_has_every_section():
    info = {"GPU": "NVIDIA H200, compute capability 9.0", "driver": "570.1", "CUDA runtime": "13.0"}
    args = G.parse_args(["--quick"])
    backends = {"cuda": {"available": True, "reason": None, "ops": ["quantize_nvfp4"]},
                "triton": {"available": False, "reason": "no triton", "ops": []}}
    rows = [row(ours=1.0, cuda=2.0, copy=0.9, notes={"triton": "x"})]
    text = G.report(info, "python benchmarks/gpu_check.py --quick", args, [step("a", G.PASSED)], rows, backends)
    for part in ("## GPU check: NVIDIA H200", "- driver: 570.1", "`python benchmarks/gpu_check.py --quick`",
                 "### Steps", "| a. build | passed |", "### Backends", "- cuda: available; registers quantize_nvfp4",
                 "- triton: unavailable (no triton)", "### Benchmarks", "### Linear ops",
                 "No linear rows were measured.",
                 "Why cells are empty", "### Targets (computed, not asserted)", "| PASS |"):
        assert part in text, part
    assert "No rows were measured." in G.report(info, "c", args, [], [], {})


def test_bench_problems():
    rows = [row(), row(ours=None, notes={"ours": "RuntimeError: CUDA error"})]
    assert G.bench_problems(0, rows[:1], 1) == []
    problems = G.bench_problems(None, rows, 3)
    assert problems == ["killed at the time limit", "2 of 3 rows measured", "our op failed in 1 rows (see the notes)"]
    assert G.bench_problems(1, rows[:1], 1) == ["exit status 1"]


def test_read_bench_round_trip_drops_a_line_cut_short(tmp_path):
    original = row(cuda=1.5, notes={"triton": "not registered by this backend"})
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"kind": "backends", "backends": {"cuda": {"available": True}}}) + "\n"
                    + json.dumps({"kind": "row", **dataclasses.asdict(original)}) + "\n"
                    + '{"kind": "row", "op": "quantize_nvf')
    backends, rows = G.read_bench(str(path))
    assert backends == {"cuda": {"available": True}} and rows == [original]


@pytest.mark.parametrize("code,expect,status,detail", [
    ("print('3 passed in 0.1s')", "passed", G.PASSED, "3 passed in 0.1s"),
    ("print('5 skipped in 0.1s')", "passed", G.FAILED, "expected 'passed' in: 5 skipped in 0.1s"),
    ("import sys; print('1 failed'); sys.exit(1)", None, G.FAILED, "exit status 1: 1 failed"),
    ("import time; time.sleep(30)", None, G.FAILED, "killed after 1 s (time limit)"),
], ids=["passed", "all-skipped", "failed", "timeout"])
def test_command_outcome(code, expect, status, detail):
    outcome = G.command_outcome([sys.executable, "-c", code], timeout=1 if "sleep" in code else 60, expect=expect)
    assert (outcome.status, outcome.detail) == (status, detail)


# ---- the linear ops ---------------------------------------------------------------------------

def linear_row(op="int8_linear", m=4096, k=3072, n=3072, ours=1.0, cuda=None, triton=None, extra=None,
               notes=None):
    return G.LinearRow(op, m, k, n, {"ours": ours, "cuda": cuda, "triton": triton},
                       {"ours": extra, "cuda": None, "triton": None}, notes or {})


def test_linear_target_counts_m_from_256():
    rows = [linear_row(m=1, ours=1.0, cuda=0.1), linear_row(m=256, ours=1.0, cuda=0.95),
            linear_row(m=4096, ours=2.0, cuda=1.0)]
    (t,) = G.linear_targets(rows)
    assert t.values == [("256x3072x3072", 0.95), ("4096x3072x3072", 0.5)]
    assert t.result == "MISS" and t.worst == ("4096x3072x3072", 0.5)
    assert G.linear_targets([linear_row(m=256, ours=1.0, cuda=0.9)])[0].result == "PASS"


def test_linear_table_and_report():
    rows = [linear_row(ours=2.0, cuda=3.0, extra=12.25, notes={"triton": "rejects the call: x"})]
    text = G.linear_table(rows)
    assert "| int8_linear | 4096 | 3072 | 3072 | 2 | 3 | - | 1.50x | - | 12.2 | - | - |" in text
    assert "- int8_linear 4096x3072x3072 triton: rejects the call: x" in text
    info = {"GPU": "NVIDIA H200, compute capability 9.0"}
    report = G.report(info, "c", G.parse_args([]), [], [], {}, rows)
    assert "### Linear ops" in report and "int8_linear >= 0.9x comfy_kitchen cuda" in report
    assert "Extra MiB" in report


def test_linear_rows_round_trip(tmp_path):
    original = linear_row(cuda=1.5, extra=3.0)
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"kind": "row", **dataclasses.asdict(row())}) + "\n"
                    + json.dumps({"kind": "linear", **dataclasses.asdict(original)}) + "\n"
                    + '{"kind": "linear", "op": "int8_')
    assert G.read_linear_rows(str(path)) == [original]
    assert G.read_bench(str(path))[1] == [row()]


def test_linear_shapes():
    assert len(G.linear_shapes(False)) == len(G.M_VALUES) * len(G.LINEAR_KN)
    assert G.linear_shapes(True) == [(m, k, n) for m in G.QUICK_M_VALUES for k, n in G.QUICK_LINEAR_KN]
