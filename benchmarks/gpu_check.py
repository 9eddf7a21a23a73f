# SPDX-License-Identifier: Apache-2.0
"""GPU check of comfy_kitchen_c in one command (under 10 minutes on one GPU): build, CUDA tests,
memcheck, benchmarks against comfy_kitchen's CUDA and Triton backends, a kernel breakdown of a few
calls, the fault checks' cost, and a Markdown report.

    python benchmarks/gpu_check.py            # everything; --quick: fewer benchmark shapes
    python benchmarks/gpu_check.py --dry-run  # the plan: steps, commands, ops and shapes

Steps, each timed; a failed step does not stop the next ones:

  a. build     ``pip install -e . --no-build-isolation`` for the local GPU only
               (COMFY_KITCHEN_C_CUDA_ARCHS=<major><minor> from torch.cuda.get_device_capability()),
               compiler warnings as errors (COMFY_KITCHEN_C_WERROR=1); then checks that the built
               extension has CUDA.  ``--no-build`` skips it.
  b. tests     ``pytest tests/test_cuda.py``: every op on the GPU, bit for bit against the CPU path.
  c. memcheck  the small-shape tests (``-k small``) under ``compute-sanitizer --tool memcheck``:
               out-of-bounds and misaligned accesses, which need not change any result.  torch's
               caching allocator is off for this run (PYTORCH_NO_CUDA_MEMORY_CACHING=1), so that
               every tensor is its own allocation and a read past its end is caught.  Skipped
               when compute-sanitizer is not found (next to nvcc, in the toolkit, or on PATH).
  d. bench     see below; it runs in a subprocess, so that it loads the extension just built and
               a crash in a kernel still leaves the rows measured before it.  It takes the time
               left, as every step does, less what the steps after it keep (their reserve).
  e. profile   the kernel breakdown (below), in a subprocess like bench.  It never fails the check:
               a call it could not profile is a note in its section, a worker that stopped early
               makes the step "incomplete", and it is "skipped" when the time budget is used up.
  f. faults    ``benchmarks/bench_faults.py --out benchmarks/results/faults_<gpu name>.md``: what
               the fault checks (flight record, completion marks, fences) cost the host per op on
               this GPU; the step's detail gives the flight record's cost in launch mode.
  g. report    benchmarks/results/<gpu name>.md: GPU, driver and runtime versions, the command,
               every step's status and time, the tables, the targets and the kernel breakdown.

What the benchmark measures, and why.  For each op and each DiT shape (activations of M rows by K
columns, bfloat16, group size 256):

* ours ms    -- ``comfy_kitchen_c.ops.<op>``: GPU time of one call, from CUDA events recorded
                around it on the current stream; the median of ``--repeats`` calls after
                ``--warmup`` calls.  A call's time includes the host's launch work whenever the GPU
                would otherwise wait for it, which dominates at M = 1: eager inference pays it too.
* ours host ms -- the calling thread's time per call of ours (``--repeats`` calls queued back to
                back, host clock, before synchronizing): the part of "ours ms" at small shapes
                that is host work, not GPU work.
* cuda ms, triton ms -- the same op of comfy_kitchen's "cuda" and "triton" backends
                (``registry.get_implementation(op, backend=...)``), timed alike, when the backend is
                available, registered the op and accepts the call (its constraints are checked
                first); otherwise the cell is "-" and the notes say why.  quantize_and_rotate_rowwise
                gets comfy_kitchen's Hadamard matrix ``_build_hadamard(256, device, dtype)`` there;
                ours gets ``h=None`` and computes the rotation as a butterfly.
* copy ms    -- ``dst.copy_(src)`` on uint8 CUDA tensors moving as many bytes as our op (every
                tensor argument read plus every result written; a copy of N bytes moves 2N): what
                a memory-bound op cannot beat on this GPU.
* of copy BW -- copy ms / ours ms: the fraction of the copy's bandwidth our op reaches.
* vs cuda, vs triton -- their ms / ours ms (above 1: ours is faster).

quantize_and_rotate_nvfp4 (G = 16; an op of ours only) is timed the same way, with the backend
columns timing their quantize_nvfp4 on the same x: what the fused rotation costs over their plain
NVFP4 quantizer.

Targets, computed and reported, never asserted: fused rotate+quantize (quantize_and_rotate_rowwise)
at >= 80% of the copy bandwidth (on shapes with M >= 4096; smaller ones are launch-bound, where the
copy is too) and >= 1.0x comfy_kitchen cuda's speed; quantize_nvfp4 >= 1.0x each backend that has
it; int8_linear >= 0.9x comfy_kitchen cuda's for M >= 256.

The linear ops (after the others, while the budget lasts): int8_linear and, on compute capability
10.0+, scaled_mm_nvfp4, at M in M_VALUES times DiT (K, N) pairs, ours against comfy_kitchen's cuda
and triton backends (the same arguments: ConvRot G = 256, per-channel float32 weight scale,
bfloat16 bias), with each one's peak extra device memory per call (torch.cuda.max_memory_allocated
beyond the allocations before the call and the output).

The kernel breakdown (step e): where a call's time goes.  For each of BREAKDOWN_CALLS (the shapes
furthest from their targets, and M = 1 for the per-call floor; scaled_mm_nvfp4 on compute
capability 10.0+ only), each implementation (ours, comfy_kitchen's cuda and triton where they
take the call) makes ``--warmup`` calls, then BREAKDOWN_CALLS_PER_PROFILE calls under
``torch.profiler`` (CPU and CUDA activities), each inside a ``record_function`` range.  Per call:
every GPU kernel, memcpy and memset (names shortened; the full ones are listed below the tables)
with its count and GPU microseconds, and their total; the host time of the whole call (the
range: the Python wrapper and everything under it), and of the CUDA runtime and driver API calls
and the torch ops inside it, as the profiler reports them.  The profiler adds its own cost to
every host event, so compare the host times with each other and with "ours host ms", not as
absolute figures.

Exit status: 0 when no step failed, 1 when one did, 2 without a CUDA GPU (nothing is run).
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import inspect
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

import torch
from torch.autograd import DeviceType

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"

GROUP = 256
BF16_CODE = 2  # output_dtype_code of bfloat16
M_VALUES = (1, 256, 4096, 32768)
K_VALUES = (3072, 5120, 5376, 14336, 21504)
QUICK_M_VALUES = (1, 4096)
QUICK_K_VALUES = (3072, 14336)
BACKENDS = ("cuda", "triton")
BENCH_OPS = ("quantize_and_rotate_rowwise", "quantize_int8_rowwise", "quantize_int8_convrot_weight",
             "quantize_nvfp4", "dequantize_nvfp4", "dequantize_int8_simple_dtype")
PENDING_OPS: dict[str, str] = {}
# The linear ops: (M, K, N) with M from M_VALUES and DiT (K, N) pairs (issue 3 item 8's sizes).
LINEAR_OPS = ("int8_linear", "scaled_mm_nvfp4")
LINEAR_KN = ((3072, 3072), (5120, 14336), (14336, 5120), (5376, 21504))
QUICK_LINEAR_KN = ((3072, 3072), (14336, 5120))
LINEAR_SPEEDUP_TARGET = 0.9
LINEAR_TARGET_MIN_M = 256
FP4_GEMM_MIN_CC = (10, 0)
# Our ops that no comfy_kitchen backend has, each timed against one of theirs: {ours: theirs}.
COMPARED_OPS = {"quantize_and_rotate_nvfp4": "quantize_nvfp4"}
NVFP4_ROTATE_GROUP = 16
# The kernel breakdown's calls: (op, shape), a shape being (M, K) for a quantizer and (M, K, N) for
# a linear op.  The large shapes are those furthest from their targets in the first H200 run; the
# M = 1 ones show the per-call floor.
BREAKDOWN_CALLS = (("quantize_and_rotate_rowwise", (1, 3072)), ("quantize_and_rotate_rowwise", (4096, 3072)),
                   ("quantize_and_rotate_rowwise", (4096, 14336)), ("quantize_nvfp4", (4096, 3072)),
                   ("int8_linear", (1, 3072, 3072)), ("int8_linear", (4096, 5120, 14336)),
                   ("scaled_mm_nvfp4", (4096, 5120, 14336)))
BREAKDOWN_CALLS_PER_PROFILE = 5
CALL_LABEL = "gpu_check::call"  # the profiler range around each profiled call
KERNEL_NAME_CHARS = 64          # longer kernel names are cut in the middle in the table
# CUDA runtime and driver API calls as the profiler names them: cudaLaunchKernel, cuLaunchKernel,
# cudaMemcpyAsync, cublasLtMatmul (the libraries' calls appear only where they are traced).
RUNTIME_API = re.compile(r"cu(da|blas|blasLt)?[A-Z]")

BANDWIDTH_TARGET = 0.80
BANDWIDTH_TARGET_MIN_M = 4096
SPEEDUP_TARGET = 1.0
HOST = "ours_host"  # Row.ms key of our op's host time per call

TIME_BUDGET_S = 570          # the whole check, under 10 minutes
STEP_CAPS_S = {"build": 300, "tests": 180, "memcheck": 180, "profile": 120, "faults": 120}
# Kept for a step while the steps before it run (bench above all, which takes what is left):
# about what each takes on an H200, worker start-up and the first profiler session included.
STEP_RESERVES_S = {"profile": 45, "faults": 45}
REPORT_RESERVE_S = 10        # kept back for writing the report
MIN_STEP_S = 15              # a step with less time left is not started
WORKER_GRACE_S = 30          # the benchmark stops itself at its budget; killed this much later

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"
INCOMPLETE = "incomplete"  # an optional step that stopped early: not a failure of the check
REPORT_KEY = "g"           # the report's step, after STEPS


# ---- benchmark data and the numbers derived from it ------------------------------------------

class Timed:
    """Milliseconds per implementation in `ms` ("ours" and the others), as Row and LinearRow hold them."""
    ms: dict[str, float | None]

    def ratio(self, numerator: str) -> float | None:
        """numerator's ms / ours ms: a speedup of ours over a backend, or ours' fraction of copy bandwidth."""
        mine, theirs = self.ms.get("ours"), self.ms.get(numerator)
        return theirs / mine if mine and theirs else None


@dataclass
class Row(Timed):
    """One op at one shape: milliseconds per implementation ("ours", "cuda", "triton", "copy";
    None when not measured, with the reason in notes) and the bytes our op moves."""
    op: str
    m: int
    k: int
    nbytes: int
    ms: dict[str, float | None]
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.k}"


@dataclass
class Target:
    label: str
    op: str
    metric: str      # the Row.ratio numerator: "copy" or a backend
    goal: float
    min_m: int = 0   # shapes with fewer rows are not counted
    values: list[tuple[str, float]] = field(default_factory=list)  # (shape, value)

    @property
    def result(self) -> str:
        if not self.values:
            return "not measured"
        return "PASS" if self.worst[1] >= self.goal else "MISS"

    @property
    def worst(self) -> tuple[str, float]:
        return min(self.values, key=lambda sv: sv[1])

    def measure(self, rows: list[Timed]) -> "Target":
        """Takes the target's value on every measured row (of its op, with at least min_m rows) it counts."""
        self.values = [(r.shape, r.ratio(self.metric)) for r in rows
                       if r.op == self.op and r.m >= self.min_m and r.ratio(self.metric) is not None]
        return self


