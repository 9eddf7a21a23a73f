"""Build of the comfy_kitchen_c._C extension: C11, CPython limited API (abi3,
Python >= 3.10), no torch headers or libraries.  Set COMFY_KITCHEN_C_WERROR=1
to turn warnings into errors (CI does)."""
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent
LIMITED_API = "0x030A0000"  # Python 3.10


def c_sources():
    other_os = "threads_posix.c" if sys.platform == "win32" else "threads_win32.c"
    return sorted(
        str(p.relative_to(ROOT)).replace(os.sep, "/")
        for p in (ROOT / "csrc").rglob("*.c")
        if p.name != other_os
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
        super().build_extensions()


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
