#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""cuBLASLt's search of the cross-built _C.pyd (csrc/gpu/blas_load.c), run under Wine.

    python3 tools/windows/blas_load_test.py [--build-dir build/windows]   (after build.py --device cuda)

tests/windows/blas_load_test.c is linked with the very object of the search that build.py linked
into _C.pyd, beside a stand-in cublasLt64_13.dll (tests/windows/fake_cublaslt.c) put where users'
setups put cuBLASLt: in a folder given to AddDllDirectory (what os.add_dll_directory does, as torch
does for its NVIDIA packages), and in CUDA_HOME\\bin\\x64 (CUDA 13's place for its DLLs).  The
search must find it in both."""
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
PROGRAM = "tests/windows/blas_load_test.c"
FAKE = "tests/windows/fake_cublaslt.c"
PARTS = ("csrc_gpu_blas_load.c", "csrc_platform_settings.c", "csrc_platform_threads_win32.c")


def programs(build_dir: Path) -> tuple[Path, Path]:
    tc, flags, objects = build.cuda_objects(build_dir, PARTS, "blas_load_test")
    out = build_dir / "blas_load_test"
    out.mkdir(exist_ok=True)
    # the DLL is built apart: beside the program, Windows' own search would find it first
    (out / "dll").mkdir(exist_ok=True)
    exe, dll = out / "blas_load_test.exe", out / "dll" / "cublasLt64_13.dll"
    build.test_program(tc, flags, PROGRAM, objects, exe, False, "blas_load_test")
    build.test_program(tc, [], FAKE, [], dll, True, "blas_load_test")
    return exe, dll


def windows_path(path: Path) -> str:
    """path as a Windows program under Wine sees it (drive Z: is the host's root)."""
    return "Z:" + str(path).replace("/", "\\")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", type=Path, default=ROOT / "build" / "windows")
    p.add_argument("--wine-dir", type=Path, help="reuse the Wine prefix in this folder (default: a new one)")
    args = p.parse_args(argv)
    build_dir = args.build_dir.resolve()
    exe, dll = programs(build_dir)
    added = build_dir / "blas_load_test" / "added"
    cuda_home = build_dir / "blas_load_test" / "cuda"
    for folder in (added, cuda_home / "bin" / "x64"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / dll.name).write_bytes(dll.read_bytes())
    expected = {"added": windows_path(added / dll.name), "cuda_home": windows_path(cuda_home / "bin" / "x64" / dll.name)}
    failed = 0
    with session(args.wine_dir) as (wine, _):
        for case, cmd, home in (("added", [exe, "added", windows_path(added)], None),
                                ("cuda_home", [exe, "cuda_home"], windows_path(cuda_home))):
            wine.env.pop("CUDA_HOME", None)
            if home:
                wine.env["CUDA_HOME"] = home
            r = wine.run(*cmd)
            line = r.stdout.strip()
            ok = r.returncode == 0 and line.lower() == f"found {expected[case]}".lower()
            print(f"blas_load_test: {case}: {line}")
            if not ok:
                print(noise_free(r.stderr), file=sys.stderr)
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
