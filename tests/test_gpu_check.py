# SPDX-License-Identifier: Apache-2.0
"""benchmarks/gpu_check.py: its plan (--dry-run), its exit without a GPU, and the helpers that
turn measurements into the report and the targets (with synthetic numbers)."""
import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

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
    for step in ("a. build", "b. tests", "c. memcheck", "d. bench", "e. profile", "f. faults", "g. report"):
        assert step in plan
    for text in ("-m pip install -e . --no-build-isolation", "COMFY_KITCHEN_C_WERROR=1",
                 "COMFY_KITCHEN_C_CUDA_ARCHS=", "-m pytest tests/test_cuda.py tests/test_cuda_linear.py -q",
                 "compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 1", "-k small",
                 "--profile-worker", "benchmarks/bench_faults.py --out 'benchmarks/results/faults_<gpu name slug>.md'",
                 "benchmarks/results/<gpu name slug>.md", "45 s reserved"):
        assert text in plan, text
    for op, shape in G.BREAKDOWN_CALLS:
        assert G.call_name(op, shape) in plan
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
    return G.StepResult(key, {"a": "build", "b": "tests", "c": "memcheck", "d": "bench", "e": "profile",
                              "f": "faults"}[key], status, 1.25,
                        detail, f"cmd {key}", log_tail)


def test_exit_status():
    assert G.exit_status([step("a", G.SKIPPED), step("b", G.PASSED), step("c", G.SKIPPED)]) == 0
    assert G.exit_status([step("d", G.PASSED), step("e", G.INCOMPLETE), step("f", G.PASSED)]) == 0
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


# ---- time budget of the steps ---------------------------------------------------------------------

def test_step_time_keeps_the_later_steps_reserves():
    build, bench, profile, faults = (next(s for s in G.STEPS if s.name == name)
                                     for name in ("build", "bench", "profile", "faults"))
    reserved = G.STEP_RESERVES_S["profile"] + G.STEP_RESERVES_S["faults"]
    assert G.step_time(bench, 400) == 400 - reserved
    assert G.step_time(bench, reserved + 1) == G.MIN_STEP_S  # never less than a step's minimum
    assert G.step_time(build, 1000) == G.STEP_CAPS_S["build"]
    assert G.step_time(build, 300) == 300 - reserved
    assert G.step_time(profile, 1000) == G.STEP_CAPS_S["profile"]
    assert G.step_time(profile, 100) == 100 - G.STEP_RESERVES_S["faults"]
    assert G.step_time(faults, 50) == 50
    assert [s.name for s in G.STEPS][-3:] == ["bench", "profile", "faults"]


def fake_step(run, optional):
    return G.Step("e", "profile", "purpose", run, 60, 0, optional)


def ctx_with(seconds_left):
    return G.Context(G.parse_args([]), G.time.monotonic() + seconds_left + G.REPORT_RESERVE_S, "90")


def broken_run(ctx, timeout):
    raise RuntimeError("profiler unavailable")


@pytest.mark.parametrize("optional,seconds_left,status,detail", [
    (True, 100, G.INCOMPLETE, "RuntimeError: profiler unavailable"),
    (False, 100, G.FAILED, "RuntimeError: profiler unavailable"),
    (True, 1, G.SKIPPED, "not run: the 570 s time budget is used up"),
    (False, 1, G.FAILED, "not run: the 570 s time budget is used up"),
], ids=["optional-raises", "required-raises", "optional-no-time", "required-no-time"])
def test_an_optional_step_never_fails_the_check(optional, seconds_left, status, detail):
    result = G.run_step(ctx_with(seconds_left), fake_step(broken_run, optional))
    assert (result.status, result.detail) == (status, detail)


# ---- kernel breakdown -----------------------------------------------------------------------------

CUTLASS = ("void cutlass::Kernel2<cutlass_80_tensorop_i16832gemm_s8_256x128_64x3_tn_align16_with_a_long_epilogue>"
           "(cutlass_80_tensorop_i16832gemm_s8_256x128_64x3_tn_align16_with_a_long_epilogue::Params)")
