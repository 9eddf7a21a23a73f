# SPDX-License-Identifier: Apache-2.0
"""The cross toolchain for Windows x64: Debian's mingw-w64 GCC, linked against the UCRT.

Why this one (docs/windows.md has the comparison with zig cc): CI already installs it
for .ci/windows_compile_check.py, it is the GCC 12 that builds the Linux wheel (same
optimiser, same flags), and it needs nothing downloaded or built on first use.

Its default C runtime is the old msvcrt.dll; CPython's Windows builds use the UCRT
(ucrtbase.dll, reached through the api-ms-win-crt-* API sets).  A specs file (GCC's
own link recipe, dumped and edited) swaps -lmsvcrt for -lucrt, -D_UCRT makes the
headers declare the UCRT's functions, and libgcc is linked statically, so a module
imports KERNEL32.dll, the api-ms-win-crt-*.dll and what it links on purpose
(python3.dll) only.  The win32 thread model GCC is preferred: its runtime needs no
libwinpthread."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

TRIPLE = "x86_64-w64-mingw32"
# -win32 first: the thread model whose libgcc needs no libwinpthread (the plain name
# is an alternative that may point to the -posix one).
GCC_CANDIDATES = [f"{TRIPLE}-gcc-win32", f"{TRIPLE}-gcc"]
APT_HINT = "apt-get install gcc-mingw-w64-x86-64 binutils-mingw-w64-x86-64"


def tool(name: str) -> str:
    """A binutils program of the cross toolchain (nm, dlltool, objdump...)."""
    path = shutil.which(f"{TRIPLE}-{name}")
    if path is None:
        raise SystemExit(f"{TRIPLE}-{name} not found ({APT_HINT})")
    return path


def gcc() -> str:
    for name in GCC_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit(f"no mingw-w64 GCC ({' or '.join(GCC_CANDIDATES)}) found ({APT_HINT})")


def ucrt_specs(cc: str, folder: Path) -> Path:
    """GCC's specs with the UCRT in place of msvcrt.dll (written once per build folder).
    moldname (msvcrt's POSIX aliases) goes too: the UCRT's libucrt.a has its own, and
    Debian's libmoldname.a would import them from msvcrt.dll."""
    specs = subprocess.run([cc, "-dumpspecs"], check=True, capture_output=True, text=True).stdout
    if "-lmsvcrt" not in specs:
        raise SystemExit(f"{cc} -dumpspecs names no -lmsvcrt: unknown GCC layout, cannot swap in the UCRT")
    path = folder / "ucrt.specs"
    path.write_text(specs.replace("-lmoldname", "").replace("-lmsvcrt", "-lucrt"))
    return path


class Toolchain:
    """Compiles C for x86_64 Windows and links DLLs and programs against the UCRT."""

    def __init__(self, folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self.cc = gcc()
        self.specs = ucrt_specs(self.cc, folder)
        self.nm, self.dlltool, self.objdump = tool("nm"), tool("dlltool"), tool("objdump")

    def compile_cmd(self, source: str, obj: Path, flags: list[str]) -> list[str]:
        return [self.cc, f"-specs={self.specs}", "-D_UCRT", *flags, "-c", source, "-o", str(obj)]

    def link_cmd(self, objects: list[Path], out: Path, *, dll: bool, libs: list[str] = ()) -> list[str]:
        """-static: libgcc (and anything else GCC adds) from archives, no libgcc_s DLL;
        -s: no COFF symbol table (the exports stay); --no-insert-timestamp: the same
        bytes from the same objects."""
        kind = ["-shared"] if dll else []
        return [self.cc, f"-specs={self.specs}", *kind, "-static", "-s", "-Wl,--no-insert-timestamp",
                *map(str, objects), *libs, "-o", str(out)]
