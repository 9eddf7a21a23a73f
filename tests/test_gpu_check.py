# SPDX-License-Identifier: Apache-2.0
"""benchmarks/gpu_check.py and its parts (benchmarks/gpucheck), with fakes instead of a GPU:
the timing arithmetic on a simulated GPU timeline, the targets, the records, the report, the
step budget, the profiler's attribution, the model lookup and the commit stamp."""
import io
import json
from dataclasses import asdict
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch.autograd import DeviceType

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import carry_comfy_kitchen  # noqa: E402
import gpu_check  # noqa: E402
from gpucheck import bench, model, profile, records, report, steps, targets, timing, workload  # noqa: E402
from gpucheck.records import Kernels, Row  # noqa: E402


# ---- timing, on a simulated GPU ----

class FakeGpu:
    """A host clock and one stream's GPU timeline, in milliseconds.  Work queued at host time
    t starts when the GPU is free and no earlier than t; an event completes when the GPU gets
    to it; a call costs the host `host_ms` and the GPU `gpu_ms`."""

    def __init__(self, host_ms: float, gpu_ms: float):
        self.t = 0.0          # host
        self.free = 0.0       # when the GPU has done everything queued
        self.host_ms, self.gpu_ms = host_ms, gpu_ms
        self.spins = []

    def _queue(self, ms: float) -> float:
        start = max(self.free, self.t)
        self.free = start + ms
        return self.free

    def call(self, i):
        self.t += self.host_ms
        self._queue(self.gpu_ms)

    def sync(self):
        self.t = max(self.t, self.free)

    def spin(self, ms):
        self.spins.append(ms)
        self._queue(ms)

    def mark(self):
        return self._queue(0.0)

    def reached(self, mark):
        return self.t >= mark

    def elapsed_ms(self, a, b):
        return b - a

    def now(self):
        return self.t / 1e3


def test_a_gpu_bound_call_is_timed_by_the_gpu_and_the_host_apart():
    gpu = FakeGpu(host_ms=0.010, gpu_ms=0.050)
    t = timing.time_queued(gpu.call, gpu, calls=20, rounds=3, spin_ms=1.0)
    assert t.ahead and t.rounds == 3
    assert t.gpu_us == pytest.approx(50.0) and t.host_us == pytest.approx(10.0)


def test_a_host_bound_call_gets_a_longer_spin_and_its_gpu_time():
    """The host needs 2 ms to queue 20 calls: a 0.5 ms spin leaves the GPU waiting for the host
    (the round does not count), the spin grows, and the GPU's own 5 us per call comes out."""
    gpu = FakeGpu(host_ms=0.100, gpu_ms=0.005)
    t = timing.time_queued(gpu.call, gpu, calls=20, rounds=3, spin_ms=0.5)
    assert t.ahead and t.rounds == 3
    assert t.gpu_us == pytest.approx(5.0) and t.host_us == pytest.approx(100.0)
    assert gpu.spins[0] == 0.5 and gpu.spins[-1] >= 4.0 and t.spin_ms >= 4.0


def test_without_a_long_enough_spin_the_time_is_the_hosts_and_is_flagged():
    """What plain event timing measures: the host's 100 us per call, flagged as not ahead."""
    gpu = FakeGpu(host_ms=0.100, gpu_ms=0.005)
    t = timing.time_queued(gpu.call, gpu, calls=20, rounds=3, spin_ms=0.0, max_spin_ms=0.0)
    assert not t.ahead
    assert t.gpu_us == pytest.approx(100.0, rel=0.01)


def test_warm_up_and_the_first_spin():
    gpu = FakeGpu(host_ms=0.2, gpu_ms=1.0)
    assert timing.warm_up(gpu.call, gpu, 4) == pytest.approx(0.2e-3)
    assert timing.first_spin_ms(0.2e-3, 20) == pytest.approx(12.0)      # 3x the host's 4 ms
    assert timing.first_spin_ms(1e-6, 20) == 1.0                       # at least 1 ms
    assert timing.first_spin_ms(1.0, 20) == timing.MAX_SPIN_MS


# ---- targets ----

def row(op="quantize_int8_rowwise", m=4096, k=3072, n=0, **gpu_us):
    host = gpu_us.pop("host", None)
    r = Row(op, m, k, n, nbytes=10_000_000, gpu_us=dict(gpu_us))
    if host is not None:
        r.host_us["ours"] = host
    return r