FILL = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")


def ev(name, start, end, gpu=False, annotation=False):
    """A profiler event as summarize_profile reads one (torch's FunctionEvent)."""
    return SimpleNamespace(name=name, device_type=G.DeviceType.CUDA if gpu else G.DeviceType.CPU,
                           time_range=SimpleNamespace(start=start, end=end), is_user_annotation=annotation)


def one_call(t):
    """One call's events, starting at t: 100 us on the host; on the GPU a fill kernel, the GEMM, a memset.
    The profiled implementation has a profiler range of its own, which the GPU's timeline shows too."""
    return [ev(G.CALL_LABEL, t, t + 100, annotation=True), ev(G.CALL_LABEL, t + 30, t + 80, gpu=True, annotation=True),
            ev("backend::op", t + 5, t + 95, annotation=True),
            ev("backend::op", t + 31, t + 80, gpu=True, annotation=True),
            ev("aten::zeros", t + 10, t + 30), ev("aten::empty", t + 12, t + 15),
            ev("cudaLaunchKernel", t + 20, t + 28), ev(FILL, t + 31, t + 33, gpu=True),
            ev("cudaLaunchKernel", t + 40, t + 50), ev("cuLaunchKernel", t + 41, t + 49),
            ev(CUTLASS, t + 50, t + 80, gpu=True),
            ev("cudaMemsetAsync", t + 60, t + 62), ev("Memset (Device)", t + 63, t + 64, gpu=True)]


def fake_profile():
    """Two calls; a memcpy in the first only; host work between and after the calls."""
    return (one_call(0) + one_call(200) + [ev("Memcpy HtoD (Pageable -> Device)", 70, 71, gpu=True),
                                           ev("aten::empty", 150, 160), ev("cudaDeviceSynchronize", 310, 400)])


def test_summarize_profile_sums_each_kind_of_work():
    b = G.summarize_profile(fake_profile(), "int8_linear 1x3072x3072", "ours", 2)
    assert (b.call, b.impl, b.calls, b.note) == ("int8_linear 1x3072x3072", "ours", 2, "")
    # most time first; the GPU side of the call ranges is not work
    assert b.gpu == [[CUTLASS, 2, 60], [FILL, 2, 4], ["Memset (Device)", 2, 2],
                     ["Memcpy HtoD (Pageable -> Device)", 1, 1]]
    # inside the calls only, and nested calls (cuLaunchKernel, aten::empty) counted in their callers
    assert b.host == [["runtime", "cudaLaunchKernel", 4, 36], ["runtime", "cudaMemsetAsync", 2, 4],
                      ["torch", "aten::zeros", 2, 40]]
    assert b.wrapper_us == 200


def test_breakdown_rows_are_per_call_with_the_gpu_total():
    b = G.summarize_profile(fake_profile(), "c", "ours", 2)
    rows = G.breakdown_rows(b)
    assert rows == [
        ["ours", "GPU", f"`{G.short_kernel_name(CUTLASS)}`", "1", "30.0"],
        ["ours", "GPU", f"`{G.short_kernel_name(FILL)}`", "1", "2.0"],
        ["ours", "GPU", "`Memset (Device)`", "1", "1.0"],
        ["ours", "GPU", "`Memcpy HtoD (Pageable -> Device)`", "0.5", "0.5"],
        ["ours", "GPU", "**total**", "3.5", "33.5"],
        ["ours", "host", "whole call", "1", "100.0"],
        ["ours", "host", "runtime: `cudaLaunchKernel`", "2", "18.0"],
        ["ours", "host", "runtime: `cudaMemsetAsync`", "1", "2.0"],
        ["ours", "host", "torch: `aten::zeros`", "1", "20.0"]]


