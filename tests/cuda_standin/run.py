# SPDX-License-Identifier: Apache-2.0
"""Builds the stand-in CUDA driver (tests/cuda_standin/standin_*.c: libckc_standin.so) and runs
pytest through it: `_C`'s real driver path (gpu/cuda_driver.c, runtime_cuda.c, the launchers,
blas_cublaslt.c) on CPU tensors, its kernels run by the emulated device (`_C_emu`).

    python3 tests/cuda_standin/run.py [--gpus 12.0] [--driver 13000] [pytest arguments]

With no pytest arguments it runs STANDIN_SUITES.  `--build-only` prints the library's path.
Needs gcc, a CUDA build of `_C` and `_C_emu` (an editable install: README)."""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = ROOT / "tests" / "cuda_standin"
SOURCES = ["standin_driver.c", "standin_streams.c", "standin_memory.c", "standin_launch.c", "standin_image.c",
           "standin_cublaslt.c"]

# What CI runs through the stand-in: the emulated device's kernel, linear and parity suites, whose GPU
# path then runs through the driver (the stand-in's own tests run in the test suite, each scenario in a
# process of its own: tests/test_standin_driver.py).
STANDIN_SUITES = ["tests/test_emulated_device.py", "tests/test_nvfp4_rotate.py", "tests/test_nvfp4_boundaries.py",
                  "tests/test_int8_linear.py", "tests/test_int8_fused.py", "tests/test_linear_gpu_path.py",
                  "tests/test_scaled_mm_nvfp4.py", "tests/test_fp8_parity.py", "tests/test_mxfp8_parity.py",
                  "tests/test_w4a4_parity.py", "tests/test_w4a8_parity.py", "tests/test_w4a8_quant.py",
                  "tests/test_awq_parity.py", "tests/test_rope_parity.py", "tests/test_rms_rope_parity.py",
                  "tests/test_rms_gated_residual_parity.py"]


def build(folder: Path | None = None) -> Path:
    """libckc_standin.so, rebuilt when a source or header changed (kept by content in build/standin)."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise SystemExit("the stand-in driver needs gcc")
    digest = hashlib.sha256()
    for name in sorted(p.name for p in HERE.glob("*.[ch]")):
        digest.update(name.encode() + (HERE / name).read_bytes())
    folder = folder or ROOT / "build" / "standin"
    lib = folder / f"libckc_standin-{digest.hexdigest()[:12]}.so"
    if not lib.exists():
        folder.mkdir(parents=True, exist_ok=True)
        part = lib.with_suffix(".part")
        subprocess.run([cc, "-std=c11", "-shared", "-fPIC", "-O1", "-g", "-Wall", "-Wextra", "-Werror",
                        "-fvisibility=hidden", f"-I{ROOT / 'csrc'}", *[str(HERE / s) for s in SOURCES],
                        "-o", str(part), "-ldl", "-lpthread", "-lm"], check=True)
        os.replace(part, lib)
    return lib


def environment(lib: Path, gpus: str, driver: int) -> dict:
    """The environment of a process whose CUDA driver and cuBLASLt are the stand-in."""
    import importlib.util

    spec = importlib.util.find_spec("comfy_kitchen_c._C_emu")
    if spec is None or spec.origin is None:
        raise SystemExit("the stand-in runs kernels on the emulated device: build _C_emu (pip install -e .)")
    return dict(os.environ, COMFY_KITCHEN_C_CUDA_DRIVER=str(lib), COMFY_KITCHEN_C_CUBLASLT=str(lib),
                CKC_STANDIN_KERNELS=spec.origin, CKC_STANDIN_GPUS=gpus, CKC_STANDIN_DRIVER=str(driver),
                CKC_TEST_DEVICE="standin")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpus", default="12.0", help="compute capabilities of the devices, e.g. 9.0,12.0")
    parser.add_argument("--driver", type=int, default=13000, help="the CUDA version the driver reports")
    parser.add_argument("--build-only", action="store_true")
    args, pytest_args = parser.parse_known_args(argv)
    lib = build()
    if args.build_only:
        print(lib)
        return 0
    env = environment(lib, args.gpus, args.driver)
    command = [sys.executable, "-m", "pytest", *(pytest_args or [*STANDIN_SUITES, "-q"])]
    return subprocess.run(command, cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
