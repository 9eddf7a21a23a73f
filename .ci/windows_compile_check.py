# SPDX-License-Identifier: Apache-2.0
"""Compiles the extension's C for 64-bit Windows, on Linux, with warnings as errors.

Nobody builds on Windows in CI, yet most users do (MSVC through setuptools).  This
check compiles what setup.py would compile there -- its sources, macros and include
folders, read from setup.py run as if on win32 -- once without and once with CUDA
(the latter when this machine has the CUDA headers), with two compilers:

  mingw-gcc   x86_64-w64-mingw32-gcc: Windows headers, LLP64 (long is 32 bits), the
              UCRT's printf formats, GNU compiler branches.
  clang-msvc  clang --target=x86_64-pc-windows-msvc: _MSC_VER is defined, so every
              `#if defined(_MSC_VER)` branch (Interlocked atomics, __cpuid,
              __declspec(thread), __forceinline) is compiled the way MSVC takes it.
              It reads mingw-w64's headers, which parse only under a GNU compiler:
              __GNUC__ is defined for them, and the two mingw macros that would then
              differ from MSVC's keywords are put back (see PRELUDE).

Both run with -std=c11 -Wall -Wextra -Werror -Wpedantic -Wvla: -Wpedantic rejects GNU
extensions to C11 (statement expressions, empty initializers, zero-length arrays...) and
-Wvla variable-length arrays, none of which MSVC's C compiler accepts.  Python.h comes
from this machine's Python with tools/windows/pyconfig.h in place of its pyconfig.h.

Not covered: linking and running; MSVC's own diagnostics (/W4 differs from -Wall -Wextra:
e.g. C4244/C4267 narrowing conversions); the host code of kernels/*.cu as MSVC sees it
behind nvcc; the GPU kernels on the emulated device (_C_emu is not built on Windows)."""
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools" / "windows"))
import setup_view  # noqa: E402  (the Windows tools' reading of setup.py)

WARNINGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-Wpedantic", "-Wvla"]
# MSVC's own keywords (__forceinline, __declspec, __int64) are extensions to -Wpedantic.
ALLOWED = {"clang-msvc": ["-Wno-language-extension-token"]}
# POSIX headers that mingw-w64 provides and MSVC does not (stdatomic.h and threads.h only
# in recent versions, behind flags): the *_posix.c files alone may use them.  Not listed
# because mingw's or clang's own headers include them: pthread_time.h, cpuid.h, x86intrin.h.
MSVC_MISSING_HEADERS = ["unistd.h", "pthread.h", "sched.h", "semaphore.h", "dlfcn.h", "dirent.h", "strings.h",
                        "libgen.h", "poll.h", "ucontext.h", "sys/mman.h", "sys/time.h", "sys/resource.h",
                        "sys/param.h", "sys/syscall.h", "stdatomic.h", "threads.h"]
# _mingw.h (included first, then guarded) defines these two for GCC; MSVC has them as keywords.
PRELUDE = "#include <_mingw.h>\n#undef __forceinline\n#define __MINGW_IMPORT extern __declspec(dllimport)\n"


def windows_extensions(with_cuda: bool):
    """setup.py's extension modules and ISA sources as a win32 build would see them
    (tools/windows/setup_view.py: setup.py run against stand-ins for setuptools)."""
    build = setup_view.windows_build(with_cuda)
    return build.ext_modules, build.isa_sources


def python_include(scratch: Path) -> Path:
    """This Python's headers with the Windows pyconfig.h (Python.h includes it by a
    quoted name, which finds the copy next to it first)."""
    folder = scratch / "python_include"
    shutil.copytree(sysconfig.get_path("include"), folder)
    shutil.copyfile(ROOT / "tools" / "windows" / "pyconfig.h", folder / "pyconfig.h")
    return folder


def msvc_missing_headers(scratch: Path) -> Path:
    """A folder that shadows the headers mingw-w64 has but MSVC lacks with an #error."""
    folder = scratch / "msvc_missing"
    for name in MSVC_MISSING_HEADERS:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(f'#error "<{name}>: MSVC has no such header"\n')
    return folder


def compilers(scratch: Path):
    prelude = scratch / "msvc_prelude.h"
    prelude.write_text(PRELUDE)
    mingw_include = Path("/usr/x86_64-w64-mingw32/include")
    return {
        # -D_UCRT: the C runtime of MSVC builds (C99 printf formats).
        "mingw-gcc": ["x86_64-w64-mingw32-gcc", "-D_UCRT", "-O2", "-c", "-o", os.devnull],
        "clang-msvc": ["clang", "--target=x86_64-pc-windows-msvc", "-fms-compatibility-version=19.28",
                       "-D__GNUC__=4", "-D__GNUC_MINOR__=9", "-include", str(prelude),
                       "-I", str(msvc_missing_headers(scratch)), "-isystem", str(mingw_include),
                       "-fsyntax-only"],
    }


def compile_commands(ext, isa_sources, python_dir: Path, compiler_cmds):
    build = "CUDA" if ("CKC_WITH_CUDA", "1") in ext.define_macros else "no CUDA"
    defines = [f"-D{k}={v}" for k, v in ext.define_macros]
    # Headers from outside the repository (Python's, the CUDA toolkit's) are not ours to fix.
    includes = [f"-I{ROOT / d}" for d in ext.include_dirs if not os.path.isabs(d)]
    includes += [arg for d in ext.include_dirs if os.path.isabs(d) for arg in ("-isystem", d)]
    includes += ["-isystem", str(python_dir)]
    sources = [(s, []) for s in ext.sources] + [(s, flags["unix"]) for s, flags in isa_sources.items()]
    for compiler, cmd in compiler_cmds.items():
        for source, isa_flags in sources:
            yield (f"{ext.name} ({build}), {compiler}: {source}",
                   cmd + WARNINGS + ALLOWED.get(compiler, []) + isa_flags + defines + includes + [str(ROOT / source)])


def run(job):
    label, cmd = job
    result = subprocess.run(cmd, capture_output=True, text=True)
    return label, result.returncode, result.stdout + result.stderr


def main() -> int:
    missing = [c for c in ("x86_64-w64-mingw32-gcc", "clang") if shutil.which(c) is None]
    if missing:
        print(f"windows_compile_check: {', '.join(missing)} not found", file=sys.stderr)
        return 2
    configurations = [windows_extensions(with_cuda=False)]
    cuda_ext, isa = windows_extensions(with_cuda=True)
    if any(("CKC_WITH_CUDA", "1") in e.define_macros for e in cuda_ext):
        configurations.append((cuda_ext, isa))
    else:
        print("windows_compile_check: no CUDA toolkit here; the CUDA build's C is not checked")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        python_dir, compiler_cmds = python_include(scratch), compilers(scratch)
        jobs = [job for exts, isa_sources in configurations for ext in exts
                for job in compile_commands(ext, isa_sources, python_dir, compiler_cmds)]
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            results = list(pool.map(run, jobs))
    failed = [(label, output) for label, rc, output in results if rc != 0 or output.strip()]
    for label, output in failed:
        print(f"== {label}\n{output}")
    print(f"windows_compile_check: {len(jobs) - len(failed)}/{len(jobs)} compiles clean"
          f" ({'with and without' if len(configurations) == 2 else 'without'} CUDA)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
