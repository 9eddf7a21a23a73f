#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Cross-compiles comfy_kitchen_c/_C.pyd for Windows x64 on Linux and packs the wheel.

    python3 tools/windows/build.py --outdir dist [--device none] [--build-dir build/windows]

What is compiled is what setup.py compiles for `_C` on win32 (tools/windows/setup_view.py
reads it): c_sources(device), the AVX2 and AVX-512 files with their flags, the
extension's macros, and setup.py's GCC flags (-O3, no FMA contraction, no fast-math,
warnings as errors) plus -Wpedantic -Wvla.  The toolchain is mingw-w64 GCC on the UCRT
(tools/windows/toolchain.py); the module links python3.dll through an import library
made from the symbols its objects use (tools/windows/python_imports.py) and everything
else statically.  Writes <outdir>/comfy_kitchen_c-<version>-cp310-abi3-win_amd64.whl;
the objects, the .def, the import library and _C.pyd stay in the build folder
(objects/<source>.o: tools/windows/kernel_test.py links its test program from them).

--device none builds the CPU kernels only; --device cuda (check.py's choice where nvcc is
found) adds the GPU kernels: their fatbins compiled by this machine's nvcc (device code,
the same for every OS) and the C that launches them through the CUDA driver, which _C.pyd
opens at run time (nvcuda.dll) and does not import.  A data file to embed in the module is
one line of EMBEDDED."""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import python_imports  # noqa: E402
import setup_view  # noqa: E402
import wheel  # noqa: E402
from toolchain import Toolchain  # noqa: E402

ROOT = setup_view.ROOT
EXTENSION = "comfy_kitchen_c._C"
# What the Windows compile check also demands (.ci/windows_compile_check.py): no GNU
# extensions to C11 and no variable-length arrays, which MSVC's C compiler rejects.
PORTABILITY = ["-Wpedantic", "-Wvla"]
# Data files linked into the module as read-only bytes: (file relative to the
# repository, C symbol of its first byte); the symbol <name>_end follows its last byte.
EMBEDDED: list[tuple[str, str]] = []


def python_include(folder: Path) -> Path:
    """This Python's headers with the Windows pyconfig.h in place of its own (Python.h
    includes it by a quoted name, which finds the copy next to it first)."""
    headers = Path(sysconfig.get_path("include"))
    if not (headers / "Python.h").exists():
        raise SystemExit(f"build: no Python.h in {headers} (apt-get install python3-dev)")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(headers, folder)
    shutil.copyfile(HERE / "pyconfig.h", folder / "pyconfig.h")
    return folder


def object_path(folder: Path, source: str) -> Path:
    return folder / (source.replace("/", "_") + ".o")


def compile_all(jobs: list[tuple[list[str], str]], workers: int) -> None:
    """Runs the compile commands; prints every failure's output, then fails."""
    def run(job):
        cmd, label = job
        r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        return label, r.returncode, r.stdout + r.stderr
    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        failed = [(label, out) for label, rc, out in pool.map(run, jobs) if rc != 0 or out.strip()]
    for label, out in failed:
        print(f"== {label}\n{out}", file=sys.stderr)
    if failed:
        raise SystemExit(f"build: {len(failed)} of {len(jobs)} compiles failed or warned")


def embedded_source(folder: Path, data: str, symbol: str) -> Path:
    """An assembler file that includes the data file's bytes (.incbin: no C array to
    generate, whatever the file's size) between two global symbols."""
    path = folder / f"{symbol}.S"
    path.write_text(f'    .section .rdata,"dr"\n    .balign 16\n    .globl {symbol}\n{symbol}:\n'
                    f'    .incbin "{(ROOT / data).as_posix()}"\n    .globl {symbol}_end\n{symbol}_end:\n')
    return path


def compile_flags(view: setup_view.SetupView, ext, python_include_dir: Path | None = None) -> list[str]:
    """setup.py's GCC flags, the portability warnings, the extension's macros and
    include folders (and Python's headers, for the module layer)."""
    flags = setup_view.gcc_c_flags(view) + PORTABILITY
    flags += [f"-D{k}={v}" for k, v in ext.define_macros]
    flags += [f"-I{ROOT / d}" for d in ext.include_dirs]
    return flags + (["-isystem", str(python_include_dir)] if python_include_dir else [])


def cuda_objects(build_dir: Path, parts: tuple[str, ...], who: str) -> tuple[Toolchain, list[str], list[Path]]:
    """For a test program over objects of the GPU build of _C.pyd: the toolchain, the flags _C's
    CUDA sources were compiled with, and the objects of `parts` (object names, build.object_path)."""
    objects = [build_dir / "objects" / f"{part}.o" for part in parts]
    missing = [o.name for o in objects if not o.exists()]
    if missing:
        raise SystemExit(f"{who}: {', '.join(missing)} not built: run tools/windows/build.py --device cuda")
    view = setup_view.windows_build(with_cuda=True)
    ext, _ = setup_view.extension_sources(view, EXTENSION, "cuda")
    ext.define_macros = ext.define_macros + view.namespace["CUDA_MACROS"]
    return Toolchain(build_dir), compile_flags(view, ext), objects