def targets(rows: list[Row]) -> list[Target]:
    """The targets, each with its value on every measured shape it counts."""
    items = [Target(f"fused rotate+quantize >= {BANDWIDTH_TARGET:.0%} of copy bandwidth",
                    "quantize_and_rotate_rowwise", "copy", BANDWIDTH_TARGET, BANDWIDTH_TARGET_MIN_M),
             Target(f"fused rotate+quantize >= {SPEEDUP_TARGET:.1f}x comfy_kitchen cuda",
                    "quantize_and_rotate_rowwise", "cuda", SPEEDUP_TARGET)]
    items += [Target(f"NVFP4 quantize >= {SPEEDUP_TARGET:.1f}x comfy_kitchen {b}", "quantize_nvfp4", b, SPEEDUP_TARGET)
              for b in BACKENDS]
    return [t.measure(rows) for t in items]


# ---- formatting ----------------------------------------------------------------------------

def fmt_ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.4g}"


def fmt_ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def fmt_fraction(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def fmt_goal(t: Target, v: float) -> str:
    return fmt_fraction(v) if t.metric == "copy" else fmt_ratio(v)


def slug(name: str) -> str:
    """A file name from a GPU name: "NVIDIA GeForce RTX 4090" -> "nvidia-geforce-rtx-4090"."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def table(header: list[str], rows: list[list[str]], align: str) -> str:
    """A Markdown table; align has one character per column, l or r."""
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines) + "\n"


def results_table(rows: list[Row]) -> str:
    header = ["op", "M", "K", "MB", "ours ms", "ours host ms", *(f"{b} ms" for b in BACKENDS), "copy ms",
              "of copy BW", *(f"vs {b}" for b in BACKENDS)]
    body = [[r.op, str(r.m), str(r.k), f"{r.nbytes / 1e6:.3g}", fmt_ms(r.ms.get("ours")),
             fmt_ms(r.ms.get(HOST)), *(fmt_ms(r.ms.get(b)) for b in BACKENDS), fmt_ms(r.ms.get("copy")),
             fmt_fraction(r.ratio("copy")), *(fmt_ratio(r.ratio(b)) for b in BACKENDS)] for r in rows]
    return table(header, body, "lrrrrr" + "r" * len(BACKENDS) + "rr" + "r" * len(BACKENDS))


def pending_table() -> str:
    return table(["op", "status"], [[op, status] for op, status in PENDING_OPS.items()], "ll")


def targets_table(items: list[Target]) -> str:
    body = []
    for t in items:
        counted = f"M >= {t.min_m}" if t.min_m else "all"
        if t.values:
            shape, value = t.worst
            worst = f"{fmt_goal(t, value)} ({shape})"
            median = fmt_goal(t, statistics.median(v for _, v in t.values))
            meeting = f"{sum(v >= t.goal for _, v in t.values)}/{len(t.values)}"
        else:
            worst = median = meeting = "-"
        body.append([t.label, t.op, counted, f">= {fmt_goal(t, t.goal)}", worst, median, meeting, t.result])
    return table(["target", "op", "shapes", "goal", "worst (shape)", "median", "shapes meeting", "result"], body,
                 "lllrrrrl")


def notes_list(rows: list[Row]) -> str:
    """Why cells are empty: one line per (implementation, op, reason), with the shapes."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for r in rows:
        for name, note in r.notes.items():
            grouped.setdefault((name, r.op, note), []).append(r.shape)
    return "".join(f"- {name} {op} ({', '.join(shapes)}): {note}\n" for (name, op, note), shapes in grouped.items())


@dataclass
class StepResult:
    key: str
    name: str
    status: str
    seconds: float
    detail: str = ""
    command: str = ""
    log_tail: str = ""


def steps_table(results: list[StepResult]) -> str:
    body = [[f"{r.key}. {r.name}", r.status, f"{r.seconds:.1f} s", r.detail.replace("|", "\\|")] for r in results]
    return table(["step", "status", "time", "detail"], body, "llrl")


def step_logs(results: list[StepResult]) -> str:
    """The commands, and the end of the output of every step that failed."""
    parts = []
    for r in results:
        if r.command:
            parts.append(f"- {r.key}. {r.name}: `{r.command}`\n")
        if r.log_tail:  # only a step with problems keeps its output
            parts.append(f"\n<details><summary>{r.key}. {r.name}: end of output</summary>\n\n```\n"
                         f"{r.log_tail}\n```\n</details>\n\n")
    return "".join(parts)


def exit_status(results: list[StepResult]) -> int:
    return 1 if any(r.status == FAILED for r in results) else 0


# ---- commands ------------------------------------------------------------------------------

def render(cmd: list[str], env: dict[str, str] | None = None) -> str:
    assignments = [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()]
    return " ".join(assignments + [shlex.quote(c) for c in cmd])


def build_command() -> list[str]:
    return [sys.executable, "-m", "pip", "install", "-e", ".", "--no-build-isolation"]


def build_env(arch: str) -> dict[str, str]:
    return {"COMFY_KITCHEN_C_CUDA_ARCHS": arch, "COMFY_KITCHEN_C_WERROR": "1"}


def has_cuda_command() -> list[str]:
    return [sys.executable, "-c", "from comfy_kitchen_c import _C; print(int(_C.HAS_CUDA))"]


def tests_command(*extra: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "tests/test_cuda.py", "tests/test_cuda_linear.py", "-q", *extra]


def memcheck_command(sanitizer: str) -> list[str]:
    # Memory accesses only: CUDA API errors are ours to check, and one is expected and
    # handled (a driver that refuses cudaHostRegister of the file-backed flight record;
    # its completion marks then go to pinned words mirrored into the file).
    return [sanitizer, "--tool", "memcheck", "--report-api-errors", "no", "--error-exitcode", "1",
            *tests_command("-k", "small")]


MEMCHECK_ENV = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}


