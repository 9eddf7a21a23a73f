# SPDX-License-Identifier: Apache-2.0
"""The emulated device (csrc/emu/): kernel sources written in the CUDA dialect of
kernels/cuda_dialect.h, built by the host C++ compiler with CKC_EMULATED, run on the
CPU.  tests/emu/emu_kernels_test.cu checks its results itself and prints a PASS line
per check; tests/emu/emu_faults_test.cu makes memory errors that must be loud."""
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNELS_TEST = ROOT / "tests" / "emu" / "emu_kernels_test.cu"
FAULTS_TEST = ROOT / "tests" / "emu" / "emu_faults_test.cu"
RUNTIME = sorted((ROOT / "csrc" / "emu").glob("*.cpp"))  # the emulated device's runtime, as setup.py lists it

CXX = "g++"
FLAGS = ["-std=c++17", "-x", "c++", "-DCKC_EMULATED", "-O1", "-Wall", "-Wextra", "-Werror", "-pthread",
         f"-I{ROOT / 'kernels'}", f"-I{ROOT / 'csrc'}"]
ASAN = ["-fsanitize=address", "-fno-omit-frame-pointer"]

# Every check emu_kernels_test.cu makes (the start of its PASS line).
EXPECTED = [
    "indices over a 2-D grid of 3-D blocks",
    "__syncthreads block reduction in dynamic shared memory, broadcast through static __shared__",
    "dynamic shared memory is refilled with 0xCD for every block",
    "__shfl_xor_sync butterfly sum (float)",
    "__shfl_down_sync reduction (int)",
    "__shfl_sync broadcast from lane 7 (float and 64-bit)",
    "__shfl_xor_sync with width 16 sums each half-warp",
    "__shfl_up_sync inclusive scan",
    "shuffle sources outside the warp or the segment",
    "__ballot_sync, __any_sync, __all_sync",
    "atomicAdd on float and int across blocks",
    "atomicMax, atomicMin, atomicCAS",
    "deadlock at __syncthreads is a kernel fault: kernel 'deadlock_kernel'",
    "warp collective naming an exited lane is a kernel fault: kernel 'exited_lane_kernel'",
    "2048 threads per block is a launch error: kernel 'oversized_kernel'",
    "a launch with a bad configuration does not run",
    "grid.y of 70000 is a launch error",
    "full mask in a partial warp is a kernel fault: kernel 'partial_warp_kernel'",
    "a kernel fault ends the launch",
    "the first of two errors is kept",
    "launches from two OS threads at once",
    "256 threads x 1000 __syncthreads",
]

pytestmark = pytest.mark.skipif(shutil.which(CXX) is None, reason=f"no {CXX} to build the emulated device with")


