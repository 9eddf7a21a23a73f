#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks what a Windows module needs at load time: its import table names only DLLs
every Windows 10+ machine with CPython has, and it exports its module's init function.

    python3 tools/windows/check_imports.py build/windows/_C.pyd
    python3 tools/windows/check_imports.py dist/comfy_kitchen_c-*-win_amd64.whl   (each .pyd in it)

Allowed (case-insensitive): KERNEL32.dll, python3.dll (the stable ABI's DLL, next to
python.exe), api-ms-win-crt-*.dll (the UCRT's API sets, part of Windows 10 and of the
UCRT update for older versions).  Anything else -- msvcrt.dll, vcruntime140.dll,
libgcc_s_seh-1.dll, libwinpthread-1.dll, python310.dll... -- would make the module fail
to load on a user's machine, or load only under one Python version: it fails the check
by name.  Reads the tables with objdump -p (mingw-w64's, else llvm-objdump, else the
system's, which reads PE files on Debian)."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ALLOWED = [re.compile(p, re.IGNORECASE) for p in
           (r"kernel32\.dll", r"python3\.dll", r"api-ms-win-crt-[a-z0-9-]+\.dll")]
OBJDUMPS = ["x86_64-w64-mingw32-objdump", "llvm-objdump", "objdump"]


def objdump() -> str:
    for name in OBJDUMPS:
        path = shutil.which(name)
        if path:
            return path
    raise SystemExit(f"check_imports: none of {', '.join(OBJDUMPS)} found (apt-get install binutils-mingw-w64-x86-64)")


def tables(path: Path) -> tuple[list[str], list[str]]:
    """(imported DLLs, exported names) from `objdump -p`, in either tool's format."""
    r = subprocess.run([objdump(), "-p", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"check_imports: {path}: objdump -p failed: {r.stderr.strip()}")
    text = r.stdout
    dlls = re.findall(r"DLL Name:\s*(\S+)", text)
    exports = re.findall(r"^\s*\[\s*\d+\]\s+(\S+)\s*$", text, re.MULTILINE)  # GNU: "[   0] PyInit__C"
    if "Export Table:" in text:  # llvm: "       1  0x6e8b0  PyInit__C"
        exports += re.findall(r"^\s*\d+\s+0x[0-9a-fA-F]+\s+(\S+)\s*$", text.split("Export Table:", 1)[1],
                              re.MULTILINE)
    return dlls, exports


def init_function(module: Path) -> str:
    """PyInit_<name> for <name>.pyd (or <name>.<tag>.pyd)."""
    return "PyInit_" + module.name.split(".")[0]


def check_module(path: Path, label: str) -> list[str]:
    """Problems of one module, each a line; none: it passes."""
    dlls, exports = tables(path)
    problems = [f"{label}: imports {d}, which is not KERNEL32.dll, python3.dll or api-ms-win-crt-*.dll"
                for d in dlls if not any(a.fullmatch(d) for a in ALLOWED)]
    if not dlls:
        problems.append(f"{label}: no import table found (not a PE file?)")
    init = init_function(path) if path.suffix.lower() == ".pyd" else None  # a plain .dll has no init function
    if init and init not in exports:
        problems.append(f"{label}: does not export {init} (exports: {', '.join(exports) or 'nothing'})")
    if not problems:
        crt = [d for d in dlls if d.lower().startswith("api-ms-win-crt-")]
        others = sorted({d for d in dlls if d not in crt}, key=str.lower)
        print(f"check_imports: {label}: imports {', '.join(others)} and {len(crt)} api-ms-win-crt-*.dll"
              f" ({', '.join(d[len('api-ms-win-crt-'):-len('-l1-1-0.dll')] for d in crt)})"
              + (f"; exports {init}" if init else ""))
    return problems


def check(path: Path) -> list[str]:
    if path.suffix.lower() != ".whl":
        return check_module(path, path.name)
    problems = []
    with zipfile.ZipFile(path) as zf, tempfile.TemporaryDirectory() as tmp:
        modules = [n for n in zf.namelist() if n.lower().endswith((".pyd", ".dll"))]
        if not any(n.lower().endswith(".pyd") for n in modules):
            return [f"{path.name}: holds no .pyd"]
        for name in modules:
            problems += check_module(Path(zf.extract(name, tmp)), f"{path.name}:{name}")
    return problems


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print(__doc__)
        return 2
    problems = check(Path(args[0]))
    for line in problems:
        print(f"check_imports: {line}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