@pytest.mark.parametrize("name,short", [
    ("void (anonymous namespace)::quantize_rows_kernel<__nv_bfloat16, 256>(const __nv_bfloat16*, signed char*, int)",
     "quantize_rows_kernel<__nv_bfloat16, 256>"),
    ("void ckc::int8_dequant_kernel<(int)2>(const signed char*, const float*, void*, long)",
     "int8_dequant_kernel<(int)2>"),
    ("_quantize_rowwise_kernel", "_quantize_rowwise_kernel"),                              # Triton's
    ("nvjet_tst_128x256_64x4_2x1_v_bz_coopB_NTN", "nvjet_tst_128x256_64x4_2x1_v_bz_coopB_NTN"),  # cuBLAS's
    ("Memcpy DtoD (Device -> Device)", "Memcpy DtoD (Device -> Device)"),
    ("Memset (Device)", "Memset (Device)"),
])
def test_short_kernel_name(name, short):
    assert G.short_kernel_name(name) == short


def test_short_kernel_name_cuts_a_long_name_in_the_middle():
    short = G.short_kernel_name(CUTLASS)
    assert len(short) == G.KERNEL_NAME_CHARS
    assert short.startswith("Kernel2<cutlass_80_tensorop_i16832gemm_s8") and short.endswith("_long_epilogue>")
    assert "..." in short and "Params" not in short and "::" not in short


def test_breakdown_section():
    ours = G.summarize_profile(fake_profile(), "int8_linear 1x3072x3072", "ours", 2)
    triton = G.summarize_profile(one_call(0), "int8_linear 1x3072x3072", "triton", 1)
    items = [ours, G.Breakdown("int8_linear 1x3072x3072", "cuda", note="not registered by this backend"), triton,
             G.Breakdown("scaled_mm_nvfp4 4096x5120x14336", "", note="not on this GPU: needs compute capability 10.0+")]
    text = G.breakdown_section(items)
    assert "\n#### int8_linear 1x3072x3072\n\n| impl | side | name | count/call | us/call |\n" in text
    lines = text.splitlines()
    totals = [line for line in lines if "**total**" in line]
    assert totals == ["| ours | GPU | **total** | 3.5 | 33.5 |", "| triton | GPU | **total** | 3 | 33.0 |"]
    assert lines.index(totals[0]) < lines.index(totals[1])  # ours first, then the backends
    assert "- cuda: not registered by this backend\n" in text
    assert "#### scaled_mm_nvfp4 4096x5120x14336\n\n- not on this GPU: needs compute capability 10.0+\n" in text
    # the full name of each shortened kernel, once
    assert text.count(f"- `{G.short_kernel_name(CUTLASS)}`: `{CUTLASS}`") == 1
    assert f"`{FILL}`" in text and "- `Memset (Device)`" not in text
    assert G.breakdown_section([]) == "No call was profiled (see step e under Steps).\n"