def bench_command(out: str, args, budget_s: str) -> list[str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--bench-worker", out, "--repeats", str(args.repeats),
           "--warmup", str(args.warmup), "--budget", budget_s]
    return cmd + (["--quick"] if args.quick else [])


def profile_command(out: str, args, budget_s: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--profile-worker", out, "--warmup", str(args.warmup),
            "--budget", budget_s]


def faults_command(out: str) -> list[str]:
    return [sys.executable, str(ROOT / "benchmarks" / "bench_faults.py"), "--out", out]


def faults_path(gpu_slug: str) -> Path:
    return RESULTS_DIR / f"faults_{gpu_slug}.md"


EXE = ".exe" if sys.platform == "win32" else ""


def find_nvcc() -> str | None:
    """Where setup.py finds it: $CUDA_HOME/bin, PATH, /usr/local/cuda/bin."""
    candidates = [os.path.join(os.environ.get("CUDA_HOME", ""), "bin", "nvcc" + EXE), shutil.which("nvcc"),
                  "/usr/local/cuda/bin/nvcc"]
    return next((c for c in candidates if c and os.path.isfile(c)), None)


def find_sanitizer() -> str | None:
    """compute-sanitizer next to nvcc, in the toolkit's compute-sanitizer folder, or on PATH."""
    candidates = []
    nvcc = find_nvcc()
    if nvcc:
        bin_dir = Path(nvcc).resolve().parent
        name = "compute-sanitizer" + EXE
        candidates += [bin_dir / name, bin_dir.parent / "compute-sanitizer" / name]
    candidates.append(shutil.which("compute-sanitizer"))
    return next((str(c) for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


def shapes(quick: bool) -> list[tuple[int, int]]:
    ms, ks = (QUICK_M_VALUES, QUICK_K_VALUES) if quick else (M_VALUES, K_VALUES)
    return [(m, k) for m in ms for k in ks]


def run_command(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """(exit status, or None when killed at the timeout; stdout and stderr together)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
        return proc.returncode, output
    except subprocess.TimeoutExpired:
        if hasattr(os, "killpg"):  # the whole group: pytest under compute-sanitizer, nvcc under pip
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        output, _ = proc.communicate()
        return None, output


def tail(text: str, lines: int = 40) -> str:
    """The end of a failed step's output, after the first lines of any compute-sanitizer
    reports before it: a report's head names the error and the kernel, while the end of
    a long report holds only host frames."""
    all_lines = text.rstrip().splitlines()
    reports = [line for line in all_lines[:-lines]
               if line.startswith("========= ") and "Host Frame" not in line][:20]
    return "\n".join(reports + (["..."] if reports else []) + all_lines[-lines:])


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


# ---- steps ---------------------------------------------------------------------------------

@dataclass
class Outcome:
    status: str
    detail: str = ""
    command: str = ""
    log_tail: str = ""


@dataclass
class Context:
    args: argparse.Namespace
    deadline: float
    arch: str
    rows: list[Row] = field(default_factory=list)
    backends: dict = field(default_factory=dict)
    linear_rows: list[LinearRow] = field(default_factory=list)
    breakdowns: list[Breakdown] = field(default_factory=list)

    def time_left(self) -> float:
        return self.deadline - time.monotonic() - REPORT_RESERVE_S


def command_outcome(cmd: list[str], timeout: float, env: dict[str, str] | None = None,
                    expect: str | None = None) -> Outcome:
    """Runs cmd; passed when it exits 0 and (if given) its last line contains expect."""
    rc, output = run_command(cmd, timeout, env)
    shown = render(cmd, env)
    summary = last_line(output)
    if rc is None:
        return Outcome(FAILED, f"killed after {timeout:.0f} s (time limit)", shown, tail(output))
    if rc != 0:
        return Outcome(FAILED, f"exit status {rc}: {summary}", shown, tail(output))
    if expect and expect not in summary:
        return Outcome(FAILED, f"expected '{expect}' in: {summary}", shown, tail(output))
    return Outcome(PASSED, summary, shown)


def step_build(ctx: Context, timeout: float) -> Outcome:
    if ctx.args.no_build:
        return Outcome(SKIPPED, "--no-build")
    env = build_env(ctx.arch)
    built = command_outcome(build_command(), timeout, env)
    if built.status != PASSED:
        return built
    rc, output = run_command(has_cuda_command(), 60)
    if rc != 0 or output.strip() != "1":
        return Outcome(FAILED, f"the extension was built without CUDA (nvcc: {find_nvcc() or 'not found'}): "
                       f"{last_line(output)}", built.command, tail(output))
    return Outcome(PASSED, f"sm_{ctx.arch}, warnings as errors; _C.HAS_CUDA = 1", built.command)


def step_tests(ctx: Context, timeout: float) -> Outcome:
    # "passed" in pytest's summary: a run where everything was skipped is a failure here.
    return command_outcome(tests_command(), timeout, expect="passed")


def step_memcheck(ctx: Context, timeout: float) -> Outcome:
    sanitizer = find_sanitizer()
    if sanitizer is None:
        return Outcome(SKIPPED, "compute-sanitizer not found (next to nvcc, in the CUDA toolkit, or on PATH)")
    return command_outcome(memcheck_command(sanitizer), timeout, MEMCHECK_ENV, expect="passed")


def run_worker(make_command: Callable[[str, str], list[str]], read: Callable[[str], object],
               timeout: float) -> tuple[list[str], int | None, str, object]:
    """Runs a worker (make_command(its output file, its budget in seconds)) that writes JSON lines
    and stops itself at its budget, timeout less WORKER_GRACE_S; it is killed at timeout.
    (its command, its exit status or None when killed, its output, read(its output file))."""
    budget = max(timeout - WORKER_GRACE_S, MIN_STEP_S)
    fd, path = tempfile.mkstemp(prefix="gpu_check_", suffix=".jsonl")
    os.close(fd)
    try:
        cmd = make_command(path, f"{budget:.0f}")
        rc, output = run_command(cmd, budget + WORKER_GRACE_S)
        return cmd, rc, output, read(path)
    finally:
        os.unlink(path)


def step_bench(ctx: Context, timeout: float) -> Outcome:
    cmd, rc, output, ((ctx.backends, ctx.rows), ctx.linear_rows) = run_worker(
        lambda path, budget: bench_command(path, ctx.args, budget),
        lambda path: (read_bench(path), read_linear_rows(path)), timeout)
    problems = bench_problems(rc, ctx.rows, len(shapes(ctx.args.quick)) * (len(BENCH_OPS) + len(COMPARED_OPS)))
    status = FAILED if problems else PASSED
    detail = "; ".join(problems) or f"{len(ctx.rows)} rows"
    return Outcome(status, detail, render(cmd), tail(output) if problems else "")


def bench_problems(rc: int | None, rows: list[Row], expected: int) -> list[str]:
    problems = []
    if rc is None:
        problems.append("killed at the time limit")
    elif rc != 0:
        problems.append(f"exit status {rc}")
    if len(rows) < expected:
        problems.append(f"{len(rows)} of {expected} rows measured")
    failed = [r for r in rows if r.ms.get("ours") is None]
    if failed:
        problems.append(f"our op failed in {len(failed)} rows (see the notes)")
    return problems


def read_records(path: str) -> list[dict]:
    """The JSON records of a worker's output file, one a line; a line cut short by a crash is left out."""
    records = []
    with open(path) as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def read_bench(path: str) -> tuple[dict, list[Row]]:
    """The worker's backend status and rows; a line cut short by a crash is left out (as are the
    linear rows: read_linear_rows)."""
    backends, rows = {}, []
    for record in read_records(path):
        kind = record.pop("kind")
        if kind == "backends":
            backends = record["backends"]
        elif kind == "row":
            rows.append(Row(**record))
    return backends, rows


def step_profile(ctx: Context, timeout: float) -> Outcome:
    cmd, rc, output, items = run_worker(lambda path, budget: profile_command(path, ctx.args, budget),
                                        read_breakdowns, timeout)
    ctx.breakdowns = items + unprofiled(items)
    profiled = len({b.call for b in items if b.calls})
    notes = sum(1 for b in ctx.breakdowns if b.note)
    detail = f"{profiled} of {len(BREAKDOWN_CALLS)} calls profiled" + (
        f"; {notes} notes (see Kernel breakdown)" if notes else "")
    if rc == 0:
        return Outcome(PASSED, detail, render(cmd))
    stop = "killed at the time limit" if rc is None else f"exit status {rc}"
    return Outcome(INCOMPLETE, f"{stop}; {detail}", render(cmd), tail(output))


def step_faults(ctx: Context, timeout: float) -> Outcome:
    path = faults_path(slug(torch.cuda.get_device_name()))
    path.parent.mkdir(parents=True, exist_ok=True)
    outcome = command_outcome(faults_command(str(path)), timeout)
    if outcome.status == PASSED:
        outcome.detail = f"{shown_path(path)}; {faults_summary(path.read_text())}"
    return outcome


# A row of bench_faults' last table: | device | completion words | on ns | off ns | record cost ns | target ns |
FAULTS_COST_ROW = re.compile(r"\| (?P<device>[^|]+?) \| (?P<words>[^|]+?) \| -?\d+ \| -?\d+ \| (?P<cost>-?\d+) \| "
                             r"(?P<target>\d+ \((within|OVER)\)) \|")


def faults_summary(report_text: str) -> str:
    """The flight record's host cost per op on each GPU in bench_faults' report (its emulated
    device rows are measured on the development machine already)."""
    costs = [f"flight record on {m['device']} ({m['words']} words): {m['cost']} ns per op in launch mode, "
             f"target {m['target']}" for m in map(FAULTS_COST_ROW.fullmatch, report_text.splitlines())
             if m and m["device"] != "emulated"]
    return "; ".join(costs) or "no GPU row in its flight record cost table"


class Step(NamedTuple):
    key: str
    name: str
    purpose: str
    run: Callable[[Context, float], Outcome]  # (context, seconds it may take)
    cap_s: float | None                       # None: no cap but the time budget
    reserve_s: float = 0                      # kept for this step while the steps before it run
    optional: bool = False                    # its problems are reported, never a failure of the check


STEPS = [
    Step("a", "build", "build for the local GPU only, warnings as errors", step_build, STEP_CAPS_S["build"]),
    Step("b", "tests", "CUDA tests: every op bit for bit against the CPU path", step_tests, STEP_CAPS_S["tests"]),
    Step("c", "memcheck", "compute-sanitizer memcheck on the small-shape tests", step_memcheck,
         STEP_CAPS_S["memcheck"]),
    Step("d", "bench", "benchmarks against comfy_kitchen cuda, triton and a device copy", step_bench, None),
    Step("e", "profile", "kernel breakdown of a few calls under torch.profiler, ours and comfy_kitchen's",
         step_profile, STEP_CAPS_S["profile"], STEP_RESERVES_S["profile"], optional=True),
    Step("f", "faults", "bench_faults.py: the fault checks' host cost per op on this GPU", step_faults,
         STEP_CAPS_S["faults"], STEP_RESERVES_S["faults"]),
]


def step_time(step: Step, left: float) -> float:
    """Seconds step may take when `left` are left: what is left less the reserves of the steps
    after it (at least MIN_STEP_S), within its cap."""
    reserved = sum(later.reserve_s for later in STEPS if later.key > step.key)  # keys run a, b, c, ...
    share = max(left - reserved, MIN_STEP_S)
    return share if step.cap_s is None else min(step.cap_s, share)


def run_step(ctx: Context, step: Step) -> StepResult:
    print(f"[{step.key}] {step.name} ...", flush=True)
    start = time.monotonic()
    left = ctx.time_left()
    if left < MIN_STEP_S:
        outcome = Outcome(SKIPPED if step.optional else FAILED,
                          f"not run: the {ctx.args.budget:.0f} s time budget is used up")
    else:
        try:
            outcome = step.run(ctx, step_time(step, left))
        except Exception as exc:  # a bug of this script must not hide the other steps' results
            outcome = Outcome(INCOMPLETE if step.optional else FAILED, f"{type(exc).__name__}: {exc}")
    result = StepResult(step.key, step.name, outcome.status, time.monotonic() - start, outcome.detail,
                        outcome.command, outcome.log_tail)
    print(f"[{result.key}] {result.name}: {result.status} ({result.seconds:.1f} s) {result.detail}", flush=True)
    if result.log_tail:
        print("    " + result.log_tail.replace("\n", "\n    "), flush=True)
    return result


# ---- benchmark worker (a subprocess of step d) ---------------------------------------------

def cuda_time_ms(fn: Callable, args: tuple, warmup: int, repeats: int) -> float:
    """Median GPU time of one call, from CUDA events on the current stream."""
    for _ in range(warmup):
        fn(*args)
    events = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(*args)
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in events)


def host_time_ms(fn: Callable, args: tuple, repeats: int) -> float:
    """Host time of one call: `repeats` calls queued back to back, timed on the host clock before
    the stream is synchronized (the queue never fills at these counts): what the Python wrapper,
    the C launcher and the launches cost the calling thread."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn(*args)
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed * 1e3 / repeats


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}"


def try_time(fn: Callable, args: tuple, cfg) -> tuple[float | None, str | None]:
    try:
        return cuda_time_ms(fn, args, cfg.warmup, cfg.repeats), None
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return None, "out of GPU memory"
    except Exception as exc:
        return None, one_line(exc)


def tensors(value) -> list[torch.Tensor]:
    items = value if isinstance(value, (tuple, list)) else (value,)
    return [t for t in items if isinstance(t, torch.Tensor)]


def bytes_moved(args: tuple, result) -> int:
    return sum(t.nbytes for t in tensors(args) + tensors(result))


def op_arguments(ours) -> dict[str, Callable]:
    """{op: x -> (our arguments, their arguments)}; the dequantize ops get codes and scales made
    from x by our quantizers."""
    from comfy_kitchen.tensor.int8_utils import _build_hadamard

    def nvfp4_scale(x):
        return (x.abs().amax().float() / ours.NVFP4_RANGE).reshape(())

    def nvfp4_quantize_args(x):  # M not a multiple of 16 needs pad_16x for comfy_kitchen cuda
        return (x, nvfp4_scale(x), 0.0, x.shape[0] % 16 != 0)

    def nvfp4_dequantize_args(x):
        quantize_args = nvfp4_quantize_args(x)
        qx, block_scales = ours.quantize_nvfp4(*quantize_args)
        return (qx, quantize_args[1], block_scales, torch.bfloat16)

    def same(build):
        return lambda x: (build(x),) * 2

    def nvfp4_rotate_args(x):  # amax * sqrt(G) / (448 * 6) bounds the rotated values
        x_, pts, _, pad = nvfp4_quantize_args(x)
        return (x_, pts * NVFP4_ROTATE_GROUP**0.5, NVFP4_ROTATE_GROUP, pad), nvfp4_quantize_args(x)

    return {
        "quantize_and_rotate_rowwise":
            lambda x: ((x, None, GROUP), (x, _build_hadamard(GROUP, x.device, x.dtype), GROUP)),
        "quantize_int8_rowwise": same(lambda x: (x,)),
        "quantize_int8_convrot_weight": same(lambda x: (x, GROUP)),
        "quantize_nvfp4": same(nvfp4_quantize_args),
        "dequantize_nvfp4": same(nvfp4_dequantize_args),
        "dequantize_int8_simple_dtype": same(lambda x: (*ours.quantize_int8_rowwise(x), BF16_CODE)),
        "quantize_and_rotate_nvfp4": nvfp4_rotate_args,
    }


def backend_status() -> dict:
    """{backend: {"available", "reason", "ops": the benchmarked ops it registered}}."""
    import comfy_kitchen as ck

    status = ck.list_backends()
    result = {}
    for b in BACKENDS:
        info = status.get(b) or {"available": False, "unavailable_reason": "not registered", "capabilities": []}
        usable = info["available"] and not info.get("disabled")
        reason = info.get("unavailable_reason") or ("disabled" if info.get("disabled") else None)
        result[b] = {"available": usable, "reason": reason,
                     "ops": [op for op in BENCH_OPS + LINEAR_OPS if op in info["capabilities"]]}
    return result


def their_implementation(backends: dict, backend: str, op: str, args: tuple) -> tuple[Callable | None, str | None]:
    """(the backend's op, None), or (None, why it cannot be measured; None when the whole backend
    is unavailable, which the report says once)."""
    from comfy_kitchen.registry import registry

    info = backends[backend]
    if not info["available"]:
        return None, None
    if op not in info["ops"]:
        return None, "not registered by this backend"
    impl = registry.get_implementation(op, backend=backend)
    kwargs = dict(inspect.signature(impl).bind(*args).arguments)
    check = registry.validate_backend_for_call(backend, op, kwargs)
    if not check.success:
        return None, f"rejects the call: {check.failed_param}: {check.failure_reason}"
    return impl, None


def time_theirs(backends: dict, backend: str, op: str, args: tuple, cfg) -> tuple[float | None, str | None]:
    try:
        impl, note = their_implementation(backends, backend, op, args)
    except Exception as exc:
        return None, one_line(exc)
    return try_time(impl, args, cfg) if impl else (None, note)


def time_copy(nbytes: int, device: torch.device, cfg) -> tuple[float | None, str | None]:
    """A device copy moving nbytes: nbytes / 2 read and as many written."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device=device)
    return try_time(torch.empty_like(src).copy_, (src,), cfg)


def measure(op: str, x: torch.Tensor, ours, make_args: Callable, backends: dict, cfg,
            their_op: str | None = None) -> Row:
    """Our op against the backends' op of the same name, or their_op (COMPARED_OPS)."""
    m, k = x.shape
    row = Row(op, m, k, 0, dict.fromkeys(("ours", *BACKENDS, "copy")))
    try:
        our_args, their_args = make_args(x)
        row.nbytes = bytes_moved(our_args, getattr(ours, op)(*our_args))
    except Exception as exc:
        row.notes["ours"] = one_line(exc)
        return row
    timings = {"ours": try_time(getattr(ours, op), our_args, cfg),
               **{b: time_theirs(backends, b, their_op or op, their_args, cfg) for b in BACKENDS},
               "copy": time_copy(row.nbytes, x.device, cfg)}
    for name, (ms, note) in timings.items():
        row.ms[name] = ms
        if note:
            row.notes[name] = note
    if row.ms["ours"] is not None:
        row.ms[HOST] = host_time_ms(getattr(ours, op), our_args, cfg.repeats)
    return row


def cuda_ops():
    """comfy_kitchen_c.ops, or None (saying why) when the extension was built without CUDA."""
    import comfy_kitchen_c
    from comfy_kitchen_c import _C

    if not _C.HAS_CUDA:
        print(f"comfy_kitchen_c at {comfy_kitchen_c.__file__} was built without CUDA", file=sys.stderr)
        return None
    return comfy_kitchen_c.ops


def write_record(out, kind: str, record: dict) -> None:
    """One JSON line of a worker's output, flushed: a crash after it keeps it."""
    out.write(json.dumps({"kind": kind, **record}) + "\n")
    out.flush()


def bench_worker(args) -> int:
    """Measures every (shape, op), appending one JSON line per row to args.bench_worker; stops
    when args.budget seconds are up."""
    ours = cuda_ops()
    if ours is None:
        return 1
    deadline = time.monotonic() + args.budget
    backends = backend_status()
    arguments = op_arguments(ours)
    with open(args.bench_worker, "a") as out:
        write_record(out, "backends", {"backends": backends})
        for m, k in shapes(args.quick):
            torch.manual_seed(0)
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            for op in (*BENCH_OPS, *COMPARED_OPS):
                if time.monotonic() > deadline:
                    print(f"time budget of {args.budget:.0f} s used up", file=sys.stderr)
                    return 0
                row = measure(op, x, ours, arguments[op], backends, args, COMPARED_OPS.get(op))
                write_record(out, "row", dataclasses.asdict(row))
                print(f"  {op} {m}x{k}: ours {fmt_ms(row.ms['ours'])} ms", file=sys.stderr, flush=True)
            del x
            torch.cuda.empty_cache()
        if not bench_linear(out, ours, backends, args, deadline):
            print(f"time budget of {args.budget:.0f} s used up", file=sys.stderr)
    return 0


# ---- linear ops: int8_linear and scaled_mm_nvfp4 -------------------------------------------

@dataclass
class LinearRow(Timed):
    """One linear op at one (M, K, N): GPU milliseconds and the peak extra device memory of one
    call (MiB: torch.cuda.max_memory_allocated over the allocation before the call, less the
    output) per implementation ("ours", "cuda", "triton"); None when not measured (notes say why)."""
    op: str
    m: int
    k: int
    n: int
    ms: dict[str, float | None]
    extra_mib: dict[str, float | None]
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.k}x{self.n}"


LINEAR_MEMORY_NOTE = ("\nExtra MiB: the peak of torch's allocations during one call beyond those before it and the "
                      "output. Device memory allocated outside torch is not in it: our cuBLASLt workspace (allocated "
                      "once per device and stream) and comfy_kitchen cuda's CUTLASS workspace.\n")


def linear_shapes(quick: bool) -> list[tuple[int, int, int]]:
    ms, kns = (QUICK_M_VALUES, QUICK_LINEAR_KN) if quick else (M_VALUES, LINEAR_KN)
    return [(m, k, n) for m in ms for k, n in kns]


def linear_table(rows: list[LinearRow]) -> str:
    names = ("ours", *BACKENDS)
    header = ["op", "M", "K", "N", *(f"{b} ms" for b in names), *(f"vs {b}" for b in BACKENDS),
              *(f"{b} extra MiB" for b in names)]
    body = [[r.op, str(r.m), str(r.k), str(r.n), *(fmt_ms(r.ms.get(b)) for b in names),
             *(fmt_ratio(r.ratio(b)) for b in BACKENDS),
             *("-" if r.extra_mib.get(b) is None else f"{r.extra_mib[b]:.1f}" for b in names)] for r in rows]
    notes = "".join(f"- {r.op} {r.shape} {name}: {note}\n" for r in rows for name, note in r.notes.items())
    return table(header, body, "lrrr" + "r" * (2 * len(names) + len(BACKENDS))) + (
        f"\nWhy cells are empty:\n\n{notes}" if notes else "")


def linear_targets(rows: list[LinearRow]) -> list[Target]:
    return [Target(f"int8_linear >= {LINEAR_SPEEDUP_TARGET:.1f}x comfy_kitchen cuda", "int8_linear", "cuda",
                   LINEAR_SPEEDUP_TARGET, LINEAR_TARGET_MIN_M).measure(rows)]


def read_linear_rows(path: str) -> list[LinearRow]:
    return [LinearRow(**record) for record in read_records(path) if record.pop("kind") == "linear"]


def peak_extra_mib(fn: Callable, args: tuple) -> float:
    """MiB torch allocated at the peak of one call beyond what was allocated before it and the output."""
    device = torch.device("cuda", torch.cuda.current_device())
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    out = fn(*args)
    torch.cuda.synchronize(device)
    extra = torch.cuda.max_memory_allocated(device) - before - sum(t.nbytes for t in tensors(out))
    del out
    return extra / 2**20


def linear_arguments(op: str, m: int, k: int, n: int, ours) -> tuple | None:
    """The call's arguments, the same for every backend: int8_linear as ComfyUI's ConvRot layers
    call it (bfloat16 x, per-channel float32 scale, bfloat16 bias, G = 256); scaled_mm_nvfp4 on
    operands our quantizer made.  None for scaled_mm_nvfp4 below compute capability 10.0."""
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
    if op == "int8_linear":
        w = torch.randint(-127, 128, (n, k), device="cuda", dtype=torch.int8, generator=g)
        ws = torch.rand(n, device="cuda", generator=g) * 0.01
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16, generator=g)
        return (x, w, ws, bias, torch.bfloat16, True, GROUP, None)
    if tuple(torch.cuda.get_device_capability()) < FP4_GEMM_MIN_CC:
        return None
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
    sx, sw = ((t.abs().amax().float() / ours.NVFP4_RANGE).reshape(()) for t in (x, w))
    (qa, ba), (qb, bb) = ours.quantize_nvfp4(x, sx, 0.0, m % 16 != 0), ours.quantize_nvfp4(w, sw)
    return (qa, qb, sx, sw, ba, bb, None, torch.bfloat16)


