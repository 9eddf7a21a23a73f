# SPDX-License-Identifier: Apache-2.0
"""What an extension imports from python3.dll, and an import library for exactly that.

No Windows Python is at hand to take python3.lib from, so the import library is made
from the objects themselves: every undefined Py*/_Py* symbol they reference (through
__imp_, as the headers declare the API dllimport) becomes an export of python3.dll in
a .def file, which dlltool turns into the import library.  python3.dll is the stable
ABI's DLL (it forwards to python3X.dll): an abi3 module linked to it loads under every
CPython >= 3.10.  Data symbols (the exception classes, type objects, None...) are
marked DATA: the headers declare them with PyAPI_DATA, the rest with PyAPI_FUNC."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

PYTHON_DLL = "python3.dll"
# Undefined symbols, as `nm -u` lists them: "__imp_PyLong_FromLong" or "PyLong_FromLong".
_UNDEFINED = re.compile(r"^\s*U\s+(?:__imp_)?(_?Py\w+)\s*$")
# PyAPI_DATA(type) name;  (the type may hold one level of parentheses)
_DATA_DECL = re.compile(r"PyAPI_DATA\((?:[^()]|\([^()]*\))*\)\s*(\w+)")


def python_symbols(nm: str, objects: list[Path]) -> list[str]:
    """The Py*/_Py* symbols the objects use and do not define, sorted."""
    out = subprocess.run([nm, "-u", *map(str, objects)], check=True, capture_output=True, text=True).stdout
    return sorted({m.group(1) for line in out.splitlines() if (m := _UNDEFINED.match(line))})


def data_symbols(include_dir: Path) -> set[str]:
    """Names the Python headers declare as data (PyAPI_DATA)."""
    names = set()
    for header in include_dir.rglob("*.h"):
        names.update(_DATA_DECL.findall(header.read_text(errors="replace")))
    return names


def write_def(path: Path, symbols: list[str], data: set[str]) -> None:
    lines = [f"LIBRARY {PYTHON_DLL}", "EXPORTS"]
    lines += [f"    {name} DATA" if name in data else f"    {name}" for name in symbols]
    path.write_text("\n".join(lines) + "\n")


def import_library(dlltool: str, def_file: Path, lib: Path) -> None:
    subprocess.run([dlltool, "--input-def", str(def_file), "--dllname", PYTHON_DLL,
                    "--output-lib", str(lib)], check=True)


def read_def(def_file: Path) -> list[tuple[str, bool]]:
    """(name, is_data) of each export of a .def file written by write_def."""
    exports = []
    for line in def_file.read_text().splitlines()[2:]:
        parts = line.split()
        if parts:
            exports.append((parts[0], parts[1:] == ["DATA"]))
    return exports
