# SPDX-License-Identifier: Apache-2.0
"""Who runs the CPU kernels' parallel loops (csrc/cpu/parallel.c): torch's OpenMP team where
torch's libgomp is loaded (Linux wheels), else our pool; COMFY_KITCHEN_C_CPU_THREADS=pool forces
the pool.  Both give the same bits: each chunk of a loop computes the same values whichever
thread runs it."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

import comfy_kitchen_c.ops as ops
from comfy_kitchen_c import _C

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _libgomp_loaded() -> bool:
    try:
        with open(f"/proc/{os.getpid()}/maps") as maps:
            return any("libgomp" in os.path.basename(line.split()[-1]) for line in maps if "/" in line)
    except OSError:
        return False


def _in_child(code: str, **env) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT, **env})
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_the_runtime_is_torchs_team_where_its_libgomp_is_loaded():
    assert _C.cpu_threads() == ("openmp" if _libgomp_loaded() else "pool")


def test_the_setting_forces_our_pool():
    assert _in_child("import torch, comfy_kitchen_c._C as C; print(C.cpu_threads())",
                     COMFY_KITCHEN_C_CPU_THREADS="pool") == "pool"


def _calls(path: str) -> str:
    """Ops large enough to run on several threads, their outputs saved to path."""
    return f"""
import torch
import comfy_kitchen_c.ops as ops
torch.set_num_threads(4)
g = torch.Generator().manual_seed(3)
x = torch.randn(512, 3072, generator=g).to(torch.bfloat16)
w = torch.randint(-127, 128, (256, 3072), generator=g, dtype=torch.int8)
ws = torch.rand(256, generator=g) * 0.01
q, s = ops.quantize_int8_rowwise(x)
torch.save([q, s, ops.int8_linear(x, w, ws), ops.quantize_int8_tensorwise(x)[0],
            ops.dequantize_int8_simple(q, s), ops.rotate_int8_convrot_weight(x, 256)], {path!r})
"""


@pytest.mark.skipif(not _libgomp_loaded(), reason="torch's libgomp is not loaded here: the pool runs either way")
def test_torchs_team_and_our_pool_give_the_same_bits(tmp_path):
    team, pool = tmp_path / "team.pt", tmp_path / "pool.pt"
    _in_child(_calls(str(team)))
    _in_child(_calls(str(pool)), COMFY_KITCHEN_C_CPU_THREADS="pool")
    for a, b in zip(torch.load(team), torch.load(pool)):
        assert torch.equal(a.view(torch.uint8), b.view(torch.uint8))


def test_a_forked_child_runs_its_loops_on_our_pool():
    """libgomp's team does not survive fork (a child's parallel region waits for threads that are
    not there: torch's own ops hang in such a child): a child process of one that used the team
    runs our loops on our pool, with the same bits.  The child compares bytes through numpy, as
    a torch op there would hang."""
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    x = torch.randn(512, 3072, generator=torch.Generator().manual_seed(4))
    torch.set_num_threads(2)
    want = ops.quantize_int8_rowwise(x)[0].numpy().tobytes()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no pytest machinery, an exit code only
        ok = ops.quantize_int8_rowwise(x)[0].numpy().tobytes() == want and _C.cpu_threads() == "pool"
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    got = os.read(read, 1)
    os.waitpid(pid, 0)
    assert got == b"1"
