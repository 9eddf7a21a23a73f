# SPDX-License-Identifier: Apache-2.0
"""setup.py as a Windows build would see it, read on any OS.

setup.py is the one list of what `_C` is made of (sources, ISA sources and their
flags, macros, include folders).  The Windows tools read it instead of keeping a
second list: setup.py runs against stand-ins for setuptools (its real import would
read this platform's build configuration) with sys.platform = "win32" and an x86-64
machine, and what it hands setup() is captured.  Used by tools/windows/build.py and
.ci/windows_compile_check.py."""
from __future__ import annotations

import contextlib
import os
import platform
import runpy
import sys
import threading
import types
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# as_target swaps process-wide state (sys.platform, sys.modules, os.environ): one at a time.
_TARGET_LOCK = threading.RLock()


class Extension:
    """Stands in for setuptools.Extension: the tools need only what setup.py passes it."""

    def __init__(self, name, sources, **fields):
        self.name, self.sources = name, sources
        self.__dict__.update(fields)


class _BuildExt:
    """Stands in for setuptools' build_ext: setup.py's BuildExt sets its flags, then
    calls this, which builds nothing."""

    def build_extensions(self):
        pass


@dataclass
class SetupView:
    """What setup.py builds on win32 (or, win32=False, on this machine): its extension
    modules, its ISA sources with their flags, and its namespace (c_sources,
    DEVICE_SOURCES, BuildExt...), whose functions read sys.platform when called: call
    them inside as_target()."""
    ext_modules: list
    isa_sources: dict
    namespace: dict
    win32: bool = True


@contextlib.contextmanager
def as_target(env: dict[str, str] | None = None, win32: bool = True):
    """sys.platform = "win32", an AMD64 machine (unless win32=False: this machine as it
    is), stand-ins for setuptools and the given environment variables, all put back on
    exit.  Threads reading setup.py at once take turns."""
    with _TARGET_LOCK:
        with _swapped(env, win32) as setuptools:
            yield setuptools


@contextlib.contextmanager
def _swapped(env: dict[str, str] | None, win32: bool):
    stand_ins = {name: types.ModuleType(name) for name in
                 ("setuptools", "setuptools.command", "setuptools.command.build_ext")}
    stand_ins["setuptools"].Extension = Extension
    stand_ins["setuptools"].setup = lambda **kw: None
    stand_ins["setuptools.command.build_ext"].build_ext = _BuildExt
    saved_modules = {name: sys.modules.get(name) for name in stand_ins}
    saved_env = {k: os.environ.get(k) for k in (env or {})}
    saved_platform, saved_machine = sys.platform, platform.machine
    sys.modules.update(stand_ins)
    os.environ.update(env or {})
    if win32:
        sys.platform = "win32"
        platform.machine = lambda: "AMD64"  # the target is x86-64 whatever machine reads setup.py
    try:
        yield stand_ins["setuptools"]
    finally:
        sys.platform, platform.machine = saved_platform, saved_machine
        for name, module in saved_modules.items():
            if module is None:
                sys.modules.pop(name)
            else:
                sys.modules[name] = module
        for k, v in saved_env.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v


def windows_build(with_cuda: bool, win32: bool = True) -> SetupView:
    """Runs setup.py as a win32 build (with or without looking for CUDA); win32=False:
    as this machine's build (the native twin of a Windows test program)."""
    captured = {}
    with as_target({"COMFY_KITCHEN_C_NO_CUDA": "0" if with_cuda else "1"}, win32) as setuptools:
        setuptools.setup = lambda **kw: captured.update(kw)
        namespace = runpy.run_path(str(ROOT / "setup.py"))
    return SetupView(captured["ext_modules"], namespace["ISA_SOURCES"], namespace, win32)


def extension_sources(build: SetupView, name: str, device: str) -> tuple[Extension, list[str]]:
    """Extension `name` and setup.py's c_sources(device) for the view's platform
    (device: a key of setup.py's DEVICE_SOURCES, e.g. "none", "cuda")."""
    devices = build.namespace["DEVICE_SOURCES"]
    if device not in devices:
        raise SystemExit(f"unknown device {device!r}: setup.py's DEVICE_SOURCES has {', '.join(devices)}")
    ext = next((e for e in build.ext_modules if e.name == name), None)
    if ext is None:
        raise SystemExit(f"setup.py builds no extension {name!r} for win32")
    with as_target(win32=build.win32):
        sources = build.namespace["c_sources"](device)
    return ext, sources


def gcc_c_flags(build: SetupView, werror: bool = True) -> list[str]:
    """The C flags setup.py's BuildExt gives a GCC-like compiler (optimisation, no FMA
    contraction, warnings), read by running its build_extensions against a stand-in
    compiler: one place decides how the kernels are compiled."""
    build_ext = object.__new__(build.namespace["BuildExt"])
    build_ext.compiler = types.SimpleNamespace(compiler_type="mingw32", src_extensions=[])
    with as_target({"COMFY_KITCHEN_C_WERROR": "1" if werror else "0", "COMFY_KITCHEN_C_SANITIZE": ""},
                  build.win32):
        build_ext.build_extensions()
    return list(build_ext.c_flags)