def measure_linear(op: str, m: int, k: int, n: int, ours, backends: dict, cfg) -> LinearRow | None:
    row = LinearRow(op, m, k, n, dict.fromkeys(("ours", *BACKENDS)), dict.fromkeys(("ours", *BACKENDS)))
    try:
        args = linear_arguments(op, m, k, n, ours)
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        row.notes["ours"] = "inputs do not fit in GPU memory"
        return row
    if args is None:
        return None
    impls = {"ours": (getattr(ours, op), None)}
    for b in BACKENDS:
        try:
            impls[b] = their_implementation(backends, b, op, args)
        except Exception as exc:
            impls[b] = (None, one_line(exc))
    for name, (impl, note) in impls.items():
        if impl is None:
            if note:
                row.notes[name] = note
            continue
        row.ms[name], note = try_time(impl, args, cfg)
        if note:
            row.notes[name] = note
            continue
        try:
            row.extra_mib[name] = peak_extra_mib(impl, args)
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
    return row


def bench_linear(out, ours, backends: dict, cfg, deadline: float) -> bool:
    """Appends one JSON line per measured LinearRow; False when the time budget ran out."""
    for m, k, n in linear_shapes(cfg.quick):
        for op in LINEAR_OPS:
            if time.monotonic() > deadline:
                return False
            row = measure_linear(op, m, k, n, ours, backends, cfg)
            if row is None:
                continue
            write_record(out, "linear", dataclasses.asdict(row))
            print(f"  {op} {row.shape}: ours {fmt_ms(row.ms['ours'])} ms", file=sys.stderr, flush=True)
            torch.cuda.empty_cache()
    return True