def by_target(r: Row) -> dict:
    return {c.target: c for c in targets.checks(r)}


def test_checks_of_a_quantizer_row():
    r = row(ours=100.0, copy=85.0, cuda=120.0, triton=110.0, ours_flight_off=99.0, host=9.0)
    r.model_us = 140.0
    c = by_target(r)
    assert c["bandwidth"].value == pytest.approx(0.85) and c["bandwidth"].met
    assert c["speed"].value == pytest.approx(1.10) and c["speed"].met and "triton" in c["speed"].text
    assert c["host"].value == 9.0 and not c["host"].met                # over 8 us
    assert c["flight"].value == pytest.approx(100 / 99 - 1) and c["flight"].met
    assert c["model"].value == pytest.approx(0.4) and not c["model"].met


def test_checks_that_do_not_apply_are_left_out():
    small = by_target(row(m=1, ours=10.0, copy=2.0, ours_flight_off=5.0))
    assert "bandwidth" not in small and "flight" not in small           # taken at M = 4096 only
    assert "speed" not in small                                          # no backend measured
    lin = by_target(row("int8_linear", 4096, 3072, 3072, ours=200.0, copy=50.0, cuda=150.0, host=14.0))
    assert "bandwidth" not in lin
    assert lin["speed"].value == pytest.approx(0.75) and not lin["speed"].met
    assert lin["host"].met                                               # int8_linear: 15 us


def test_summary_counts_rows_and_names_the_worst():
    rows = [row(k=3072, ours=100.0, copy=90.0), row(k=5120, ours=100.0, copy=60.0), row(m=1, ours=5.0, copy=1.0)]
    summary = {s.target: s for s in targets.summarize(rows)}
    bw = summary["bandwidth"]
    assert (bw.counted, bw.met, bw.result) == (2, 1, "missed")
    assert bw.worst == "60% (quantize_int8_rowwise 4096x5120)"
    assert summary["speed"].result == "not measured" and summary["speed"].worst == "-"


# ---- records ----

def test_records_survive_a_line_cut_short(tmp_path):
    path = tmp_path / "rows.jsonl"
    r = row(ours=1.5, cuda=2.0)
    r.notes["triton"] = "not registered"
    with open(path, "w") as out:
        records.write_record(out, "backends", {"backends": {"cuda": {"available": True}}})
        records.write_record(out, "row", r)
        out.write('{"kind": "row", "op": "cut')
    back = records.read_records(str(path))
    assert len(back) == 2
    assert records.rows_from(back) == [r]
    assert records.of_kind(back, "backends") == [{"backends": {"cuda": {"available": True}}}]


def test_kernels_merge_into_their_rows():
    rows = [row(ours=1.0), row("int8_linear", 1, 3072, 3072, ours=2.0)]
    items = [Kernels("quantize_int8_rowwise", 4096, 3072, 0, "ours", [["k", 1.0, 0.9]]),
             Kernels("int8_linear", 1, 3072, 3072, "triton", [], "PTXASError"),
             Kernels("dequantize_nvfp4", 1, 5120, 0, "ours", [["k", 1.0, 0.1]])]
    orphans = records.merge_kernels(rows, items)
    assert rows[0].kernels == {"ours": [["k", 1.0, 0.9]]}
    assert rows[1].notes == {"profile triton": "PTXASError"}
    assert [o.op for o in orphans] == ["dequantize_nvfp4"]


# ---- report ----

def test_report_tables_show_the_computed_values_and_say_which_time():
    r = row(ours=100.0, copy=80.0, cuda=125.0, triton=130.0, ours_flight_off=100.0, host=6.5)
    r.ahead = {"ours": True, "cuda": False}
    r.graph_us = 97.0
    r.kernels = {"ours": [["void ns::int8_rowwise_kernel<(ckc_float_kind)2>(ckc_params)", 1.0, 99.5]]}
    r.notes = {"triton": "not registered by this backend"}
    text = report.render({"GPU": "NVIDIA H200, compute capability 9.0", "commit": "abc1234 (git)"},
                         [report.StepResult("d", "bench", "passed", 80.0, 135.0, "1 rows")], [r],
                         {"cuda": {"available": True, "reason": None, "ops": ["quantize_int8_rowwise"]}})
    assert "## GPU check: NVIDIA H200" in text and "- commit: abc1234 (git)" in text
    assert "### GPU time per call (us, host running ahead)" in text and "### Host time per call (us)" in text
    assert "### GPU time per kernel (us per call, torch.profiler)" in text
    line = next(ln for ln in text.splitlines() if ln.startswith("| quantize_int8_rowwise | 4096x3072 | 10 |"))
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[3:9] == ["100", "97", "125*", "130", "80", "80%"]       # '*': cuda had no round ahead
    assert cells[9] == "1.25x" and "bandwidth 80% ok" in cells[-1] and "host 6.5 us ok" in cells[-1]
    assert "`int8_rowwise_kernel<(ckc_float_kind)2>` x1 99.5" in text
    assert "| d. bench | passed | 80.0 s | 135 s | 1 rows |" in text
    assert "- triton quantize_int8_rowwise (4096x3072): not registered by this backend" in text


