# SPDX-License-Identifier: Apache-2.0
"""GPU check of comfy_kitchen_c in one command: build for the GPU at hand, CUDA tests (the
stand-in driver's scenarios on the real driver among them), memcheck, benchmarks against
comfy_kitchen's cuda and triton backends and a device copy, a per-kernel profile, the fault
checks' cost, and the results in one folder, benchmarks/results/<gpu>-<commit>/ (report.md,
faults.md), with the commit it ran on.

    python benchmarks/gpu_check.py --quick    # fits in 7.5 minutes on an H100 (--dry-run shows the budget)
    python benchmarks/gpu_check.py            # everything, memcheck included
    python benchmarks/gpu_check.py --dry-run  # the plan and its time budget, without a GPU

Steps (each with a planned time; see gpucheck/steps.py for how the budget is shared):

  a. build     ``setup.py build_ext --inplace`` for the local GPU's compute capability only,
               warnings as errors; then checks that the built extension has CUDA.
  b. tests     every ``tests/test_cuda*.py``: every op on the GPU, bit for bit against the CPU;
               ``tests/test_cuda_driver_path.py`` runs the stand-in driver's scenarios
               (tests/test_standin_driver.py) on the real driver where a GPU can show them.
  c. memcheck  the small-shape tests under compute-sanitizer memcheck, torch's caching
               allocator off so a read past a tensor's end is caught.
  d. bench     (gpucheck/bench.py) per op and shape: GPU time per call with the host running
               ahead, for ours, comfy_kitchen cuda, triton and a device copy of the same bytes;
               host time per call apart; ours from a replayed CUDA graph; ours with the flight
               record off at M = 4096; the model's prediction (benchmarks/gpu_model.py).
  e. profile   (gpucheck/profile.py) per kernel GPU times from torch.profiler for the same calls.
  f. faults    ``bench_faults.py``: the fault checks' host cost per op on this GPU.
  g. report    the tables and the targets of issue 11, computed per row, never asserted.

comfy_kitchen's cuda backend is compared only where its compiled extension loads: carry it
(benchmarks/carry_comfy_kitchen.py, benchmarks/README.md).  Exit status: 0 when no step
failed, 1 when one did, 2 without a CUDA GPU (nothing is run)."""
from __future__ import annotations

import argparse
import datetime
import glob
import importlib.util
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpucheck import bench, profile, report, workload  # noqa: E402
from gpucheck.records import Kernels, merge_kernels, of_kind, read_records, rows_from  # noqa: E402
from gpucheck.steps import (FAILED, FULL_BUDGET_S, INCOMPLETE, PASSED, QUICK_BUDGET_S, SKIPPED,  # noqa: E402
                            Context, Outcome, Step, exit_status, plan_lines, run_steps)

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = ROOT / "benchmarks" / "results"
STAMP = ROOT / ".devpkgs" / "SOURCE"   # written by carry_comfy_kitchen.py on the development machine
WORKER_GRACE_S = 20                    # a worker stops itself at its budget; killed this much later
EXE = ".exe" if sys.platform == "win32" else ""


# ---- commands ----

def render(cmd: list[str], env: dict[str, str] | None = None) -> str:
    return " ".join([f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()] + [shlex.quote(c) for c in cmd])


def build_command() -> list[str]:
    return [sys.executable, "setup.py", "-q", "build_ext", "--inplace"]


def build_env(arch: str) -> dict[str, str]:
    return {"COMFY_KITCHEN_C_CUDA_ARCHS": arch, "COMFY_KITCHEN_C_WERROR": "1"}


def tests_command(*extra: str) -> list[str]:
    files = sorted(os.path.relpath(p, ROOT) for p in glob.glob(str(ROOT / "tests" / "test_cuda*.py")))
    return [sys.executable, "-m", "pytest", *files, "-q", "-p", "no:cacheprovider", *extra]


def memcheck_command(sanitizer: str) -> list[str]:
    # Memory accesses only: a driver that refuses cudaHostRegister of the flight record is an
    # expected, handled CUDA API error.
    return [sanitizer, "--tool", "memcheck", "--report-api-errors", "no", "--error-exitcode", "1",
            *tests_command("-k", "small")]


def worker_command(kind: str, out: str, args, budget_s: str) -> list[str]:
    cmd = [sys.executable, str(Path(__file__).resolve()), f"--{kind}-worker", out, "--budget", budget_s]
    if kind == "bench":
        cmd += ["--calls", str(args.calls), "--rounds", str(args.rounds), "--warmup", str(args.warmup)]
        cmd += [] if args.graph else ["--no-graph"]
    return cmd