# ---- kernel breakdown: step e and its worker -----------------------------------------------

@dataclass
class Breakdown:
    """One implementation ("ours", "cuda", "triton") of one call under the profiler, summed over
    `calls` calls: the GPU work as [name, count, us] per kernel, memcpy or memset name; the host
    work inside the calls as [kind, name, count, us], kind "runtime" (CUDA runtime and driver API
    calls) or "torch" (the torch ops it calls, each with the runtime calls it makes); and the host
    time of the calls themselves.  calls = 0 when it was not profiled, with the reason in note
    (impl "" when no implementation was)."""
    call: str
    impl: str
    calls: int = 0
    gpu: list = field(default_factory=list)
    host: list = field(default_factory=list)
    wrapper_us: float = 0.0
    note: str = ""


def call_name(op: str, shape: tuple[int, ...]) -> str:
    return f"{op} {'x'.join(map(str, shape))}"


def duration_us(event) -> float:
    return event.time_range.end - event.time_range.start


def within(outer, event) -> bool:
    return outer.time_range.start <= event.time_range.start and event.time_range.end <= outer.time_range.end


def outermost(events: list) -> list:
    """The events not nested in another of them (one thread's ranges nest or are disjoint), so
    that a call made inside another (cuLaunchKernel under cudaLaunchKernel, aten::empty under
    aten::zeros) is not counted twice."""
    kept = []
    for e in sorted(events, key=lambda e: (e.time_range.start, -e.time_range.end)):
        if not kept or e.time_range.end > kept[-1].time_range.end:
            kept.append(e)
    return kept


