# SPDX-License-Identifier: Apache-2.0
"""Every wheel of a release, in one command, from a clean clone of this checkout's HEAD:

  python3 tools/build_wheels.py                 # all eight GPU architectures, into dist/
  python3 tools/build_wheels.py --ci            # one (COMFY_KITCHEN_C_CUDA_ARCHS=120), as CI does
  python3 tools/build_wheels.py --archs "80;120" --outdir /tmp/wheels

  linux    the manylinux wheel of this machine's architecture (tools/linux_wheel.py: zig's
           clang for an old glibc floor, auditwheel repair, auditwheel show checked).
  windows  tools/windows/build.py --outdir DIR of the clone, when the commit has it (its own
           docstring says what it needs); skipped, and said so, otherwise.

HEAD is cloned (git clone of the checkout), so uncommitted changes are not built: a
release is the commit, and a clean clone cannot pick up the checkout's build/ objects or
an in-place _C_emu.  The build tools (tools/wheel-tools.txt) go into a throwaway virtual
environment.  Prints each wheel's name, size and build time."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

import linux_wheel

ROOT = Path(__file__).resolve().parent.parent
RELEASE_ARCHS = "75;80;86;89;90;100;110;120"  # setup.py's CUDA_ARCHS: every architecture a release serves
CI_ARCHS = "120"  # SASS for Blackwell consumer GPUs plus its PTX: the editable install compiles all eight


def clone_head(work: Path) -> tuple[Path, str]:
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           check=True, capture_output=True, text=True).stdout
    if dirty:
        print(f"build_wheels: uncommitted changes are not built (HEAD {commit} is):\n{dirty}", end="")
    src = work / "src"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(src)], check=True)
    return src, commit


def tools_environment(work: Path) -> Path:
    """A virtual environment with tools/wheel-tools.txt; returns its bin folder."""
    folder = work / "tools"
    venv.create(folder, with_pip=True)
    bin_dir = folder / ("Scripts" if sys.platform == "win32" else "bin")
    subprocess.run([bin_dir / "python", "-m", "pip", "install", "--quiet", "-r",
                    ROOT / "tools" / "wheel-tools.txt"], check=True)
    return bin_dir


def windows_wheels(src: Path, outdir: Path, archs: str | None, work: Path) -> list[Path] | None:
    """The Windows wheel by tools/windows/build.py, or None when the clone has no such script."""
    script = src / "tools" / "windows" / "build.py"
    if not script.is_file():
        return None
    env = dict(os.environ)
    if archs is None:
        env["COMFY_KITCHEN_C_NO_CUDA"] = "1"
    else:
        env["COMFY_KITCHEN_C_CUDA_ARCHS"] = archs
    staging = work / "windows-dist"
    staging.mkdir()
    # the GPU kernels with the CPU ones, as in the Linux wheel (fatbins from this machine's nvcc)
    device = ["--device", "cuda"] if archs is not None else []
    result = subprocess.run([sys.executable, script, "--outdir", staging, *device], cwd=src, env=env)
    if result.returncode != 0:
        sys.exit(f"build_wheels: tools/windows/build.py failed (exit {result.returncode}); its output is above")
    wheels = []
    for wheel in sorted(staging.glob("*.whl")):
        wheels.append(Path(shutil.move(str(wheel), outdir / wheel.name)))
    if not wheels:
        sys.exit(f"build_wheels: {script} made no wheel in {staging}")
    return wheels


def report(kind: str, wheels: list[Path], seconds: float, note: str = ""):
    for wheel in wheels:
        size = wheel.stat().st_size / 1e6
        print(f"{kind:8} {wheel.name}  {size:.2f} MB  {seconds:.0f} s{note}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--archs", default=RELEASE_ARCHS,
                       help=f'CUDA architectures, ";"-separated (default: "{RELEASE_ARCHS}", a release)')
    which.add_argument("--ci", action="store_true", help=f"CI's build: one architecture ({CI_ARCHS})")
    which.add_argument("--no-cuda", action="store_true", help="CPU-only wheels (COMFY_KITCHEN_C_NO_CUDA=1)")
    parser.add_argument("--outdir", type=Path, default=ROOT / "dist", help="where the wheels go (default: dist/)")
    parser.add_argument("--skip-windows", action="store_true", help="build the Linux wheel only")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder (clone, tools, logs)")
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        sys.exit("build_wheels: runs on Linux (the manylinux wheel is built with zig for Linux's glibc)")
    archs = None if args.no_cuda else CI_ARCHS if args.ci else args.archs
    outdir = args.outdir.resolve()
    outdir.mkdir(parents=True, exist_ok=True)

    work = Path(tempfile.mkdtemp(prefix="ckc-wheels-"))
    began = time.monotonic()
    try:
        start = time.monotonic()
        src, commit = clone_head(work)
        tools_bin = tools_environment(work)
        print(f"build_wheels: HEAD {commit}, CUDA architectures: {archs or 'none (CPU only)'}; "
              f"clone and tools in {time.monotonic() - start:.0f} s")

        start = time.monotonic()
        wheel, tag = linux_wheel.build(src, outdir, tools_bin, archs, work)
        # setup.py prints each nvcc command ("--fatbin") or the cached fatbin it took ("fatbin from")
        fatbins = "fatbin" in (work / "linux.log").read_text()
        cuda = "CPU only (--no-cuda)" if archs is None else "CUDA kernels" if fatbins else "CPU only: no nvcc found"
        report("linux", [wheel], time.monotonic() - start,
               f"  ({cuda}; auditwheel show: consistent with {tag})")

        if args.skip_windows:
            print("windows  skipped (--skip-windows)")
        else:
            start = time.monotonic()
            built = windows_wheels(src, outdir, archs, work)
            if built is None:
                print("windows  SKIPPED: tools/windows/build.py is not in this commit (no Windows wheel built)")
            else:
                report("windows", built, time.monotonic() - start)
        print(f"build_wheels: done in {time.monotonic() - began:.0f} s; wheels in {outdir}")
    finally:
        if args.keep:
            print(f"build_wheels: scratch folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