def faults_command(out: str, quick: bool) -> list[str]:
    cmd = [sys.executable, str(ROOT / "benchmarks" / "bench_faults.py"), "--out", out]
    return cmd + (["--iterations", "20000", "--repeats", "3"] if quick else [])


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The repository first on the path (the in-place build), the caller's PYTHONPATH (the
    carried comfy_kitchen) after it; flight records in a temporary folder."""
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, **(extra or {})}
    env.setdefault("COMFY_KITCHEN_C_FLIGHT_DIR", tempfile.mkdtemp(prefix="gpu-check-flight-"))
    return env


def run_command(cmd: list[str], timeout: float, env: dict[str, str] | None = None) -> tuple[int | None, str]:
    """(exit status, or None when killed at the timeout; stdout and stderr together)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=child_env(env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace", start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=timeout)
        return proc.returncode, output
    except subprocess.TimeoutExpired:
        if hasattr(os, "killpg"):  # the whole group: pytest under compute-sanitizer, nvcc under setup.py
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        output, _ = proc.communicate()
        return None, output


def tail(text: str, lines: int = 40) -> str:
    all_lines = text.rstrip().splitlines()
    reports = [line for line in all_lines[:-lines] if line.startswith("========= ") and "Host Frame" not in line][:20]
    return "\n".join(reports + (["..."] if reports else []) + all_lines[-lines:])


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def command_outcome(cmd: list[str], timeout: float, env: dict[str, str] | None = None,
                    expect: str | None = None) -> Outcome:
    """Runs cmd; passed when it exits 0 and (if given) its last line contains expect."""
    rc, output = run_command(cmd, timeout, env)
    shown, summary = render(cmd, env), last_line(output)
    if rc is None:
        return Outcome(FAILED, f"killed after {timeout:.0f} s (time limit)", shown, tail(output))
    if rc != 0:
        return Outcome(FAILED, f"exit status {rc}: {summary}", shown, tail(output))
    if expect and expect not in summary:
        return Outcome(FAILED, f"expected '{expect}' in: {summary}", shown, tail(output))
    return Outcome(PASSED, summary, shown)


def find_nvcc() -> str | None:
    candidates = [os.path.join(os.environ.get("CUDA_HOME", ""), "bin", "nvcc" + EXE), shutil.which("nvcc"),
                  "/usr/local/cuda/bin/nvcc"]
    return next((c for c in candidates if c and os.path.isfile(c)), None)


def find_sanitizer() -> str | None:
    """compute-sanitizer next to nvcc, in the toolkit's compute-sanitizer folder, or on PATH."""
    candidates = []
    nvcc = find_nvcc()
    if nvcc:
        bin_dir = Path(nvcc).resolve().parent
        candidates += [bin_dir / ("compute-sanitizer" + EXE), bin_dir.parent / "compute-sanitizer" /
                       ("compute-sanitizer" + EXE)]
    candidates.append(shutil.which("compute-sanitizer"))
    return next((str(c) for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


# ---- steps ----

def step_build(ctx: Context, timeout: float) -> Outcome:
    if ctx.args.no_build:
        return Outcome(SKIPPED, "--no-build")
    built = command_outcome(build_command(), timeout, build_env(ctx.data["arch"]))
    if built.status != PASSED:
        return built
    rc, output = run_command([sys.executable, "-c", "from comfy_kitchen_c import _C; print(int(_C.HAS_CUDA))"], 60)
    if rc != 0 or output.strip() != "1":
        return Outcome(FAILED, f"built without CUDA (nvcc: {find_nvcc() or 'not found'}): {last_line(output)}",
                       built.command, tail(output))
    return Outcome(PASSED, f"sm_{ctx.data['arch']}, warnings as errors; _C.HAS_CUDA = 1", built.command)


def step_tests(ctx: Context, timeout: float) -> Outcome:
    # "passed" in pytest's summary: a run where everything was skipped is a failure here.
    return command_outcome(tests_command(), timeout, expect="passed")


def step_memcheck(ctx: Context, timeout: float) -> Outcome:
    sanitizer = find_sanitizer()
    if sanitizer is None:
        return Outcome(SKIPPED, "compute-sanitizer not found (next to nvcc, in the CUDA toolkit, or on PATH)")
    return command_outcome(memcheck_command(sanitizer), timeout, {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"},
                           expect="passed")


def read_gemm_cache(path: str) -> list[dict]:
    """comfy_kitchen_c/doctor_gemm.py's read_cache, its file loaded alone: importing the package
    would load _C into this process, which only runs the steps."""
    spec = importlib.util.spec_from_file_location("ckc_doctor_gemm", ROOT / "comfy_kitchen_c" / "doctor_gemm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        return module.read_cache(path)
    except OSError:
        return []


def run_worker(kind: str, ctx: Context, timeout: float) -> tuple[str, int | None, str, list[dict]]:
    """A worker that writes JSON lines and stops itself at timeout less WORKER_GRACE_S.  The
    int8 GEMM's algorithms it chooses by timing go to a GEMM cache file of this run (its
    entries end up in ctx.data["gemm"], for the report's table)."""
    budget = max(timeout - WORKER_GRACE_S, 10)
    fd, path = tempfile.mkstemp(prefix=f"gpu_check_{kind}_", suffix=".jsonl")
    os.close(fd)
    gemm = ctx.data.get("gemm_cache")
    if gemm is None:  # one file for the run's workers
        fd, gemm = tempfile.mkstemp(prefix="gpu_check_gemm_", suffix=".tsv")
        os.close(fd)
        ctx.data["gemm_cache"] = gemm
    try:
        cmd = worker_command(kind, path, ctx.args, f"{budget:.0f}")
        rc, output = run_command(cmd, budget + WORKER_GRACE_S, {"COMFY_KITCHEN_C_GEMM_CACHE": gemm})
        ctx.data["gemm"] = read_gemm_cache(gemm)
        return render(cmd), rc, output, read_records(path)
    finally:
        os.unlink(path)


def step_bench(ctx: Context, timeout: float) -> Outcome:
    shown, rc, output, records = run_worker("bench", ctx, timeout)
    rows = rows_from(records)
    ctx.data["rows"] = rows
    ctx.data["backends"] = next((r["backends"] for r in of_kind(records, "backends")), {})
    ctx.data["device"] = next(iter(of_kind(records, "device")), {})
    expected = len(bench.plan_rows(ctx.data["capability"]))
    problems = ([] if rc == 0 else ["killed at the time limit" if rc is None else f"exit status {rc}"])
    problems += [f"{len(rows)} of {expected} rows measured"] if len(rows) < expected else []
    problems += [f"our op failed in {n} rows" for n in [sum(1 for r in rows if "ours" not in r.gpu_us)] if n]
    return Outcome(FAILED if problems else PASSED, "; ".join(problems) or f"{len(rows)} rows", shown,
                   tail(output) if problems else "")


def step_profile(ctx: Context, timeout: float) -> Outcome:
    shown, rc, output, records = run_worker("profile", ctx, timeout)
    items = [Kernels(**r) for r in of_kind(records, "kernels")]
    orphans = merge_kernels(ctx.data.get("rows", []), items)
    detail = f"{sum(1 for i in items if i.kernels)} implementations profiled" + (
        f"; {len(orphans)} of them have no benchmark row" if orphans else "")
    if rc == 0:
        return Outcome(PASSED, detail, shown)
    return Outcome(INCOMPLETE, f"{'killed at the time limit' if rc is None else f'exit status {rc}'}; {detail}",
                   shown, tail(output))


FAULTS_COST_ROW = re.compile(r"\| (?P<device>[^|]+?) \| (?P<words>[^|]+?) \| -?\d+ \| -?\d+ \| (?P<cost>-?\d+) \| "
                             r"(?P<target>\d+ \((within|OVER)\)) \|")


def faults_summary(text: str) -> str:
    """The flight record's host cost per op on each GPU row of bench_faults' last table."""
    costs = [f"flight record on {m['device']} ({m['words']} words): {m['cost']} ns per op, target {m['target']}"
             for m in map(FAULTS_COST_ROW.fullmatch, text.splitlines()) if m and m["device"] != "emulated"]
    return "; ".join(costs) or "no GPU row in its flight record cost table"


def results_folder(ctx: Context) -> Path:
    """benchmarks/results/<gpu>-<commit>/: everything this run writes."""
    return RESULTS_DIR / f"{ctx.data['slug']}-{ctx.data.get('commit') or 'uncommitted'}"


def step_faults(ctx: Context, timeout: float) -> Outcome:
    path = results_folder(ctx) / "faults.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    outcome = command_outcome(faults_command(str(path), ctx.quick), timeout)
    if outcome.status == PASSED:
        outcome.detail = f"{path.relative_to(ROOT)}; {faults_summary(path.read_text())}"
    return outcome


STEPS = [
    Step("a", "build", "build for the local GPU only, warnings as errors", step_build, 120, 150),
    Step("b", "tests", "CUDA tests: every op bit for bit against the CPU path; the driver path's scenarios",
         step_tests, 75, 100),
    Step("c", "memcheck", "compute-sanitizer memcheck on the small-shape tests", step_memcheck, 75, 90),
    Step("d", "bench", "GPU and host time per call: ours, comfy_kitchen cuda and triton, device copy; model",
         step_bench, 90, 150, takes_rest=True),
    Step("e", "profile", "per-kernel GPU times from torch.profiler, every implementation", step_profile, 35, 50,
         optional=True),
    Step("f", "faults", "bench_faults.py: the fault checks' host cost per op on this GPU", step_faults, 25, 30),
]


# ---- environment, commit and report ----

def program_output(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def read_stamp(path: Path) -> dict[str, str]:
    """carry_comfy_kitchen.py's stamp: key=value lines (commit, dirty, written)."""
    try:
        return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    except OSError:
        return {}


def source_commit(git_describe: str, stamp: dict[str, str]) -> str:
    """The commit the run is on: git's answer where the checkout has its repository, else the
    stamp the development machine wrote before the run (a device copy of a working tree has
    no repository, or a stale one); both when they disagree."""
    stamped = stamp.get("commit", "") + ("-dirty" if stamp.get("dirty") == "1" else "")
    when = f", stamped {stamp['written']}" if stamp.get("written") else ""
    if git_describe and stamped and not git_describe.startswith(stamp["commit"]):
        return f"{stamped} (stamp{when}; git here says {git_describe})"
    if git_describe:
        return f"{git_describe} (git)"
    return f"{stamped} (stamp{when}; no git repository here)" if stamped else "unknown"


def package_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
    # carry_comfy_kitchen.py unpacks the package without pip's metadata and leaves its version
    # beside it: the import path finds the package, the file says which.
    spec = importlib.util.find_spec(name.replace("-", "_"))
    if spec is None or not spec.submodule_search_locations:
        return "not installed"
    version = Path(list(spec.submodule_search_locations)[0]) / "VERSION"
    return f"{version.read_text().strip() if version.is_file() else 'unknown version'} (carried, no pip metadata)"


def gpu_info(torch, command: str, device: dict) -> dict[str, str]:
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    nvcc = find_nvcc()
    release = re.search(r"release ([\d.]+)", program_output([nvcc, "--version"]) if nvcc else "")
    driver = program_output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    git = program_output(["git", "describe", "--always", "--dirty"]) if (ROOT / ".git").is_dir() else ""
    return {
        "GPU": f"{props.name}, compute capability {props.major}.{props.minor}, {props.total_memory / 2**30:.0f} GiB, "
               f"{props.multi_processor_count} SMs, L2 {getattr(props, 'L2_cache_size', 0) / 2**20:.0f} MiB",
        "commit": source_commit(git, read_stamp(STAMP)),
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "driver": driver.splitlines()[0] if driver else "unknown (nvidia-smi not found)",
        "CUDA": f"torch's {torch.version.cuda}; comfy_kitchen_c's (static) from nvcc "
                f"{release.group(1) if release else 'unknown'}",
        "software": f"Python {platform.python_version()}, torch {torch.__version__}, comfy-kitchen "
                    f"{package_version('comfy-kitchen')}, triton {package_version('triton')}",
        "model": (f"gpu_model.predict_ms for '{device.get('model_gpu')}'" if device.get("model") else
                  "benchmarks/gpu_model.py not found: no predictions"),
        "command": f"`{command}`",
    }


# ---- plan and main ----

def budget_of(args) -> float:
    return args.budget or (QUICK_BUDGET_S if args.quick else FULL_BUDGET_S)


def plan(args) -> str:
    arch = "<major><minor> of torch.cuda.get_device_capability()"
    commands = {
        "build": "skipped (--no-build)" if args.no_build else render(build_command(), build_env(arch)),
        "tests": render(tests_command()),
        "memcheck": render(memcheck_command(find_sanitizer() or "compute-sanitizer"),
                           {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}),
        "bench": render(worker_command("bench", "<rows.jsonl>", args, "<seconds>")),
        "profile": render(worker_command("profile", "<kernels.jsonl>", args, "<seconds>")),
        "faults": render(faults_command("benchmarks/results/<gpu>-<commit>/faults.md", args.quick)),
    }
    rows = bench.plan_rows((10, 0))
    return "\n".join([
        f"gpu_check plan ({'--quick' if args.quick else 'full'}; dry run: nothing is run)", "",
        *plan_lines(STEPS, args.quick, budget_of(args), commands),
        "g. report: benchmarks/results/<gpu>-<commit>/report.md (the commit: git, or the stamp carry_comfy_kitchen.py wrote)", "",
        f"ops ({len(workload.OPS)}): {', '.join(workload.OPS)}",
        f"shapes (M x K, bfloat16, G = {workload.GROUP}): {', '.join(f'{m}x{k}' for m, k in workload.shapes())}",
        f"linear: {', '.join(workload.LINEAR_OPS)} (scaled_mm_nvfp4 on compute capability 10.0+) at M x K x N: "
        f"{', '.join(f'{m}x{k}x{n}' for m, k, n in workload.linear_shapes())}",
        f"W4A8 (measured last, not profiled): {', '.join(workload.W4A8_OPS)} at M x K x N: "
        f"{', '.join(f'{m}x{k}x{n}' for m, k, n in workload.w4a8_shapes())}",
        f"rows: {len(rows)} ({len(bench.plan_rows())} below compute capability 10.0); implementations: ours, comfy_kitchen cuda, comfy_kitchen triton, device copy",
        f"timing: {args.warmup} warm-up calls, then {args.calls} calls queued behind a spin kernel per round, median "
        f"of {args.rounds} rounds with the host ahead; host time per call from the same queueing; "
        f"{'a replayed CUDA graph of ours; ' if args.graph else ''}ours with the flight record off at M = 4096",
        f"profile: {profile.PROFILE_CALLS} calls per implementation under torch.profiler, one session per shape",
        "model: benchmarks/gpu_model.py's predict_ms beside each measurement ('-' where it is absent)",
    ])


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dry-run", action="store_true", help="print the plan and its time budget, run nothing")
    p.add_argument("--quick", action="store_true", help="fit 7.5 minutes: shorter steps")
    p.add_argument("--no-build", action="store_true", help="skip step a; test the build already in place")
    p.add_argument("--budget", type=float, default=0, help="seconds for the whole check (default: 450 with "
                   "--quick, 600 otherwise)")
    p.add_argument("--calls", type=int, default=20, help="calls queued per round (default %(default)s)")
    p.add_argument("--rounds", type=int, default=0, help="rounds with the host ahead (default: 3 with --quick, 5)")
    p.add_argument("--warmup", type=int, default=3, help="untimed calls first (default %(default)s)")
    p.add_argument("--no-graph", dest="graph", action="store_false", help="no CUDA-graph timing of ours")
    p.add_argument("--bench-worker", metavar="JSONL", help=argparse.SUPPRESS)
    p.add_argument("--profile-worker", metavar="JSONL", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.rounds = args.rounds or (3 if args.quick else 5)
    return args


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.bench_worker:
        return bench.worker(args.bench_worker, args.budget,
                            bench.Config(args.calls, args.rounds, args.warmup, args.graph))
    if args.profile_worker:
        return profile.worker(args.profile_worker, args.budget)
    if args.dry_run:
        print(plan(args))
        return 0
    import torch

    if torch.version.cuda is None or not torch.cuda.is_available():
        why = "torch is built without CUDA" if torch.version.cuda is None else "torch.cuda.is_available() is False"
        print(f"gpu_check: no CUDA GPU: {why}. Nothing was run; --dry-run prints the plan.", file=sys.stderr)
        return 2
    name = torch.cuda.get_device_name()
    ctx = Context(args, time.monotonic() + budget_of(args), args.quick,
                  data={"arch": "".join(map(str, torch.cuda.get_device_capability())),
                        "capability": tuple(torch.cuda.get_device_capability()),
                        "slug": re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"})
    command = shlex.join(["python", "benchmarks/gpu_check.py", *argv])
    info = gpu_info(torch, command, {})
    ctx.data["commit"] = re.sub(r"[^0-9a-zA-Z.-]+", "", (info.get("commit") or "").split(" ")[0])[:40]
    results = run_steps(ctx, STEPS, lambda line: print(line, flush=True))
    text = report.render(gpu_info(torch, command, ctx.data.get("device", {})), results, ctx.data.get("rows", []),
                         ctx.data.get("backends", {}), ctx.data.get("gemm", []))
    path = results_folder(ctx) / "report.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"\n{report.steps_table(results)}\nreport: {path.relative_to(ROOT)}", flush=True)
    return exit_status(results)


if __name__ == "__main__":
    sys.exit(main())