def tally(events: list) -> list[list]:
    """[name, count, total us] per event name, the most time first."""
    totals: dict[str, list] = {}
    for e in events:
        entry = totals.setdefault(e.name, [e.name, 0, 0.0])
        entry[1] += 1
        entry[2] += duration_us(e)
    return sorted(totals.values(), key=lambda entry: -entry[2])


def summarize_profile(events: list, call: str, impl: str, calls: int) -> Breakdown:
    """A Breakdown from the profiler's events (FunctionEvents: name, device_type, time_range) of
    `calls` calls, each inside a CALL_LABEL range, made after the GPU was synchronized: every GPU
    event is the calls' work."""
    cpu = [e for e in events if e.device_type == DeviceType.CPU]
    ranges = [e for e in cpu if e.name == CALL_LABEL]
    inside = [e for e in cpu if e.name != CALL_LABEL and any(within(r, e) for r in ranges)]
    # The profiler shows each record_function range (ours, and any the implementation opens) on the
    # GPU's timeline too, as a user annotation spanning the range's kernels: not work of its own.
    gpu = [e for e in events if e.device_type != DeviceType.CPU and e.name != CALL_LABEL
           and not getattr(e, "is_user_annotation", False)]
    runtime = outermost([e for e in inside if RUNTIME_API.match(e.name)])
    torch_ops = outermost([e for e in inside if e.name.startswith("aten::")])
    host = [["runtime", *entry] for entry in tally(runtime)] + [["torch", *entry] for entry in tally(torch_ops)]
    return Breakdown(call, impl, calls, tally(gpu), host, sum(map(duration_us, ranges)))


def argument_list_start(name: str) -> int:
    """Where the parenthesized group that ends name (ending with ")") opens; -1 when it never does."""
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return i
    return -1


def short_kernel_name(name: str) -> str:
    """A kernel's name without its return type, argument list and namespaces, cut in the middle
    when still longer than KERNEL_NAME_CHARS (cuBLASLt's and CUTLASS's run to hundreds of
    characters).  Memcpy and memset names ("Memcpy DtoD (Device -> Device)") keep their
    parenthesized part, which follows a space where an argument list does not."""
    short = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    start = argument_list_start(short) if short.endswith(")") else -1
    if start > 0 and short[start - 1] != " ":
        short = short[:start]
    short = re.sub(r"\b[A-Za-z_]\w*::", "", short)
    if len(short) > KERNEL_NAME_CHARS:
        head = KERNEL_NAME_CHARS * 2 // 3
        short = short[:head] + "..." + short[len(short) - (KERNEL_NAME_CHARS - head - 3):]
    return short


def fmt_count(v: float) -> str:
    return f"{v:.2f}".rstrip("0").rstrip(".")


