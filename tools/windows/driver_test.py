#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The CUDA driver's no-driver path of the cross-built _C.pyd, run under Wine.

    python3 tools/windows/driver_test.py [--build-dir build/windows]   (after build.py --device cuda)

tests/windows/driver_test.c is linked with the very objects of the driver's loader that
build.py linked into _C.pyd (csrc/gpu/cuda_driver.c, the Windows library and thread
code of csrc/platform, the errors of csrc/contract).  Under Wine there is no NVIDIA
driver: the loader must search nvcuda.dll, fail cleanly and name it in its reason (or,
where Wine offers an nvcuda.dll of its own, fail at cuInit or at a missing entry point
and say so)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import build  # noqa: E402
import setup_view  # noqa: E402
from wine import noise_free, session  # noqa: E402

ROOT = setup_view.ROOT
PROGRAM = "tests/windows/driver_test.c"
# The loader and what it stands on, by object name (build.object_path): the driver it needs
# comes from the kernels' images (fatbin_info.c over the generated fatbins.c).
PARTS = ("csrc_gpu_cuda_driver.c", "csrc_gpu_fatbin_info.c", "csrc_platform_library_win32.c",
         "csrc_platform_threads_win32.c", "csrc_platform_settings.c", "csrc_contract_status.c")
# What a reason may say: the library searched, or how the driver Wine offers failed.
REASONS = ("nvcuda.dll", "cuInit", "has no cu", "supports CUDA")


def program(build_dir: Path) -> Path:
    tc, flags, objects = build.cuda_objects(build_dir, PARTS, "driver_test")
    fatbins = sorted((build_dir / "objects").glob("*fatbins_fatbins.c.o"))[:1]
    if not fatbins:
        raise SystemExit("driver_test: the fatbins' object not built: run tools/windows/build.py --device cuda")
    out = build_dir / "driver_test"
    out.mkdir(exist_ok=True)
    exe = out / "driver_test.exe"
    build.test_program(tc, flags, PROGRAM, objects + fatbins, exe, False, "driver_test")
    return exe


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", type=Path, default=ROOT / "build" / "windows")
    p.add_argument("--wine-dir", type=Path, help="reuse the Wine prefix in this folder (default: a new one)")
    args = p.parse_args(argv)
    exe = program(args.build_dir.resolve())
    with session(args.wine_dir) as (wine, _):
        r = wine.run(exe)
    line = r.stdout.strip()
    if r.returncode != 0 or not line.startswith("driver: unavailable: ") or not any(w in line for w in REASONS):
        print(f"driver_test: exit {r.returncode}: {line}\n{noise_free(r.stderr)}", file=sys.stderr)
        return 1
    print(f"driver_test: under Wine, {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