def test_program(tc: Toolchain, flags: list[str], source: str, objects: list[Path], out: Path, dll: bool,
                 who: str) -> None:
    """A test program (or DLL) under Wine: source compiled with flags and linked with objects of
    _C.pyd's build into out; a warning or an error stops the check, named by who."""
    obj = out.with_suffix(".o")
    for cmd, what in ((tc.compile_cmd(source, obj, flags), f"compiling {source}"),
                      (tc.link_cmd([*objects, obj], out, dll=dll), f"linking {out.name}")):
        r = subprocess.run(cmd, cwd=setup_view.ROOT, capture_output=True, text=True)
        if r.returncode != 0 or r.stderr.strip():
            raise SystemExit(f"{who}: {what} failed:\n{' '.join(cmd)}\n{r.stdout}{r.stderr}")


def fatbins_source(build_dir: Path, include_dirs: list[str]) -> Path:
    """The GPU kernels as C data (fatbins.c): nvcc on this machine compiles kernels/*.cu
    to fatbins, device code only, the same bytes whatever OS hosts them (setup.py's
    build_fatbins, run as this machine's build: nvcc is a Linux program here)."""
    native = setup_view.windows_build(with_cuda=True, win32=False)
    ns = native.namespace
    if ns["NVCC"] is None:
        raise SystemExit("build: --device cuda needs nvcc (CUDA_HOME, PATH or /usr/local/cuda) for the fatbins")
    folder = build_dir / "fatbins"
    folder.mkdir(parents=True, exist_ok=True)
    with setup_view.as_target(win32=False):
        generated, _ = ns["build_fatbins"](str(folder), include_dirs, ns["newest_header_mtime"]())
    return Path(generated)


def build(device: str, build_dir: Path, workers: int) -> tuple[Path, Path]:
    """Compiles and links _C.pyd; returns it and the folder of its objects.  Device
    "cuda": the GPU kernels as fatbins and the C that launches them through the CUDA
    driver (nvcuda.dll, opened at run time: nothing more to link)."""
    tc = Toolchain(build_dir)
    view = setup_view.windows_build(with_cuda=device != "none")
    ext, sources = setup_view.extension_sources(view, EXTENSION, device)
    if device == "cuda":
        # setup.py run as win32 finds no nvcc.exe here, so its _C has the CPU device's macros
        ext.define_macros = [m for m in ext.define_macros if m not in view.namespace["CUDA_MACROS"]] + \
            view.namespace["CUDA_MACROS"]
        sources = sources + [str(fatbins_source(build_dir, ext.include_dirs))]
    include = python_include(build_dir / "python_include")
    objects_dir = build_dir / "objects"
    shutil.rmtree(objects_dir, ignore_errors=True)
    objects_dir.mkdir(parents=True)
    flags = compile_flags(view, ext, include)
    units = [(s, []) for s in sources] + [(s, f["unix"]) for s, f in view.isa_sources.items()]
    jobs = [(tc.compile_cmd(s, object_path(objects_dir, s), flags + isa), s) for s, isa in units]
    jobs += [(tc.compile_cmd(str(embedded_source(build_dir, data, symbol)), objects_dir / f"{symbol}.o", []),
              data) for data, symbol in EMBEDDED]
    compile_all(jobs, workers)
    objects = sorted(objects_dir.glob("*.o"))

    symbols = python_imports.python_symbols(tc.nm, objects)
    def_file, lib = build_dir / "python3.def", build_dir / "libpython3.a"
    python_imports.write_def(def_file, symbols, python_imports.data_symbols(include))
    python_imports.import_library(tc.dlltool, def_file, lib)
    pyd = build_dir / "_C.pyd"
    subprocess.run(tc.link_cmd(objects, pyd, dll=True, libs=[str(lib)]), check=True)
    return pyd, objects_dir


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--outdir", required=True, type=Path, help="where the wheel is written")
    p.add_argument("--device", default="none", help="setup.py's device whose sources are built (default: none)")
    p.add_argument("--build-dir", type=Path, default=ROOT / "build" / "windows")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = p.parse_args(argv)
    start = time.monotonic()
    pyd, _ = build(args.device, args.build_dir.resolve(), args.jobs)
    whl = wheel.pack(ROOT, pyd, args.outdir.resolve())
    print(f"build: {pyd} ({pyd.stat().st_size // 1024} KiB), {whl} ({whl.stat().st_size // 1024} KiB)"
          f" in {time.monotonic() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
