# SPDX-License-Identifier: Apache-2.0
"""The int8 GEMM's algorithm chosen by timing once per shape class (csrc/gpu/blas_tune.c, issue 22
item 1), on the emulated device with candidate times the tests make up (blas_fake_timings): the
fastest eligible candidate is taken, and only eligible ones are timed; a class (M rounded up to a
power of two, N, K, ...) is timed once, later M of the class reuse the choice; a candidate that
fails to run is passed over; inside a capture, or with tuning off, nothing is timed and the
heuristic's first eligible answer is taken; COMFY_KITCHEN_C_GEMM_CACHE's file makes a choice
survive a restart (and entries of another GPU, driver or library are ignored); doctor lists the
choices.  The results never depend on the algorithm (int32 sums are exact), which
tests/test_linear_gpu_path.py checks against the CPU path for every GEMM here."""
import subprocess
import sys
from pathlib import Path

import pytest

from test_linear_gpu_path import DEFAULT_HEURISTIC, MIB, gemm

emu = pytest.importorskip("comfy_kitchen_c._C_emu")

ROOT = Path(__file__).resolve().parent.parent
# Five candidates: 0 splits K (never timed), 1..4 eligible.
FIVE = [(1, 0, 2, 0), (1, MIB, 1, 0), (1, 0, 1, 0), (1, 2 * MIB, 1, 0), (1, 0, 1, 0)]
RUNS_PER_CANDIDATE = 6  # a warm-up and five timed GEMMs (blas_cublaslt.c, mirrored in blas_emu.c)


@pytest.fixture
def blas():
    emu.blas_reset(256)
    emu.blas_tuning(1, "")
    emu.blas_fake_heuristic(FIVE)
    emu.blas_fake_timings()
    yield emu
    emu.blas_fake_capturing(False)
    emu.blas_fake_timings()
    emu.blas_fake_heuristic(DEFAULT_HEURISTIC)
    emu.blas_tuning(-1, None)
    emu.blas_reset(256)


def choices():
    return [(c["m_bucket"], c["n"], c["k"], c["index"], c["candidates"], c["source"]) for c in emu.blas_choices()]


def test_the_fastest_eligible_candidate_is_taken(blas):
    blas.blas_fake_timings(0.1, 9.0, 5.0, 2.0, 7.0)  # 0 would win but splits K: never timed
    gemm(64)
    s = blas.blas_stats()
    assert (s["last_choice"], s["tunings"], s["timed"]) == (3, 1, 4 * RUNS_PER_CANDIDATE)
    assert choices() == [(64, 48, 64, 3, 4, "timing")]
    assert emu.blas_choices()[0]["us"] == pytest.approx(2.0)


def test_ties_keep_the_heuristics_order(blas):
    gemm(64)  # every candidate 1 us
    assert blas.blas_stats()["last_choice"] == 1


def test_a_class_is_timed_once_and_serves_every_m_in_it(blas):
    """The GEMM's rows are padded to multiples of 32 (contract/linear_plan.h): 100 rows are 128,
    70 are 96 (both of the class M <= 128), 20 are 32."""
    blas.blas_fake_timings(1.0, 3.0, 3.0, 3.0, 0.5)
    gemm(100)
    timed = blas.blas_stats()["timed"]
    blas.blas_fake_timings(1.0, 0.1, 3.0, 3.0, 3.0)  # would now pick 1: not asked again
    gemm(100, seed=1)  # the same plan
    gemm(70)  # a new plan, the same class
    s = blas.blas_stats()
    assert (s["misses"], s["timed"], s["last_choice"]) == (2, timed, 4)
    gemm(20)  # the class of 32: timed
    s = blas.blas_stats()
    assert (s["timed"], s["tunings"], s["last_choice"]) == (2 * timed, 2, 1)
    assert sorted(choices()) == [(32, 48, 64, 1, 4, "timing"), (128, 48, 64, 4, 4, "timing")]


def test_a_candidate_that_fails_to_run_is_passed_over(blas):
    blas.blas_fake_timings(1.0, -1.0, -1.0, 4.0, 5.0)
    gemm(64)
    assert blas.blas_stats()["last_choice"] == 3
    blas.blas_reset()
    blas.blas_fake_timings(1.0, -1.0, -1.0, -1.0, -1.0)  # none runs: the heuristic's first eligible
    gemm(64)
    assert (blas.blas_stats()["last_choice"], choices()) == (1, [(64, 48, 64, 1, 4, "heuristic")])