def build(tmp_path: Path, source: Path, extra=()) -> Path:
    exe = tmp_path / source.stem
    cmd = [CXX, *FLAGS, *extra, str(source), *map(str, RUNTIME), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"build failed: {' '.join(cmd)}\n{r.stderr}"
    return exe


def run(exe: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def asan(tmp_path_factory):
    """Skips unless the compiler builds, and the machine runs, an AddressSanitizer program."""
    tmp = tmp_path_factory.mktemp("asan_probe")
    source = tmp / "probe.cpp"
    source.write_text("int main() { return 0; }\n")
    r = subprocess.run([CXX, *ASAN, str(source), "-o", str(tmp / "probe")], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        pytest.skip(f"{CXX} cannot build with AddressSanitizer: {r.stderr.strip()[:300]}")
    r = run(tmp / "probe")
    if r.returncode != 0:
        pytest.skip(f"AddressSanitizer programs do not run here: {r.stderr.strip()[:300]}")


def check_kernels_output(r: subprocess.CompletedProcess):
    report = f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert r.returncode == 0, report
    lines = r.stdout.splitlines()
    assert not [line for line in lines if line.startswith("FAIL ")], report
    passed = [line[len("PASS "):] for line in lines if line.startswith("PASS ")]
    for name in EXPECTED:
        assert any(p.startswith(name) for p in passed), f"no PASS line for {name!r}\n{report}"
    for line in lines:
        if line.startswith("INFO "):
            print(line)  # the context-switch cost, shown with pytest -s


def test_emulated_kernels(tmp_path):
    check_kernels_output(run(build(tmp_path, KERNELS_TEST)))


def test_emulated_kernels_under_asan(tmp_path, asan):
    check_kernels_output(run(build(tmp_path, KERNELS_TEST, ASAN)))


def test_stack_overflow_hits_the_guard_page(tmp_path):
    r = run(build(tmp_path, FAULTS_TEST), "stack_overflow")
    assert r.returncode == -signal.SIGSEGV, f"exit {r.returncode}\n{r.stdout}{r.stderr}"


@pytest.fixture(scope="module")
def faults_under_asan(tmp_path_factory, asan):
    return build(tmp_path_factory.mktemp("faults_asan"), FAULTS_TEST, ASAN)


@pytest.mark.parametrize("case, report", [
    ("smem_overrun", "heap-buffer-overflow"),
    ("stack_overrun", "stack-buffer-overflow"),
    ("stack_overflow", "stack-overflow"),
])
def test_asan_sees_kernel_memory_errors(faults_under_asan, case, report):
    r = run(faults_under_asan, case)
    assert r.returncode != 0 and "survived" not in r.stdout, f"exit {r.returncode}\n{r.stdout}{r.stderr}"
    assert f"AddressSanitizer: {report}" in r.stderr, r.stderr


# ---- the emulated device catches races (tests/emu/emu_races_test.cu: bugs planted on purpose) ----

RACES_TEST = ROOT / "tests" / "emu" / "emu_races_test.cu"
# Kernel sources compiled with GCC's ThreadSanitizer instrumentation, the emulator without it and
# with its detector (csrc/emu/emu_races.cpp implements the instrumentation's calls; no TSan
# runtime): what COMFY_KITCHEN_C_EMU_RACES=1 does for _C_emu.
RACE_KERNEL_FLAGS = ["-fsanitize=thread", "-Wno-tsan", "--param=tsan-instrument-func-entry-exit=0"]


def build_race_detector(tmp_path: Path, source: Path) -> Path:
    exe = tmp_path / (source.stem + "_races")
    objects = []
    for src, extra in [(source, RACE_KERNEL_FLAGS)] + [(r, []) for r in RUNTIME]:
        obj = tmp_path / (src.stem + ".races.o")
        cmd = [CXX, *FLAGS, "-DCKC_EMU_RACE_DETECT=1", *extra, "-c", str(src), "-o", str(obj)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"build failed: {' '.join(cmd)}\n{r.stderr}"
        objects.append(str(obj))
    r = subprocess.run([CXX, "-pthread", *objects, "-o", str(exe)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return exe


@pytest.fixture(scope="module")
def races_plain(tmp_path_factory):
    return build(tmp_path_factory.mktemp("races"), RACES_TEST)


@pytest.fixture(scope="module")
def races_detector(tmp_path_factory):
    return build_race_detector(tmp_path_factory.mktemp("races_detect"), RACES_TEST)


def result(exe: Path, case: str, schedule: str = "order") -> str:
    r = subprocess.run([str(exe), case], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "COMFY_KITCHEN_C_EMU_SCHEDULE": schedule})
    assert r.returncode == 0, f"exit {r.returncode}\n{r.stdout}{r.stderr}"
    line = next(line for line in r.stdout.splitlines() if line.startswith(f"RESULT {case} "))
    return line[len(f"RESULT {case} "):] + "".join("\n" + p for p in r.stdout.splitlines() if p.startswith("POISON"))


SEEDS = range(1, 9)


def test_a_missing_barrier_passes_in_order_and_fails_under_shuffled_schedules(races_plain):
    assert result(races_plain, "missing_barrier") == "ok"  # why the old emulator never saw it
    outcomes = {seed: result(races_plain, "missing_barrier", f"shuffle:{seed}") for seed in SEEDS}
    assert "wrong" in outcomes.values(), outcomes
    for seed in SEEDS:  # the fixed kernel is right under every schedule
        assert result(races_plain, "barrier_ok", f"shuffle:{seed}") == "ok", seed


def test_the_race_detector_reports_a_missing_barrier(races_detector):
    out = result(races_detector, "missing_barrier")
    assert out.startswith("fault:") and "read-after-write race" in out and "missing_barrier_kernel" in out, out
    assert result(races_detector, "barrier_ok") == "ok"
    assert result(races_detector, "barrier_ok", "shuffle:3") == "ok"


@pytest.mark.parametrize("case", ["stale_static", "uninit_dynamic"])
def test_shared_memory_starts_every_block_poisoned(races_plain, case):
    """Block 1 reading static shared memory only block 0 wrote saw 42 before (static
    thread_local kept block 0's values); now the 0xCD poison, as a GPU gives no guarantee."""
    out = result(races_plain, case)
    assert out.startswith("wrong") and "POISON" in out and "0xcdcdcdcd" in out, out


@pytest.mark.parametrize("case", ["stale_static", "uninit_dynamic"])
def test_the_race_detector_reports_uninitialized_shared_reads(races_detector, case):
    out = result(races_detector, case)
    assert out.startswith("fault:") and "no thread of this block has written" in out, out


@pytest.mark.parametrize("schedule", ["order", "shuffle:1", "shuffle:2", "shuffle:5"])
def test_divergent_lanes_with_disjoint_sub_masks(races_plain, races_detector, schedule):
    assert result(races_plain, "warp_halves", schedule) == "ok"
    assert result(races_detector, "warp_halves", schedule) == "ok"  # and no false report


def test_the_race_detector_reports_a_read_across_unsynchronized_half_warps(races_detector):
    out = result(races_detector, "warp_cross_half")
    assert out.startswith("fault:") and "read-after-write race" in out and "__syncwarp" in out, out


# ---- the emulated device faults on a misaligned vector access, as a GPU does ----

ALIGNMENT_TEST = ROOT / "tests" / "emu" / "emu_alignment_test.cu"
# What setup.py compiles _C_emu's kernels with (and its runtime's handler of the check).
ALIGNMENT_FLAGS = ["-fsanitize=alignment", "-DCKC_EMU_ALIGNMENT_CHECK=1"]


@pytest.mark.parametrize("checked", [True, False], ids=["checked", "unchecked"])
def test_a_misaligned_16_byte_load_faults_only_where_checked(tmp_path, checked):
    exe = build(tmp_path, ALIGNMENT_TEST, ALIGNMENT_FLAGS if checked else [])
    assert "RESULT aligned ok" in run(exe, "aligned").stdout
    r = run(exe, "misaligned")
    if checked:
        assert "RESULT misaligned fault: kernel 'copy16_kernel'" in r.stdout, r.stdout
        assert "misaligned address: a 16-byte aligned access" in r.stdout, r.stdout
    else:
        # without the check the planted bug is no kernel fault: the host's aligned vector load
        # crashes the process, or the CPU reads the bytes as if nothing were wrong
        assert r.returncode != 0 or "RESULT misaligned ok" in r.stdout, r.stdout
