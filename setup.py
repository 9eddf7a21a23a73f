"""Build of the comfy_kitchen_c._C extension: C11, CPython limited API (abi3,
Python >= 3.10), no torch headers or libraries.  Set COMFY_KITCHEN_C_WERROR=1
to turn warnings into errors (CI does)."""
import os
import platform
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent
LIMITED_API = "0x030A0000"  # Python 3.10


# Compiled separately with its instruction set's flags (see BuildExt).
ISA_SOURCES = {"csrc/cpu/kernels_avx2.c": {"unix": ["-mavx2"], "msvc": ["/arch:AVX2"]}}


def is_x86_64() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def c_sources():
    other_os = "_posix.c" if sys.platform == "win32" else "_win32.c"
    return sorted(
        str(p.relative_to(ROOT)).replace(os.sep, "/")
        for p in (ROOT / "csrc").rglob("*.c")
        if not p.name.endswith(other_os) and str(p.relative_to(ROOT)).replace(os.sep, "/") not in ISA_SOURCES
    )


class BuildExt(build_ext):
    """Picks warning and optimization flags for the compiler actually used."""

    def build_extensions(self):
        werror = os.environ.get("COMFY_KITCHEN_C_WERROR") == "1"
        if self.compiler.compiler_type == "msvc":
            flags = ["/std:c11", "/O2", "/W4", "/fp:precise"] + (["/WX"] if werror else [])
        else:
            # No -ffast-math and no FMA contraction: kernels must round exactly like eager.
            # -fno-trapping-math only drops the assumption that FP exception flags are read,
            # which lets the compiler turn the kernels' selects into vector blends.
            flags = ["-std=c11", "-O3", "-Wall", "-Wextra", "-fno-math-errno", "-fno-trapping-math",
                     "-ffp-contract=off", "-fvisibility=hidden"] + (["-Werror"] if werror else [])
        for ext in self.extensions:
            ext.extra_compile_args = flags
            if is_x86_64():
                ext.extra_objects = self.compile_isa_sources(ext, flags)
                ext.define_macros.append(("CKC_HAVE_AVX2", "1"))
        super().build_extensions()

    def compile_isa_sources(self, ext, flags):
        kind = "msvc" if self.compiler.compiler_type == "msvc" else "unix"
        objects = []
        for source, isa_flags in ISA_SOURCES.items():
            objects += self.compiler.compile(
                [source], output_dir=self.build_temp, macros=ext.define_macros,
                include_dirs=ext.include_dirs, extra_postargs=flags + isa_flags[kind])
        return objects


setup(
    ext_modules=[
        Extension(
            "comfy_kitchen_c._C",
            sources=c_sources(),
            include_dirs=["csrc", "kernels"],
            define_macros=[("Py_LIMITED_API", LIMITED_API)],
            py_limited_api=True,
        )
    ],
    cmdclass={"build_ext": BuildExt},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
