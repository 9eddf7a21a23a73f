# SPDX-License-Identifier: Apache-2.0
"""Builds tests/tsan/core_threads_test.c with the C core (thread pool, flight record, mirror
thread, watchdog, checked ops) and the emulated device, all under ThreadSanitizer, and runs it:
exit 0 only if the program passes and ThreadSanitizer reported nothing.

    python3 tests/tsan/run_tsan.py [--build-dir build/tsan] [--jobs 2]

The same sources as _C_emu (setup.py) without the Python layer (csrc/module/), so no Python runs under TSan (CPython and torch are not instrumented and would
make it report their own synchronization)."""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON_LAYER = "csrc/module/"
OTHER_DEVICES = {"csrc/gpu/runtime_cuda.c", "csrc/gpu/runtime_none.c", "csrc/gpu/blas_cublaslt.c",
                 "csrc/gpu/cuda_driver.c"}
ISA_FLAGS = {"csrc/cpu/kernels_avx2.c": ["-mavx2"],
             "csrc/cpu/kernels_avx512.c": ["-mavx2", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq"]}
COMMON = ["-fsanitize=thread", "-g", "-O1", "-fno-omit-frame-pointer", "-Icsrc", "-DCKC_EMULATED=1",
          "-DCKC_WITH_GPU=1", "-Wall", "-Wextra", "-Werror", "-Wno-tsan"]


def sources() -> list[tuple[str, list[str]]]:
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    out = []
    for p in sorted((ROOT / "csrc").rglob("*.c")):
        rel = p.relative_to(ROOT).as_posix()
        if rel.startswith(PYTHON_LAYER) or rel in OTHER_DEVICES or rel.endswith("_win32.c"):
            continue
        if rel in ISA_FLAGS and not x86:
            continue
        out.append((rel, ["-std=c11", *(["-DCKC_HAVE_X86_ISAS=1"] if x86 else []), *ISA_FLAGS.get(rel, [])]))
    cxx = ["-std=c++17", "-x", "c++"]
    out += [(p.relative_to(ROOT).as_posix(), cxx) for p in sorted((ROOT / "kernels").glob("*.cu"))]
    # Every emulator source, as setup.py's emulated_device_sources() lists them: a list kept here went stale once.
    out += [(p.relative_to(ROOT).as_posix(), cxx) for p in sorted((ROOT / "csrc" / "emu").glob("*.cpp"))]
    out.append(("tests/tsan/core_threads_test.c", ["-std=c11"]))
    return out


def compile_one(src: str, flags: list[str], build: Path) -> Path:
    obj = build / (src.replace("/", "_") + ".o")
    compiler = "g++" if "c++" in flags else "gcc"
    cmd = [compiler, *flags, *COMMON, "-c", src, "-o", str(obj)]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{r.stderr}")
    return obj


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--build-dir", default=str(ROOT / "build" / "tsan"))
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = p.parse_args(argv)
    build = Path(args.build_dir)
    build.mkdir(parents=True, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        objects = list(pool.map(lambda s: compile_one(s[0], s[1], build), sources()))
    exe = build / "core_threads_test"
    r = subprocess.run(["g++", "-fsanitize=thread", *map(str, objects), "-o", str(exe), "-lpthread", "-ldl", "-lm"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TSAN_OPTIONS": "halt_on_error=1 exitcode=66 second_deadlock_stack=1"}
        r = subprocess.run([str(exe), os.path.join(tmp, "flight-tsan.ckcf")], env=env, capture_output=True, text=True,
                           timeout=900)
    sys.stdout.write(r.stdout)
    sys.stderr.write(r.stderr)
    if r.returncode != 0 or "WARNING: ThreadSanitizer" in r.stderr or "OK" not in r.stdout:
        print(f"core_threads_test under ThreadSanitizer: exit {r.returncode}", file=sys.stderr)
        return 1
    print("ThreadSanitizer: no reports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