def test_report_without_rows_says_so():
    assert "No rows were measured." in report.render({}, [], [], {})


# ---- steps and the time budget ----

def test_the_quick_plan_fits_eight_minutes_with_memcheck():
    """The first GPU run's one command: build, tests, memcheck, the timing run, within 450 s (8 minutes with
    the device's start-up and copying on an H100)."""
    assert steps.planned_total(gpu_check.STEPS, quick=True) <= steps.QUICK_BUDGET_S == 450
    assert steps.planned_total(gpu_check.STEPS, quick=False) <= steps.FULL_BUDGET_S
    assert [s.name for s in gpu_check.STEPS if s.quick_s == 0] == []


def test_step_time_keeps_the_later_steps_plans():
    s = [steps.Step("a", "a", "", None, 100, 100), steps.Step("b", "b", "", None, 50, 50, takes_rest=True),
         steps.Step("c", "c", "", None, 40, 40)]
    assert steps.step_time(s, s[0], 400, True) == 150          # capped at 1.5x its plan
    assert steps.step_time(s, s[0], 160, True) == 70           # 160 - 50 - 40
    assert steps.step_time(s, s[1], 300, True) == 260          # takes the rest, less c's 40
    assert steps.step_time(s, s[2], 5, True) == steps.MIN_STEP_S


class FakeSteps:
    """Steps that take a given time on a fake clock: cut at their allowance (as a command is
    killed at its timeout) unless `overrun`."""

    def __init__(self):
        self.now = 0.0
        self.calls = []

    def step(self, key, plan, takes, optional=False, raises=False, overrun=False):
        def run(ctx, allowed):
            self.calls.append((key, allowed))
            if raises:
                raise RuntimeError("bug")
            self.now += takes if overrun else min(takes, allowed)
            return steps.Outcome(steps.PASSED if takes <= allowed else steps.FAILED, f"took {takes}")
        return steps.Step(key, key, "", run, plan, plan, optional=optional)


def test_each_step_gets_what_the_later_plans_leave_within_its_limit():
    f = FakeSteps()
    plan = [f.step("a", 50, 1000), f.step("b", 50, 10), f.step("c", 40, 10, optional=True), f.step("d", 40, 10)]
    ctx = steps.Context(None, deadline=300 + steps.REPORT_RESERVE_S, quick=True, clock=lambda: f.now)
    results = steps.run_steps(ctx, plan, log=lambda line: None)
    assert f.calls == [("a", 75), ("b", 75), ("c", 60), ("d", 60)]
    assert [r.status for r in results] == ["failed", "passed", "passed", "passed"]
    assert [r.budget_s for r in results] == [75, 75, 60, 60] and results[0].seconds == 75


def test_when_the_budget_is_used_up_the_later_steps_do_not_run():
    f = FakeSteps()
    plan = [f.step("a", 50, 290, overrun=True), f.step("b", 50, 10), f.step("c", 40, 10, optional=True),
            f.step("d", 40, 10)]
    ctx = steps.Context(None, deadline=300 + steps.REPORT_RESERVE_S, quick=True, clock=lambda: f.now)
    results = steps.run_steps(ctx, plan, log=lambda line: None)
    assert [r.status for r in results] == ["failed", "failed", "skipped", "failed"]
    assert [key for key, _ in f.calls] == ["a"]
    assert results[1].detail == "not run: 10 s of the time budget left"
    assert steps.exit_status(results) == 1


def test_a_bug_in_a_step_is_reported_and_the_next_runs():
    f = FakeSteps()
    plan = [f.step("a", 20, 0, optional=True, raises=True), f.step("b", 20, 5, raises=True), f.step("c", 20, 5)]
    results = steps.run_steps(steps.Context(None, 1000, True, clock=lambda: f.now), plan, log=lambda line: None)
    assert [r.status for r in results] == ["incomplete", "failed", "passed"]
    assert results[1].detail == "RuntimeError: bug"