def code_cell(text: str) -> str:
    """text as code in a Markdown table cell: kernel names hold <...> and __, which Markdown would
    take for HTML and emphasis."""
    return "`" + text.replace("|", "\\|") + "`"


def breakdown_rows(b: Breakdown) -> list[list[str]]:
    """One implementation's rows, per call: its GPU work, the GPU total, the host time of the
    whole call and the host work inside it."""
    def per_call(count: float, us: float) -> list[str]:
        return [fmt_count(count / b.calls), f"{us / b.calls:.1f}"]

    rows = [[b.impl, "GPU", code_cell(short_kernel_name(name)), *per_call(count, us)] for name, count, us in b.gpu]
    rows.append([b.impl, "GPU", "**total**", *per_call(sum(e[1] for e in b.gpu), sum(e[2] for e in b.gpu))])
    rows.append([b.impl, "host", "whole call", *per_call(b.calls, b.wrapper_us)])
    rows += [[b.impl, "host", f"{kind}: {code_cell(name)}", *per_call(count, us)] for kind, name, count, us in b.host]
    return rows


BREAKDOWN_NOTE = (f"Each implementation: {BREAKDOWN_CALLS_PER_PROFILE} calls under torch.profiler after the "
                  "warm-up calls; counts and microseconds per call.  GPU: each kernel, memcpy and memset (names "
                  "shortened; the full ones below) and their sum, the GPU's busy time.  host: the whole call "
                  "(Python wrapper included), and inside it the CUDA runtime/driver API calls and torch ops the "
                  "profiler reports (a torch op's time includes its runtime calls).  The profiler adds to every "
                  "host event: compare host times with each other and with \"ours host ms\", not as absolute "
                  "figures.\n")


def breakdown_section(items: list[Breakdown]) -> str:
    """One table per call, ours first, then the backends, kernel by kernel; the reasons for what
    was not profiled; and the full names of the shortened kernels."""
    if not items:
        return "No call was profiled (see step e under Steps).\n"
    parts = [BREAKDOWN_NOTE]
    for call in dict.fromkeys(b.call for b in items):
        mine = [b for b in items if b.call == call]
        rows = [row for b in mine if b.calls for row in breakdown_rows(b)]
        parts.append(f"\n#### {call}\n\n")
        if rows:
            parts.append(table(["impl", "side", "name", "count/call", "us/call"], rows, "lllrr"))
        notes = [f"- {b.impl + ': ' if b.impl else ''}{b.note}\n" for b in mine if b.note]
        parts += ["\n" if rows and notes else "", *notes]
    full = dict.fromkeys(name for b in items for name, _, _ in b.gpu if short_kernel_name(name) != name)
    if full:
        parts += ["\n<details><summary>Full kernel names</summary>\n\n",
                  *(f"- `{short_kernel_name(name)}`: `{name}`\n" for name in full), "</details>\n"]
    return "".join(parts)


def unprofiled(items: list[Breakdown]) -> list[Breakdown]:
    """A note for each call the worker wrote nothing about: it ran out of time or stopped."""
    seen = {b.call for b in items}
    return [Breakdown(name, "", note="not profiled: the worker ran out of time or stopped first")
            for name in (call_name(op, shape) for op, shape in BREAKDOWN_CALLS) if name not in seen]


def read_breakdowns(path: str) -> list[Breakdown]:
    return [Breakdown(**record) for record in read_records(path) if record.pop("kind") == "breakdown"]


def profile_events(fn: Callable, args: tuple, warmup: int, calls: int) -> list:
    """The profiler's events of `calls` calls, each in a CALL_LABEL range, after `warmup` calls
    (lazy initialization and Triton's compilation stay out of the profile)."""
    from torch.profiler import ProfilerActivity, profile, record_function

    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            with record_function(CALL_LABEL):
                fn(*args)
        torch.cuda.synchronize()
    return list(prof.events())


def profile_one(call: str, impl: str, fn: Callable, args: tuple, warmup: int) -> Breakdown:
    try:
        events = profile_events(fn, args, warmup, BREAKDOWN_CALLS_PER_PROFILE)
        return summarize_profile(events, call, impl, BREAKDOWN_CALLS_PER_PROFILE)
    except Exception as exc:  # out of memory, a backend that fails: a note, then the next one
        torch.cuda.empty_cache()
        return Breakdown(call, impl, note=one_line(exc))


def breakdown_arguments(op: str, shape: tuple[int, ...], ours) -> tuple[tuple, tuple] | None:
    """(our arguments, theirs) as the benchmarks make them; None where the op cannot run here."""
    if op in LINEAR_OPS:
        args = linear_arguments(op, *shape, ours)
        return None if args is None else (args, args)
    torch.manual_seed(0)
    return op_arguments(ours)[op](torch.randn(*shape, device="cuda", dtype=torch.bfloat16))


def profile_call(op: str, shape: tuple[int, ...], ours, backends: dict, warmup: int) -> list[Breakdown]:
    """Ours and each backend's implementation of one call; a note for each that cannot be profiled."""
    call = call_name(op, shape)
    try:
        arguments = breakdown_arguments(op, shape, ours)
    except Exception as exc:
        return [Breakdown(call, "", note=f"no arguments: {one_line(exc)}")]
    if arguments is None:
        return [Breakdown(call, "", note=f"not on this GPU: needs compute capability "
                                         f"{FP4_GEMM_MIN_CC[0]}.{FP4_GEMM_MIN_CC[1]}+")]
    our_args, their_args = arguments
    items = [profile_one(call, "ours", getattr(ours, op), our_args, warmup)]
    for b in BACKENDS:
        try:
            impl, note = their_implementation(backends, b, op, their_args)
        except Exception as exc:
            impl, note = None, one_line(exc)
        items.append(profile_one(call, b, impl, their_args, warmup) if impl else
                     Breakdown(call, b, note=note or f"comfy_kitchen {b} is unavailable: {backends[b]['reason']}"))
    return items


def profile_worker(args) -> int:
    """Profiles BREAKDOWN_CALLS, appending one JSON line per Breakdown to args.profile_worker;
    stops when args.budget seconds are up."""
    ours = cuda_ops()
    if ours is None:
        return 1
    deadline = time.monotonic() + args.budget
    try:
        backends = backend_status()
    except Exception as exc:  # comfy_kitchen missing: ours are still profiled
        backends = {b: {"available": False, "reason": one_line(exc), "ops": []} for b in BACKENDS}
    with open(args.profile_worker, "a") as out:
        for op, shape in BREAKDOWN_CALLS:
            if time.monotonic() > deadline:
                print(f"time budget of {args.budget:.0f} s used up", file=sys.stderr)
                return 0
            for item in profile_call(op, shape, ours, backends, args.warmup):
                write_record(out, "breakdown", dataclasses.asdict(item))
            print(f"  profiled {call_name(op, shape)}", file=sys.stderr, flush=True)
            torch.cuda.empty_cache()
    return 0


# ---- environment and report ----------------------------------------------------------------

def no_gpu_reason() -> str | None:
    if torch.version.cuda is None:
        return f"no CUDA GPU: torch {torch.__version__} is built without CUDA"
    if not torch.cuda.is_available():
        return "no CUDA GPU: torch.cuda.is_available() is False"
    return None