def test_summarize_profile_reads_torch_profiler_events():
    """The attributes summarize_profile reads, from the real profiler (host side: no GPU here)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    x = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            with record_function(G.CALL_LABEL):
                torch.zeros(3) + x.sum()
        x.mul(2)  # outside the calls
    b = G.summarize_profile(list(prof.events()), "c", "ours", 3)
    host = {name: (kind, count) for kind, name, count, _ in b.host}
    assert host["aten::zeros"] == ("torch", 3) and host["aten::sum"] == ("torch", 3)
    assert "aten::empty" not in host and "aten::mul" not in host  # nested in aten::zeros; outside the calls
    assert b.gpu == [] and b.wrapper_us > sum(us for *_, us in b.host)


def test_unprofiled_calls_get_a_note():
    seen = [G.Breakdown(G.call_name(*G.BREAKDOWN_CALLS[0]), "ours", 5)]
    missing = G.unprofiled(seen)
    assert [b.call for b in missing] == [G.call_name(op, shape) for op, shape in G.BREAKDOWN_CALLS[1:]]
    assert all(b.note.startswith("not profiled") and b.calls == 0 for b in missing)


def test_read_breakdowns_round_trip_drops_a_line_cut_short(tmp_path):
    original = G.summarize_profile(fake_profile(), "c", "ours", 2)
    path = tmp_path / "breakdowns.jsonl"
    path.write_text(json.dumps({"kind": "breakdown", **dataclasses.asdict(original)}) + "\n"
                    + '{"kind": "breakdown", "call": "in')
    assert G.read_breakdowns(str(path)) == [original]


def fake_worker(rc):
    """A stand-in for the profile worker: writes one Breakdown to its output file, then exits with rc."""
    record = {"kind": "breakdown", **dataclasses.asdict(G.Breakdown(G.call_name(*G.BREAKDOWN_CALLS[0]), "ours", 5))}
    code = f"import sys; open(sys.argv[1], 'a').write({json.dumps(record)!r} + '\\n'); print('boom'); sys.exit({rc})"
    return lambda out, args, budget: [sys.executable, "-c", code, out]


@pytest.mark.parametrize("rc,status,detail", [
    (0, G.PASSED, "1 of 7 calls profiled; 6 notes (see Kernel breakdown)"),
    (3, G.INCOMPLETE, "exit status 3; 1 of 7 calls profiled; 6 notes (see Kernel breakdown)"),
], ids=["finished", "stopped"])
def test_step_profile(monkeypatch, rc, status, detail):
    monkeypatch.setattr(G, "profile_command", fake_worker(rc))
    ctx = ctx_with(100)
    outcome = G.step_profile(ctx, 60)
    assert (outcome.status, outcome.detail) == (status, detail)
    assert ("boom" in outcome.log_tail) == (rc != 0)
    assert len(ctx.breakdowns) == len(G.BREAKDOWN_CALLS) and ctx.breakdowns[0].calls == 5


def test_report_ends_with_the_kernel_breakdown():
    items = [G.summarize_profile(fake_profile(), "int8_linear 1x3072x3072", "ours", 2)]
    text = G.report({"GPU": "NVIDIA H200, compute capability 9.0"}, "c", G.parse_args([]), [], [], {}, [], items)
    assert text.index("### Targets") < text.index("### Kernel breakdown (torch.profiler)")
    assert "| ours | GPU | **total** | 3.5 | 33.5 |" in text
    assert "No call was profiled" in G.report({"GPU": "x"}, "c", G.parse_args([]), [], [], {})


# ---- fault checks (bench_faults.py) ----------------------------------------------------------------

FAULTS_REPORT = """### Flight record: host cost per op whose kernel carries its mark, launch mode (on minus off)

