# SPDX-License-Identifier: Apache-2.0
"""The GPU is reached through the CUDA driver, opened at run time (csrc/gpu/cuda_driver.c):
`_C` links no CUDA library, imports and runs every CPU op where there is no driver, and
says why its GPU kernels cannot run.  Stand-ins for the driver library
(tests/cuda_standin/fake_cuda.c, chosen with COMFY_KITCHEN_C_CUDA_DRIVER) play a machine
without a GPU, a driver too old for the kernels and one that lacks an entry point; each runs
in a process of its own, since the driver is opened once per process."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from comfy_kitchen_c import _C

ROOT = Path(__file__).resolve().parent.parent
needs_cuda_build = pytest.mark.skipif(not _C.HAS_CUDA, reason="this build has no CUDA kernels")


def test_extension_links_no_cuda_library():
    """ldd of _C: the C library (and the loader) only; no libcuda, cudart or cuBLAS."""
    if sys.platform != "linux" or shutil.which("ldd") is None:
        pytest.skip("ldd lists Linux shared objects")
    out = subprocess.run(["ldd", _C.__file__], capture_output=True, text=True, check=True).stdout
    needed = [line.split()[0] for line in out.splitlines() if line.strip()]
    unexpected = [n for n in needed if not n.startswith(("linux-vdso", "libc.so", "/lib64/ld-linux", "ld-linux",
                                                         "libdl.so", "libpthread.so", "libm.so"))]
    assert unexpected == [], f"_C needs {unexpected}"


@needs_cuda_build
@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA driver is installed here")
def test_without_a_driver_the_gpu_kernels_say_why():
    why = _C.cuda_driver()
    assert why is not None and "no CUDA driver could be loaded" in why, why
    assert ("libcuda.so.1" if sys.platform == "linux" else "nvcuda.dll") in why
    assert _C.cuda_versions() == (0, _C.cuda_versions()[1]) and _C.cuda_versions()[1] >= 13000


@pytest.fixture(scope="module")
def standins(tmp_path_factory):
    """{"full": path, "missing": path}: the stand-in driver, whole and without an entry point."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None or sys.platform != "linux":
        pytest.skip("builds a Linux shared object with gcc")
    folder = tmp_path_factory.mktemp("cuda_standin")
    source = ROOT / "tests" / "cuda_standin" / "fake_cuda.c"
    built = {}
    for name, flags in (("full", []), ("missing", ["-DFAKE_CUDA_MISSING_CAPTURE_INFO"])):
        built[name] = folder / f"libcuda_{name}.so"
        subprocess.run([cc, "-shared", "-fPIC", "-O1", "-Wall", "-Werror", *flags, str(source), "-o",
                        str(built[name])], check=True)
    return built


CHILD = """
import json, torch
from comfy_kitchen_c import _C, ops
x = torch.randn(3, 40)
q, s = ops.quantize_int8_rowwise(x)  # a CPU op runs whatever the driver
print(json.dumps({"why": _C.cuda_driver(), "versions": _C.cuda_versions(), "cpu_rows": q.shape[0]}))
"""


def run_with_driver(library: str, mode: str) -> dict:
    import json
    env = dict(os.environ, COMFY_KITCHEN_C_CUDA_DRIVER=str(library), FAKE_CUDA_MODE=mode)
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["cpu_rows"] == 3
    return result


@needs_cuda_build
def test_a_machine_without_a_gpu(standins):
    r = run_with_driver(standins["full"], "no_device")
    assert "did not start: cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected" in r["why"], r
    assert r["versions"][0] == 0


@needs_cuda_build
def test_a_driver_too_old_for_the_kernels(standins):
    r = run_with_driver(standins["full"], "old")
    need = _C.kernels_driver(0)  # the oldest driver any image of the build needs (12.0 with CUDA 12 SASS)
    assert f"supports CUDA 11.8; this build's kernels need CUDA {need // 1000}.{need % 1000 // 10}" in r["why"], r


@needs_cuda_build
def test_a_driver_without_an_entry_point(standins):
    r = run_with_driver(standins["missing"], "ok")
    assert "has no cuStreamGetCaptureInfo_v2" in r["why"] and "older than CUDA 12.0" in r["why"], r


@needs_cuda_build
def test_a_usable_driver(standins):
    r = run_with_driver(standins["full"], "ok")
    assert r["why"] is None and r["versions"][0] == 13000, r


@needs_cuda_build
def test_a_driver_that_cannot_be_opened(tmp_path):
    r = run_with_driver(tmp_path / "no_such_libcuda.so", "ok")
    assert "no CUDA driver could be loaded" in r["why"] and "no_such_libcuda.so" in r["why"], r
