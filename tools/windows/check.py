#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The Windows wheel, built from a clean clone and checked, each step timed (CI's
windows_wheel step; docs/windows.md).

    python3 tools/windows/check.py [--no-clone] [--keep DIR]

  build    tools/windows/build.py: _C.pyd cross-compiled (warnings as errors), the wheel;
           with the GPU kernels (--device cuda) where nvcc is found: every architecture
           of setup.py's list (CI takes their fatbins from the editable install's,
           COMFY_KITCHEN_C_FATBIN_CACHE)
  wheel    tools/windows/check_wheel.py: WHEEL, METADATA, RECORD, contents; pip installs it
  imports  tools/windows/check_imports.py: only KERNEL32, python3 and api-ms-win-crt-* DLLs;
           PyInit__C exported
  wine     a new Wine prefix (the first start: what a fresh CI machine pays once)
  kernels  tools/windows/kernel_test.py: the CPU kernels' objects of _C.pyd under Wine
           give the native build's digests, every ISA this CPU has
  load     tools/windows/load_test.py: _C.pyd loads under Wine beside a stub python3.dll
           (and not without one), PyInit__C found
  driver   tools/windows/driver_test.py (GPU build): the CUDA driver's loader of _C.pyd,
           under Wine without an NVIDIA driver, looks for nvcuda.dll, fails cleanly and
           says why
  blas_load tools/windows/blas_load_test.py (GPU build): cuBLASLt's search of _C.pyd finds
           a stand-in cublasLt64_13.dll in a folder os.add_dll_directory gave and in
           CUDA_HOME\\bin\\x64

The clone is of HEAD (committed work only, as CI sees it); --no-clone checks this
working tree instead.  Everything is written under a temporary folder (or --keep DIR,
kept afterwards).  Exit 0 only if every step passes; the first failure stops."""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from wine import Wine  # noqa: E402

ROOT = HERE.parents[1]


def step(name: str, times: list, cmd: list[str], cwd: Path) -> None:
    print(f"== {name}", flush=True)
    start = time.monotonic()
    r = subprocess.run(cmd, cwd=cwd)
    times.append((name, time.monotonic() - start))
    if r.returncode != 0:
        raise SystemExit(f"windows_wheel: step {name} failed (exit {r.returncode}): {' '.join(cmd)}")


def run(work: Path, clone: bool) -> list:
    times = []
    src = work / "src"
    if clone:
        step("clone", times, ["git", "clone", "--quiet", str(ROOT), str(src)], work)
    else:
        src = ROOT
    tools, build_dir, dist = src / "tools" / "windows", work / "build", work / "dist"
    py = sys.executable
    device = "cuda" if shutil.which("nvcc") or Path("/usr/local/cuda/bin/nvcc").exists() else "none"
    step("build", times, [py, str(tools / "build.py"), "--outdir", str(dist), "--build-dir", str(build_dir),
                          "--device", device], src)
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"windows_wheel: expected one wheel in {dist}, found {[w.name for w in wheels]}")
    step("wheel", times, [py, str(tools / "check_wheel.py"), str(wheels[0])], src)
    step("imports", times, [py, str(tools / "check_imports.py"), str(wheels[0])], src)
    wine = Wine(work)
    try:
        print("== wine", flush=True)
        times.append(("wine", wine.boot()))
        shared = ["--build-dir", str(build_dir), "--wine-dir", str(work)]
        step("kernels", times, [py, str(tools / "kernel_test.py"), *shared], src)
        step("load", times, [py, str(tools / "load_test.py"), *shared], src)
        if device == "cuda":
            step("driver", times, [py, str(tools / "driver_test.py"), *shared], src)
            step("blas_load", times, [py, str(tools / "blas_load_test.py"), *shared], src)
    finally:
        wine.stop()
    print(f"wheel: {wheels[0].name}, {wheels[0].stat().st_size / 1024:.0f} KiB;"
          f" _C.pyd {(build_dir / '_C.pyd').stat().st_size / 1024:.0f} KiB")
    return times


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--no-clone", action="store_true", help="check this working tree, not a clone of HEAD")
    p.add_argument("--keep", type=Path, help="work in this folder (emptied first) and keep it")
    args = p.parse_args(argv)
    start = time.monotonic()
    if args.keep:
        shutil.rmtree(args.keep, ignore_errors=True)
        args.keep.mkdir(parents=True)
        times = run(args.keep.resolve(), not args.no_clone)
    else:
        with tempfile.TemporaryDirectory(prefix="ckc-windows-") as tmp:
            times = run(Path(tmp), not args.no_clone)
    print("windows_wheel: " + ", ".join(f"{name} {s:.1f} s" for name, s in times)
          + f"; total {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
