# SPDX-License-Identifier: Apache-2.0
"""Compiles and links the CPU build of comfy_kitchen_c._C for 64-bit ARM Linux, on x86_64,
with warnings as errors: no ARM machine in CI, yet ARM Linux users (Grace, Jetson, Graviton,
Ampere) build from source, and x86-only code (intrinsics, <cpuid.h>) must stay behind the
guards that setup.py and the sources put around it.

The sources, macros and include folders are read from setup.py, run under stand-ins for
setuptools with platform.machine() answering "aarch64" and COMFY_KITCHEN_C_NO_CUDA=1, so the
list is the one a build on an ARM machine compiles (the AVX2/AVX-512 files are left out there:
setup.py's is_x86_64).  Each is compiled with aarch64-linux-gnu-gcc -std=c11 -Wall -Wextra
-Werror (plus setup.py's other flags), then linked into _C.abi3.so with -shared and without
libpython (CPython provides its symbols when it loads the module), as setup.py links it.

Checked: `file` says it is an ARM aarch64 shared object, and every symbol it leaves undefined
is either CPython's (Py*, _Py*) or one that the target's glibc exports (libc, libm, libpthread,
libdl, the loader): a call into code that the ARM build leaves out would show up here.  Not covered:
running it (no ARM machine or emulator); CUDA (no ARM CUDA toolkit here).  Python.h is this
machine's: the limited API's headers are the same on both architectures, and both are LP64."""
import os
import platform
import re
import runpy
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CC = "aarch64-linux-gnu-gcc"
SYSROOT_LIB = Path("/usr/aarch64-linux-gnu/lib")
# setup.py's flags for GCC (BuildExt.build_extensions) with warnings as errors; -fPIC as setuptools adds it.
FLAGS = ["-std=c11", "-O3", "-Wall", "-Wextra", "-Werror", "-fno-math-errno", "-fno-trapping-math",
         "-ffp-contract=off", "-fvisibility=hidden", "-fPIC"]
