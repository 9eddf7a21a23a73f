"""GPU check of comfy_kitchen_c in one command (under 10 minutes on one GPU): build, CUDA tests,
memcheck, benchmarks against comfy_kitchen's CUDA and Triton backends, and a Markdown report.

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
               a crash in a kernel still leaves the rows measured before it.
  e. report    benchmarks/results/<gpu name>.md: GPU, driver and runtime versions, the command,
               every step's status and time, the tables, and the targets.

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

BANDWIDTH_TARGET = 0.80
BANDWIDTH_TARGET_MIN_M = 4096
SPEEDUP_TARGET = 1.0
HOST = "ours_host"  # Row.ms key of our op's host time per call

TIME_BUDGET_S = 570          # the whole check, under 10 minutes
STEP_CAPS_S = {"build": 300, "tests": 180, "memcheck": 180}
REPORT_RESERVE_S = 10        # kept back for writing the report
MIN_STEP_S = 15              # a step with less time left is not started
WORKER_GRACE_S = 30          # the benchmark stops itself at its budget; killed this much later

PASSED, FAILED, SKIPPED = "passed", "failed", "skipped"


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
        if r.status == FAILED and r.log_tail:
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


def step_bench(ctx: Context, timeout: float) -> Outcome:
    budget = max(timeout - WORKER_GRACE_S, MIN_STEP_S)
    fd, path = tempfile.mkstemp(prefix="gpu_check_", suffix=".jsonl")
    os.close(fd)
    try:
        cmd = bench_command(path, ctx.args, f"{budget:.0f}")
        rc, output = run_command(cmd, budget + WORKER_GRACE_S)
        ctx.backends, ctx.rows = read_bench(path)
        ctx.linear_rows = read_linear_rows(path)
    finally:
        os.unlink(path)
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


class Step(NamedTuple):
    key: str
    name: str
    purpose: str
    run: Callable[[Context, float], Outcome]  # (context, seconds it may take)
    cap_s: float | None                       # None: the rest of the time budget


STEPS = [
    Step("a", "build", "build for the local GPU only, warnings as errors", step_build, STEP_CAPS_S["build"]),
    Step("b", "tests", "CUDA tests: every op bit for bit against the CPU path", step_tests, STEP_CAPS_S["tests"]),
    Step("c", "memcheck", "compute-sanitizer memcheck on the small-shape tests", step_memcheck,
         STEP_CAPS_S["memcheck"]),
    Step("d", "bench", "benchmarks against comfy_kitchen cuda, triton and a device copy", step_bench, None),
]


def run_step(ctx: Context, step: Step) -> StepResult:
    print(f"[{step.key}] {step.name} ...", flush=True)
    start = time.monotonic()
    left = ctx.time_left()
    if left < MIN_STEP_S:
        outcome = Outcome(FAILED, f"not run: the {ctx.args.budget:.0f} s time budget is used up")
    else:
        try:
            outcome = step.run(ctx, min(step.cap_s, left) if step.cap_s else left)
        except Exception as exc:  # a bug of this script must not hide the other steps' results
            outcome = Outcome(FAILED, f"{type(exc).__name__}: {exc}")
    result = StepResult(step.key, step.name, outcome.status, time.monotonic() - start, outcome.detail,
                        outcome.command, outcome.log_tail)
    print(f"[{result.key}] {result.name}: {result.status} ({result.seconds:.1f} s) {result.detail}", flush=True)
    if result.status == FAILED and result.log_tail:
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


def bench_worker(args) -> int:
    """Measures every (shape, op), appending one JSON line per row to args.bench_worker; stops
    when args.budget seconds are up."""
    import comfy_kitchen_c
    from comfy_kitchen_c import _C

    if not _C.HAS_CUDA:
        print(f"comfy_kitchen_c at {comfy_kitchen_c.__file__} was built without CUDA", file=sys.stderr)
        return 1
    deadline = time.monotonic() + args.budget
    ours, backends = comfy_kitchen_c.ops, backend_status()
    arguments = op_arguments(ours)
    with open(args.bench_worker, "a") as out:
        out.write(json.dumps({"kind": "backends", "backends": backends}) + "\n")
        for m, k in shapes(args.quick):
            torch.manual_seed(0)
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            for op in (*BENCH_OPS, *COMPARED_OPS):
                if time.monotonic() > deadline:
                    print(f"time budget of {args.budget:.0f} s used up", file=sys.stderr)
                    return 0
                row = measure(op, x, ours, arguments[op], backends, args, COMPARED_OPS.get(op))
                out.write(json.dumps({"kind": "row", **dataclasses.asdict(row)}) + "\n")
                out.flush()
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
            out.write(json.dumps({"kind": "linear", **dataclasses.asdict(row)}) + "\n")
            out.flush()
            print(f"  {op} {row.shape}: ours {fmt_ms(row.ms['ours'])} ms", file=sys.stderr, flush=True)
            torch.cuda.empty_cache()
    return True


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


def command_line(argv: list[str]) -> str:
    script = Path(__file__).resolve()
    shown = str(script.relative_to(ROOT)) if script.is_relative_to(ROOT) else str(script)
    return shlex.join(["python", shown, *argv])


def backends_list(backends: dict) -> str:
    lines = []
    for b, info in backends.items():
        state = "available" if info["available"] else f"unavailable ({info['reason']})"
        lines.append(f"- {b}: {state}; registers {', '.join(info['ops']) or 'none of the benchmarked ops'}\n")
    return "".join(lines)


def report(info: dict[str, str], command: str, args, results: list[StepResult], rows: list[Row],
           backends: dict, linear_rows: list | None = None) -> str:
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
    parts += ["\n### Targets (computed, not asserted)\n\n", targets_table(targets(rows) + linear_targets(linear_rows))]
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
    }
    for step in STEPS:
        lines += [f"{step.key}. {step.name}: {step.purpose}", f"     {commands[step.name]}"]
    lines += ["e. report: benchmarks/results/<gpu name slug>.md", "",
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
    return p.parse_args(argv)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.bench_worker:
        return bench_worker(args)
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
    """Step e: writes the report (or, if that fails, prints it)."""
    start = time.monotonic()
    text = report(info, command, ctx.args, results, ctx.rows, ctx.backends, ctx.linear_rows)
    try:
        path = write_report(text, torch.cuda.get_device_name())
        status, detail = PASSED, str(path)
    except OSError as exc:
        print(text)
        status, detail = FAILED, f"could not write the report (printed above): {exc}"
    print(f"[e] report: {status}: {detail}", flush=True)
    return StepResult("e", "report", status, time.monotonic() - start, detail)


if __name__ == "__main__":
    sys.exit(main())