def test_a_heuristic_choice_does_not_stop_timing(blas):
    """Where no candidate could be timed, the heuristic's choice serves the plan; another M of the
    class is timed again, and a timed choice is never replaced by a heuristic one."""
    blas.blas_fake_timings(1.0, -1.0, -1.0, -1.0, -1.0)
    gemm(100)
    assert choices() == [(128, 48, 64, 1, 4, "heuristic")]
    blas.blas_fake_timings(1.0, 5.0, 0.5, 5.0, 5.0)
    gemm(70)  # the same class, a new plan: timed now
    assert (blas.blas_stats()["last_choice"], choices()) == (2, [(128, 48, 64, 2, 4, "timing")])
    blas.blas_fake_timings(1.0, -1.0, -1.0, -1.0, -1.0)
    gemm(120, n=48)  # 128 rows: the first plan, cached; and a timed class keeps its choice
    assert choices() == [(128, 48, 64, 2, 4, "timing")]


def test_tuning_off_takes_the_heuristic(blas):
    blas.blas_tuning(0, "")
    blas.blas_fake_timings(1.0, 9.0, 9.0, 0.5, 9.0)
    gemm(64)
    s = blas.blas_stats()
    assert (s["last_choice"], s["timed"], s["tunings"]) == (1, 0, 0)
    assert choices() == [(64, 48, 64, 1, 4, "heuristic")]


def test_inside_a_capture_nothing_is_timed_nor_kept(blas):
    gemm(16)
    blas.blas_reset()
    blas.blas_fake_timings(1.0, 9.0, 9.0, 0.5, 9.0)
    blas.blas_fake_capturing(True)
    gemm(64)
    assert (blas.blas_stats()["timed"], blas.blas_stats()["last_choice"], choices()) == (0, 1, [])
    blas.blas_fake_capturing(False)
    gemm(48)  # the same class outside the capture: timed now
    assert (blas.blas_stats()["last_choice"], choices()) == (3, [(64, 48, 64, 3, 4, "timing")])


def test_the_cache_file_survives_a_restart(blas, tmp_path):
    cache = tmp_path / "gemm.tsv"
    blas.blas_tuning(1, str(cache))
    blas.blas_fake_timings(1.0, 9.0, 0.5, 9.0, 9.0)
    gemm(64)
    lines = cache.read_text().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ckc-gemm-1\temulated device\t0\t0\t")
    # A restart: every choice forgotten; the file is read again, timings that would choose otherwise
    blas.blas_reset()
    blas.blas_fake_timings(1.0, 0.1, 9.0, 9.0, 9.0)
    gemm(64)
    s = blas.blas_stats()
    assert (s["last_choice"], s["timed"], s["tunings"], s["from_file"]) == (2, 0, 0, 1)
    assert choices() == [(64, 48, 64, 2, 4, "cache file")]
    # Another GPU's line (or a damaged one) is not ours: the class is timed again
    cache.write_text(lines[0].replace("emulated device", "NVIDIA H200") + "\nckc-gemm-1\tgarbage")
    blas.blas_reset()
    gemm(64)
    assert (blas.blas_stats()["last_choice"], blas.blas_stats()["tunings"]) == (1, 1)
    # the unfinished last line (a process killed while writing) was ended before the new entry
    now = cache.read_text().splitlines()
    assert len(now) == 3 and now[1] == "ckc-gemm-1\tgarbage" and now[2].startswith("ckc-gemm-1\temulated device\t")


def test_doctor_lists_the_choices(tmp_path):
    """doctor reads the cache file (another process's choices) and names each class."""
    cache = tmp_path / "gemm.tsv"
    script = (
        "import torch\n"
        "from comfy_kitchen_c import _C_emu as emu\n"
        "import test_linear_gpu_path as t\n"
        f"emu.blas_tuning(1, {str(cache)!r})\n"
        "emu.blas_fake_timings(1.0, 2.0, 0.5)\n"
        "t.gemm(64)\n")
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT / "tests")
    out = subprocess.run([sys.executable, "-m", "comfy_kitchen_c", "doctor"], capture_output=True, text=True,
                         env={**__import__("os").environ, "COMFY_KITCHEN_C_GEMM_CACHE": str(cache)}, cwd=ROOT)
    assert "GEMM algorithms" in out.stdout, out.stdout + out.stderr
    assert "emulated device" in out.stdout and "M <= 64, N 48, K 64" in out.stdout, out.stdout