GLIBC_LIBRARIES = ["libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "ld-linux-aarch64.so.1"]


class Extension:
    """Stands in for setuptools.Extension: the check needs only what setup.py passes it."""

    def __init__(self, name, sources, **fields):
        self.name, self.sources = name, sources
        self.libraries = []
        self.__dict__.update(fields)


def arm_extension():
    """setup.py's comfy_kitchen_c._C as a CPU-only build on an aarch64 machine would see it."""
    captured = {}
    stand_ins = {name: types.ModuleType(name) for name in
                 ("setuptools", "setuptools.command", "setuptools.command.build_ext")}
    stand_ins["setuptools"].Extension = Extension
    stand_ins["setuptools"].setup = lambda **kw: captured.update(kw)
    stand_ins["setuptools.command.build_ext"].build_ext = object
    saved_modules = {name: sys.modules.get(name) for name in stand_ins}
    saved_machine, saved_no_cuda = platform.machine, os.environ.get("COMFY_KITCHEN_C_NO_CUDA")
    sys.modules.update(stand_ins)
    platform.machine = lambda: "aarch64"
    os.environ["COMFY_KITCHEN_C_NO_CUDA"] = "1"
    try:
        runpy.run_path(str(ROOT / "setup.py"))
    finally:
        platform.machine = saved_machine
        for name, module in saved_modules.items():
            if module is None:
                sys.modules.pop(name)
            else:
                sys.modules[name] = module
        if saved_no_cuda is None:
            os.environ.pop("COMFY_KITCHEN_C_NO_CUDA")
        else:
            os.environ["COMFY_KITCHEN_C_NO_CUDA"] = saved_no_cuda
    (ext,) = [e for e in captured["ext_modules"] if e.name == "comfy_kitchen_c._C"]
    return ext


def compile_one(job):
    source, cmd = job
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    return source, result.returncode, result.stdout + result.stderr


def exported_by_glibc() -> set[str]:
    """Every dynamic symbol the target's glibc libraries define."""
    names = set()
    for lib in GLIBC_LIBRARIES:
        out = subprocess.run(["readelf", "--dyn-syms", "-W", SYSROOT_LIB / lib], check=True,
                             capture_output=True, text=True).stdout
        for line in out.splitlines():
            fields = line.split()
            if len(fields) >= 8 and fields[6] != "UND":
                names.add(fields[7].split("@")[0])
    return names


def undefined_symbols(library: Path) -> list[tuple[str, str]]:
    """(name, binding) of each symbol library leaves to the loader."""
    out = subprocess.run(["readelf", "--dyn-syms", "-W", library], check=True, capture_output=True, text=True).stdout
    return [(f[7].split("@")[0], f[4]) for f in (line.split() for line in out.splitlines())
            if len(f) >= 8 and f[6] == "UND"]


def main() -> int:
    missing = [tool for tool in (CC, "file", "readelf") if shutil.which(tool) is None]
    if missing:
        print(f"aarch64_compile_check: {', '.join(missing)} not found "
              "(Debian: apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)", file=sys.stderr)
        return 2
    if not (SYSROOT_LIB.parent / "include" / "stdio.h").is_file():
        print(f"aarch64_compile_check: no ARM glibc headers in {SYSROOT_LIB.parent / 'include'} "
              "(Debian: apt-get install libc6-dev-arm64-cross)", file=sys.stderr)
        return 2
    ext = arm_extension()
    x86 = [s for s in ext.sources if s.endswith(("_avx2.c", "_avx512.c"))]
    if x86 or ("CKC_HAVE_X86_ISAS", "1") in ext.define_macros:
        print("aarch64_compile_check: setup.py gave the ARM build x86 sources or macros", file=sys.stderr)
        return 1
    defines = [f"-D{k}={v}" for k, v in ext.define_macros]
    includes = [f"-I{d}" for d in ext.include_dirs] + ["-isystem", sysconfig.get_path("include")]
    with tempfile.TemporaryDirectory() as tmp:
        objects = [Path(tmp) / (re.sub(r"[/\\]", "_", s) + ".o") for s in ext.sources]
        jobs = [(s, [CC, *FLAGS, *defines, *includes, "-c", s, "-o", str(o)]) for s, o in zip(ext.sources, objects)]
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            results = list(pool.map(compile_one, jobs))
        failed = [(s, out) for s, rc, out in results if rc != 0 or out.strip()]
        for source, output in failed:
            print(f"== {source}\n{output}")
        if failed:
            print(f"aarch64_compile_check: {len(failed)}/{len(jobs)} sources failed to compile clean")
            return 1
        library = Path(tmp) / "_C.abi3.so"
        link = subprocess.run([CC, "-shared", "-o", str(library), *map(str, objects),
                               *[f"-l{lib}" for lib in ext.libraries]], capture_output=True, text=True)
        if link.returncode != 0 or link.stdout.strip() or link.stderr.strip():
            print(f"aarch64_compile_check: link failed:\n{link.stdout}{link.stderr}")
            return 1
        kind = subprocess.run(["file", "-b", library], check=True, capture_output=True, text=True).stdout.strip()
        if not ("ELF 64-bit" in kind and "ARM aarch64" in kind and "shared object" in kind):
            print(f"aarch64_compile_check: _C.abi3.so is not an aarch64 shared object: {kind}")
            return 1
        glibc = exported_by_glibc()
        unknown = sorted(name for name, binding in undefined_symbols(library)
                         if binding != "WEAK" and not name.startswith(("Py", "_Py")) and name not in glibc)
        if unknown:
            print(f"aarch64_compile_check: _C.abi3.so needs symbols neither CPython nor glibc defines: "
                  f"{', '.join(unknown)}")
            return 1
        needed = re.findall(r"\(NEEDED\).*\[(.+)\]", subprocess.run(["readelf", "-d", library], check=True,
                                                                   capture_output=True, text=True).stdout)
        print(f"aarch64_compile_check: {len(jobs)} sources compile clean; _C.abi3.so "
              f"({library.stat().st_size / 1e6:.1f} MB): {kind.split(',')[0]}, ARM aarch64, needs {', '.join(needed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
