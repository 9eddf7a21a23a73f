# SPDX-License-Identifier: Apache-2.0
"""cuBLASLt's lazy loader (csrc/gpu/blas_cublaslt.c), built into a small program with the host
compiler beside the CUDA driver's loader (csrc/gpu/cuda_driver.c; no CUDA library is linked): it
finds cuBLASLt (here: the toolkit's, or torch's nvidia/cu13 through the directories the Python
layer passes) and binds every function the GEMMs call, and its error names the places searched.
Needs a cuBLASLt, not a GPU (the toolkit is how this machine has one)."""
import os
import subprocess
from pathlib import Path

import pytest
import torch

from conftest import NVCC

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tests" / "blas" / "blas_loader_test.c"
CUDA_HOME = Path(NVCC).resolve().parent.parent if NVCC else None


def torch_cuda_dirs() -> str:
    """What comfy_kitchen_c.ops passes to the loader (ops._blas_search_dirs)."""
    torch_dir = Path(torch.__file__).parent
    dirs = [torch_dir.parent / "nvidia" / "cu13" / "lib", torch_dir.parent / "nvidia" / "cublas" / "lib",
            torch_dir / "lib"]
    return os.pathsep.join(str(d) for d in dirs if d.is_dir())


@pytest.mark.skipif(CUDA_HOME is None or os.name == "nt", reason="needs the CUDA toolkit (Linux)")
def test_loader_finds_cublaslt_and_binds_every_function(tmp_path):
    exe = tmp_path / "blas_loader_test"
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-DCKC_WITH_CUDA=1", "-DCKC_WITH_GPU=1",
                    f"-I{ROOT / 'csrc'}", str(SOURCE),
                    *(str(ROOT / "csrc" / f) for f in ("contract/status.c", "platform/threads_posix.c",
                                                       "platform/library_posix.c", "gpu/blas_plan.c", "gpu/blas_tune.c",
                                                       "platform/mapped_file_posix.c", "platform/settings.c",
                                                       "gpu/cuda_driver.c", "gpu/fatbin_info.c")),
                    "-o", str(exe), "-ldl", "-lpthread"],
                   check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe), torch_cuda_dirs()], capture_output=True, text=True, timeout=60).stdout
    assert "searched: /nonexistent/libcublasLt.so.13, /nonexistent/libcublasLt.so.12" in out, out
    if "FAIL cuBLASLt (CUDA 12 or 13) was not found" in out:
        pytest.skip(f"no cuBLASLt on this machine: {out.splitlines()[-1]}")
    assert "loaded " in out and int(out.split("loaded ")[1]) >= 120000, out