| device | completion words | on ns | off ns | record cost ns | target ns |
|---|---|---:|---:|---:|---:|
| emulated | file | 2048 | 1649 | 398 | 1000 (within) |
| NVIDIA H200 | pinned | 5210 | 3900 | 1310 | 1000 (OVER) |
"""


def test_faults_summary_gives_the_gpu_row():
    assert G.faults_summary(FAULTS_REPORT) == ("flight record on NVIDIA H200 (pinned words): 1310 ns per op in "
                                               "launch mode, target 1000 (OVER)")
    # bench_faults' report from a machine without a GPU
    cpu_report = (ROOT / "benchmarks" / "results" / "faults_cpu.md").read_text()
    assert "| emulated | file |" in cpu_report
    assert G.faults_summary(cpu_report) == "no GPU row in its flight record cost table"


def test_step_faults(monkeypatch, tmp_path):
    def fake_bench_faults(out):  # writes its report where gpu_check asks, as bench_faults --out does
        return [sys.executable, "-c", f"import sys; open(sys.argv[1], 'w').write({FAULTS_REPORT!r})", out]

    monkeypatch.setattr(G, "RESULTS_DIR", tmp_path / "results")
    monkeypatch.setattr(G, "faults_command", fake_bench_faults)
    monkeypatch.setattr(G.torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    outcome = G.step_faults(ctx_with(100), 60)
    path = tmp_path / "results" / "faults_nvidia-h200.md"
    assert outcome.status == G.PASSED and path.read_text() == FAULTS_REPORT
    assert outcome.detail == f"{path}; {G.faults_summary(FAULTS_REPORT)}"
    monkeypatch.setattr(G, "faults_command", lambda out: [sys.executable, "-c", "raise SystemExit(4)"])
    assert G.step_faults(ctx_with(100), 60).status == G.FAILED


def test_faults_command_is_bench_faults_cli():
    cmd = G.faults_command("out.md")
    assert cmd[1:] == [str(ROOT / "benchmarks" / "bench_faults.py"), "--out", "out.md"]
    assert '"--out"' in (ROOT / "benchmarks" / "bench_faults.py").read_text()


# ---- the profile worker's plumbing, with the GPU parts faked --------------------------------------

def test_profile_call_turns_every_failure_into_a_note(monkeypatch):
    def fake_profile_events(fn, args, warmup, calls):
        return fn()

    def triton_fails():
        raise RuntimeError("PTXAS error")

    backends = {"cuda": {"available": False, "reason": "Extension file not found", "ops": []},
                "triton": {"available": True, "reason": None, "ops": ["int8_linear"]}}
    monkeypatch.setattr(G, "profile_events", fake_profile_events)
    monkeypatch.setattr(G, "breakdown_arguments", lambda op, shape, ours: ((), ()))
    monkeypatch.setattr(G, "their_implementation",
                        lambda backends, b, op, args: (None, None) if b == "cuda" else (triton_fails, None))
    ours = SimpleNamespace(int8_linear=fake_profile)
    items = G.profile_call("int8_linear", (1, 3072, 3072), ours, backends, 3)
    assert [(b.impl, b.calls, b.note) for b in items] == [
        ("ours", G.BREAKDOWN_CALLS_PER_PROFILE, ""),
        ("cuda", 0, "comfy_kitchen cuda is unavailable: Extension file not found"),
        ("triton", 0, "RuntimeError: PTXAS error")]
    assert items[0].gpu[0] == [CUTLASS, 2, 60]

    monkeypatch.setattr(G, "breakdown_arguments", lambda op, shape, ours: None)
    (item,) = G.profile_call("scaled_mm_nvfp4", (4096, 5120, 14336), ours, backends, 3)
    assert (item.impl, item.note) == ("", "not on this GPU: needs compute capability 10.0+")

    def no_memory(op, shape, ours):
        raise MemoryError("x")

    monkeypatch.setattr(G, "breakdown_arguments", no_memory)
    (item,) = G.profile_call("int8_linear", (4096, 5120, 14336), ours, backends, 3)
    assert item.note == "no arguments: MemoryError: x"


@pytest.mark.parametrize("budget,profiled", [(60, len(G.BREAKDOWN_CALLS)), (-1, 0)], ids=["in-time", "no-time"])
def test_profile_worker_writes_a_record_per_implementation_until_its_budget(monkeypatch, tmp_path, budget, profiled):
    def no_comfy_kitchen():
        raise ModuleNotFoundError("No module named 'comfy_kitchen'")

    seen_backends = []

    def fake_profile_call(op, shape, ours, backends, warmup):
        seen_backends.append(backends)
        return [G.Breakdown(G.call_name(op, shape), "ours", 5)]

    monkeypatch.setattr(G, "cuda_ops", lambda: SimpleNamespace())
    monkeypatch.setattr(G, "backend_status", no_comfy_kitchen)
    monkeypatch.setattr(G, "profile_call", fake_profile_call)
    path = tmp_path / "breakdowns.jsonl"
    args = G.parse_args(["--profile-worker", str(path), "--budget", str(budget)])
    assert G.profile_worker(args) == 0
    items = G.read_breakdowns(str(path))
    assert [b.call for b in items] == [G.call_name(op, shape) for op, shape in G.BREAKDOWN_CALLS][:profiled]
    # without comfy_kitchen, ours are still profiled and the backends say why they are not
    assert all(b[name]["reason"] == "ModuleNotFoundError: No module named 'comfy_kitchen'"
               for b in seen_backends for name in G.BACKENDS)


def test_code_cell_keeps_the_table_whole():
    assert G.code_cell("kernel<int>") == "`kernel<int>`"
    assert G.code_cell("a|b") == "`a\\|b`"  # a pipe would end the cell