def test_dry_run_prints_the_budget(capsys):
    assert gpu_check.main(["--dry-run", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "budget 450 s: fits" in out and "compute-sanitizer --tool memcheck" in out
    assert "--iterations 20000" in out and "--rounds 3" in out      # --quick: 3 rounds, passed on
    assert "--rounds 5" in " ".join(gpu_check.worker_command("bench", "x", gpu_check.parse_args([]), "9"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_without_a_gpu_nothing_runs(capsys):
    assert gpu_check.main(["--quick"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


# ---- the profiler's attribution ----

def event(name, start, end, device=DeviceType.CUDA):
    return SimpleNamespace(name=name, device_type=device, time_range=SimpleNamespace(start=start, end=end),
                           is_user_annotation=False)


def test_gpu_events_go_to_the_range_they_fall_in():
    events = [event("gpu_check|quantize_nvfp4|ours", 0, 100, DeviceType.CPU),
              event("gpu_check|quantize_nvfp4|triton", 100, 200, DeviceType.CPU),
              event("cudaLaunchKernel", 1, 2, DeviceType.CPU),
              event("nvfp4_quant_kernel", 10, 16), event("nvfp4_quant_kernel", 20, 26), event("memset", 30, 31),
              event("_quantize_kernel", 120, 130), event("gpu_check|quantize_nvfp4|ours", 5, 60)]  # its GPU shadow
    got = profile.attribute(events, calls=2)
    assert got[("quantize_nvfp4", "ours")] == [["nvfp4_quant_kernel", 1.0, 6.0], ["memset", 0.5, 0.5]]
    assert got[("quantize_nvfp4", "triton")] == [["_quantize_kernel", 0.5, 5.0]]


def test_short_kernel_names():
    assert profile.short_kernel_name("void ns::int8_gemv_kernel(ckc_int8_linear_params, bool)") == "int8_gemv_kernel"
    assert profile.short_kernel_name("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD (Device -> Device)"
    long = "void cutlass::Kernel<" + "x" * 200 + ">(Params)"
    assert len(profile.short_kernel_name(long)) == profile.KERNEL_NAME_CHARS


# ---- the model, the workload, the commit ----

def test_model_gpu_and_prediction():
    assert model.model_gpu("NVIDIA H200", (9, 0)) == "h200"
    assert model.model_gpu("NVIDIA GeForce RTX 5070 Ti", (12, 0)) == "rtx5070ti"
    assert model.model_gpu("NVIDIA GeForce RTX 4090", (8, 9)) == "rtx5070ti"
    seen = {}

    def predict(op, m, k, dtype="bfloat16", gpu="h200", n=None, group=256):
        seen.update(op=op, m=m, k=k, dtype=dtype, gpu=gpu, n=n, group=group)
        return 0.25

    assert model.predict_us(predict, "int8_linear", 4096, 3072, 5120, "h200") == 250.0
    assert seen == {"op": "int8_linear", "m": 4096, "k": 3072, "dtype": "bfloat16", "gpu": "h200", "n": 5120,
                    "group": 256}
    assert model.predict_us(predict, "quantize_nvfp4", 1, 3072, 0, "h200") == 250.0 and seen["n"] is None
    assert model.predict_us(None, "quantize_nvfp4", 1, 3072, 0, "h200") is None
    assert model.predict_us(lambda *a, **k: None, "quantize_nvfp4", 1, 3072, 0, "h200") is None


def test_rows_are_measured_targets_first_and_inputs_span_the_l2():
    assert not any(op == "scaled_mm_nvfp4" for op, *_ in bench.plan_rows((9, 0)))
    rows = bench.plan_rows((10, 0))
    ms = [m for op, m, k, n in rows]
    first_linear = next(i for i, r in enumerate(rows) if r[0] in workload.LINEAR_OPS)
    assert set(ms[:first_linear]) == {4096} and ms[-1] == 1
    assert {op for op, *_ in rows} == set(workload.OPS) | set(workload.LINEAR_OPS) | set(workload.W4A8_OPS)
    assert rows[-len(workload.w4a8_shapes()):] == [("w4a8_int8_linear", *s) for s in workload.w4a8_shapes()]
    assert {(m, k) for op, m, k, n in rows if n == 0} == {(m, k) for m in (4096, 1) for k in (3072, 5120, 14336)}
    assert {m for op, m, k, n in rows if op == "int8_linear"} == {1, 8, 256, 1024, 4096}  # 8 and 1: the GEMV
    assert workload.input_sets(40 << 20, 50 << 20) == 4 and workload.input_sets(200 << 20, 50 << 20) == 1
    assert workload.input_sets(10, 50 << 20) == workload.MAX_SETS


def test_the_commit_comes_from_git_or_the_stamp(tmp_path):
    stamp = {"commit": "abc1234", "dirty": "0", "written": "2026-12-01 10:00"}
    assert gpu_check.source_commit("abc1234", stamp) == "abc1234 (git)"
    assert gpu_check.source_commit("", stamp) == "abc1234 (stamp, stamped 2026-12-01 10:00; no git repository here)"
    assert gpu_check.source_commit("dc7413c-dirty", {**stamp, "dirty": "1"}).startswith("abc1234-dirty (stamp")
    assert gpu_check.source_commit("", {}) == "unknown"
    written = carry_comfy_kitchen.write_stamp(tmp_path)
    back = gpu_check.read_stamp(tmp_path / "SOURCE")
    assert written.startswith(back["commit"]) and back["dirty"] in ("0", "1") and back["written"]


def test_faults_summary_reads_the_gpu_rows():
    text = io.StringIO("| emulated | file | 900 | 500 | 400 | 1000 (within) |\n"
                       "| NVIDIA H200 | pinned | 1500 | 800 | 700 | 1000 (within) |\n").getvalue()
    assert gpu_check.faults_summary(text) == ("flight record on NVIDIA H200 (pinned words): 700 ns per op, "
                                              "target 1000 (within)")
    assert gpu_check.faults_summary("") == "no GPU row in its flight record cost table"


def test_worker_records_are_plain_json(tmp_path):
    path = tmp_path / "k.jsonl"
    with open(path, "w") as out:
        records.write_record(out, "kernels", Kernels("int8_linear", 1, 3072, 3072, "ours", [["g", 1.0, 2.0]]))
    assert json.loads(path.read_text())["impl"] == "ours"


# ---- the benchmark worker's measuring code, on the CPU with a clock that never waits ----

class HostClock:
    """Every call done when made; the GPU 'time' is the host's, always ahead."""

    def __init__(self):
        self.t = 0.0

    def sync(self):
        pass

    def spin(self, ms):
        pass

    def mark(self):
        self.t += 1e-3
        return self.t

    def reached(self, mark):
        return False

    def elapsed_ms(self, a, b):
        return (b - a) * 1e3

    def now(self):
        return self.t


@pytest.fixture
def on_cpu(monkeypatch):
    monkeypatch.setattr(workload, "DEVICE", "cpu")
    monkeypatch.setattr(bench, "set_flight", lambda on: None)


@pytest.mark.parametrize("op", workload.OPS)
def test_every_op_row_is_measured_for_ours_and_the_copy(on_cpu, op):
    from comfy_kitchen_c import ops

    cfg = bench.Config(calls=2, rounds=1, warmup=1, graph=False)
    r = bench.measure_op(op, 4096 if op == "quantize_int8_rowwise" else 2, 512, ops,
                         workload.no_backends("none here"), HostClock(), cfg, l2_bytes=1 << 20)
    at_target = {"ours_flight_off", "ours_all_marks_riding"} if r.m == 4096 else set()
    assert set(r.gpu_us) == {"ours", "copy"} | at_target, r.notes
    assert r.ahead["ours"] and r.host_us["ours"] >= 0 and not r.notes
    assert r.nbytes >= r.m * 512 * 3  # at least a bfloat16 input and int8 codes, or the reverse


def test_the_linear_row_is_measured(on_cpu):
    from comfy_kitchen_c import ops

    cfg = bench.Config(calls=2, rounds=1, warmup=1, graph=False)
    r = bench.measure_linear("int8_linear", 3, 256, 64, ops, workload.no_backends("none here"), HostClock(), cfg,
                             l2_bytes=1 << 20)
    assert set(r.gpu_us) == {"ours", "copy"} and r.shape == "3x256x64"
    x, w, ws, bias = (3 * 256 * 2, 64 * 256, 64 * 4, 64 * 2)
    assert r.nbytes == x + w + ws + bias + 3 * 64 * 2
    assert bench.measure_linear("scaled_mm_nvfp4", 3, 256, 64, ops, {}, HostClock(), cfg, 1 << 20) is None


def test_the_profile_covers_every_implementation_of_a_shape(on_cpu):
    from comfy_kitchen_c import ops

    calls, notes = profile.group_items((2, 512, 0), workload.OPS, ops, workload.no_backends("none here"))
    assert {(op, impl) for op, impl, _ in calls} == {(op, i) for op in workload.OPS for i in ("ours", "copy")}
    assert not notes
    kernels, failure, dropped = profile.profile_group(calls)
    assert failure is None and not dropped and set(kernels) == {(op, impl) for op, impl, _ in calls}


def test_an_implementation_that_cannot_run_leaves_the_others_profiled(on_cpu):
    """The H200 run at 1cdf9a7 lost its whole profile to triton's quantize_nvfp4, which does
    not compile for sm_90: the failing call is dropped with its reason, the rest profiled."""
    from comfy_kitchen_c import ops

    calls, _ = profile.group_items((2, 512, 0), ("quantize_int8_rowwise",), ops, workload.no_backends("none here"))

    def broken(i):
        raise RuntimeError("PTXAS error: not supported on .target 'sm_90a'")

    kernels, failure, dropped = profile.profile_group(calls + [("quantize_nvfp4", "triton", broken)])
    assert failure is None and set(kernels) == {(op, impl) for op, impl, _ in calls}
    assert list(dropped) == [("quantize_nvfp4", "triton")] and "sm_90a" in dropped[("quantize_nvfp4", "triton")]


def test_the_bench_and_profile_steps_read_their_workers_records(monkeypatch):
    rows = [row(ours=10.0), row(k=5120)]
    rows[1].notes["ours"] = "RuntimeError: boom"
    worker_output = {
        "bench": [{"kind": "backends", "backends": {"triton": {"available": True}}},
                  {"kind": "device", "model_gpu": "h200", "model": True},
                  *({"kind": "row", **asdict(r)} for r in rows)],
        "profile": [{"kind": "kernels", **asdict(Kernels("quantize_int8_rowwise", 4096, 3072, 0, "ours",
                                                                  [["k", 1.0, 9.0]]))}],
    }
    monkeypatch.setattr(gpu_check, "run_worker", lambda kind, ctx, timeout: ("cmd", 0, "", worker_output[kind]))
    ctx = steps.Context(None, 1000, True, data={"capability": (9, 0)})
    outcome = gpu_check.step_bench(ctx, 100)
    assert outcome.status == steps.FAILED
    assert outcome.detail == f"2 of {len(bench.plan_rows((9, 0)))} rows measured; our op failed in 1 rows"
    assert ctx.data["backends"] == {"triton": {"available": True}} and ctx.data["device"]["model_gpu"] == "h200"
    assert gpu_check.step_profile(ctx, 50).status == steps.PASSED
    assert ctx.data["rows"][0].kernels == {"ours": [["k", 1.0, 9.0]]}


def test_main_runs_the_steps_and_writes_the_report(monkeypatch, tmp_path):
    """main's glue on a pretended GPU: the steps run in order with the data they share, and
    the report lands in results/<gpu slug>-<commit>/report.md; a failed step makes the exit status 1."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.version, "cuda", "13.0")
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setattr(gpu_check, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path.parent)
    monkeypatch.setattr(gpu_check, "gpu_info", lambda torch, command, device: {"GPU": "NVIDIA H200", "command": command,
                                                                             "commit": "abc1234 (stamp)"})
    seen = []

    def bench_step(ctx, allowed):
        seen.append(("bench", ctx.data["arch"], ctx.quick))
        ctx.data["rows"] = [row(ours=10.0, copy=9.0)]
        return steps.Outcome(steps.PASSED, "1 rows")

    monkeypatch.setattr(gpu_check, "STEPS", [
        steps.Step("a", "build", "", lambda ctx, t: steps.Outcome(steps.FAILED, "nvcc missing"), 10, 10),
        steps.Step("d", "bench", "", bench_step, 10, 10, takes_rest=True)])
    assert gpu_check.main(["--quick", "--no-build"]) == 1
    assert seen == [("bench", "90", True)]
    text = (tmp_path / "nvidia-h200-abc1234" / "report.md").read_text()
    assert "| a. build | failed |" in text and "nvcc missing" in text
    assert "| quantize_int8_rowwise | 4096x3072 |" in text and "bandwidth 90% ok" in text
    assert "python benchmarks/gpu_check.py --quick --no-build" in text