def program_output(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def package_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def gpu_info() -> dict[str, str]:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    nvcc = find_nvcc()
    nvcc_release = re.search(r"release ([\d.]+)", program_output([nvcc, "--version"]) if nvcc else "")
    driver = program_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    return {
        "GPU": f"{props.name}, compute capability {props.major}.{props.minor}, "
               f"{props.total_memory / 2**30:.0f} GiB, {props.multi_processor_count} SMs",
        "driver": driver.splitlines()[0] if driver else "unknown (nvidia-smi not found)",
        "CUDA runtime": f"torch's {torch.version.cuda}; comfy_kitchen_c's (static) from nvcc "
                        f"{nvcc_release.group(1) if nvcc_release else 'unknown'}",
        "software": f"Python {platform.python_version()}, torch {torch.__version__}, "
                    f"comfy-kitchen {package_version('comfy-kitchen')}, triton {package_version('triton')}",
        "comfy_kitchen_c": f"git {program_output(['git', 'describe', '--always', '--dirty']) or 'unknown'}",
    }


def shown_path(path: Path) -> str:
    """path relative to the repository when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def command_line(argv: list[str]) -> str:
    return shlex.join(["python", shown_path(Path(__file__).resolve()), *argv])


def backends_list(backends: dict) -> str:
    lines = []
    for b, info in backends.items():
        state = "available" if info["available"] else f"unavailable ({info['reason']})"
        lines.append(f"- {b}: {state}; registers {', '.join(info['ops']) or 'none of the benchmarked ops'}\n")
    return "".join(lines)


def report(info: dict[str, str], command: str, args, results: list[StepResult], rows: list[Row],
           backends: dict, linear_rows: list | None = None, breakdowns: list | None = None) -> str:
    linear_rows = linear_rows or []
    name = info["GPU"].split(",")[0]
    when = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    parts = [f"## GPU check: {name}\n\n", f"- date: {when}\n",
             *(f"- {k}: {v}\n" for k, v in info.items()), f"- command: `{command}`\n",
             f"- benchmark: bfloat16, group size {GROUP}, CUDA events, median of {args.repeats} calls after "
             f"{args.warmup} warm-up calls\n",
             "\n### Steps\n\n", steps_table(results), "\n", step_logs(results),
             "\n### Backends\n\n", backends_list(backends) or "- not measured\n",
             "\n### Benchmarks\n\n", results_table(rows) if rows else "No rows were measured.\n",
             *(f"\n{op} (G = {NVFP4_ROTATE_GROUP}): the backend columns time their {theirs}.\n"
               for op, theirs in COMPARED_OPS.items()),
             *(["\nNot benchmarked:\n\n", pending_table()] if PENDING_OPS else []),
             "\n### Linear ops\n\n", linear_table(linear_rows) if linear_rows else "No linear rows were measured.\n",
             LINEAR_MEMORY_NOTE]
    notes = notes_list(rows)
    if notes:
        parts += ["\nWhy cells are empty:\n\n", notes]
    parts += ["\n### Targets (computed, not asserted)\n\n", targets_table(targets(rows) + linear_targets(linear_rows)),
              "\n### Kernel breakdown (torch.profiler)\n\n", breakdown_section(breakdowns or [])]
    return "".join(parts)


def write_report(text: str, gpu_name: str) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{slug(gpu_name)}.md"
    path.write_text(text)
    return path


# ---- plan and main -------------------------------------------------------------------------

def plan(args) -> str:
    arch = "<major><minor> of torch.cuda.get_device_capability()"
    if torch.cuda.is_available():
        arch = "".join(map(str, torch.cuda.get_device_capability()))
    sanitizer = find_sanitizer()
    sizes = shapes(args.quick)
    lines = [f"gpu_check plan (dry run: nothing is run); time budget {args.budget:.0f} s", ""]
    commands = {
        "build": "skipped (--no-build)" if args.no_build else render(build_command(), build_env(arch)),
        "tests": render(tests_command()),
        "memcheck": render(memcheck_command(sanitizer or "compute-sanitizer"), MEMCHECK_ENV)
        + ("" if sanitizer else "  [compute-sanitizer not found here: the step would be skipped]"),
        "bench": render(bench_command("<rows.jsonl>", args, "<seconds left>")),
        "profile": render(profile_command("<breakdowns.jsonl>", args, "<seconds left>")),
        "faults": render(faults_command(shown_path(faults_path("<gpu name slug>")))),
    }
    for step in STEPS:
        limit = f"at most {step.cap_s:.0f} s" if step.cap_s else "what is left"
        reserve = f"; {step.reserve_s:.0f} s reserved" if step.reserve_s else ""
        lines += [f"{step.key}. {step.name}: {step.purpose} ({limit}{reserve})", f"     {commands[step.name]}"]
    lines += [f"{REPORT_KEY}. report: benchmarks/results/<gpu name slug>.md", "",
              f"benchmark ops: {', '.join(BENCH_OPS)}",
              *(f"compared op: {op} (G = {NVFP4_ROTATE_GROUP}) against their {theirs}"
                for op, theirs in COMPARED_OPS.items()),
              *(f"pending op: {op}: {status}" for op, status in PENDING_OPS.items()),
              f"compared with: ours, {', '.join(f'comfy_kitchen {b}' for b in BACKENDS)}, device copy",
              f"shapes ({len(sizes)}, bfloat16, M x K): {', '.join(f'{m}x{k}' for m, k in sizes)}",
              f"timing: CUDA events, {args.warmup} warm-up calls, median of {args.repeats}",
              f"linear ops: {', '.join(LINEAR_OPS)} (scaled_mm_nvfp4 on compute capability "
              f"{FP4_GEMM_MIN_CC[0]}.{FP4_GEMM_MIN_CC[1]}+), with the peak extra device memory per call",
              f"linear shapes (M x K x N): {', '.join(f'{m}x{k}x{n}' for m, k, n in linear_shapes(args.quick))}",
              f"kernel breakdown ({BREAKDOWN_CALLS_PER_PROFILE} calls each after {args.warmup} warm-up calls, ours and "
              f"comfy_kitchen's; scaled_mm_nvfp4 on compute capability {FP4_GEMM_MIN_CC[0]}.{FP4_GEMM_MIN_CC[1]}+): "
              f"{', '.join(call_name(op, shape) for op, shape in BREAKDOWN_CALLS)}",
              "", "targets:"]
    lines += [f"  {t.label} ({t.op})" for t in targets([]) + linear_targets([])]
    return "\n".join(lines)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--dry-run", action="store_true", help="print the plan and exit (no GPU needed)")
    p.add_argument("--no-build", action="store_true", help="skip step a; test the installed build")
    p.add_argument("--quick", action="store_true",
                   help=f"benchmark M in {list(QUICK_M_VALUES)} x K in {list(QUICK_K_VALUES)} only")
    p.add_argument("--repeats", type=int, default=20, help="timed calls per measurement (default %(default)s)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls first (default %(default)s)")
    p.add_argument("--budget", type=float, default=TIME_BUDGET_S,
                   help="seconds for the whole check (default %(default)s)")
    p.add_argument("--bench-worker", metavar="JSONL", help=argparse.SUPPRESS)
    p.add_argument("--profile-worker", metavar="JSONL", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.bench_worker:
        return bench_worker(args)
    if args.profile_worker:
        return profile_worker(args)
    if args.dry_run:
        print(plan(args))
        return 0
    reason = no_gpu_reason()
    if reason:
        print(f"gpu_check: {reason}. Nothing was run; --dry-run prints the plan.", file=sys.stderr)
        return 2
    ctx = Context(args, time.monotonic() + args.budget, "".join(map(str, torch.cuda.get_device_capability())))
    info = gpu_info()
    results = [run_step(ctx, step) for step in STEPS]
    results.append(report_step(ctx, info, command_line(argv), results))
    print(f"\n{steps_table(results)}")
    return exit_status(results)


def report_step(ctx: Context, info: dict[str, str], command: str, results: list[StepResult]) -> StepResult:
    """Step g: writes the report (or, if that fails, prints it)."""
    start = time.monotonic()
    text = report(info, command, ctx.args, results, ctx.rows, ctx.backends, ctx.linear_rows, ctx.breakdowns)
    try:
        path = write_report(text, torch.cuda.get_device_name())
        status, detail = PASSED, str(path)
    except OSError as exc:
        print(text)
        status, detail = FAILED, f"could not write the report (printed above): {exc}"
    print(f"[{REPORT_KEY}] report: {status}: {detail}", flush=True)
    return StepResult(REPORT_KEY, "report", status, time.monotonic() - start, detail)


if __name__ == "__main__":
    sys.exit(main())
