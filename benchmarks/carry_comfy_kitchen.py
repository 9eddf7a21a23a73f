# SPDX-License-Identifier: Apache-2.0
"""Prepares comfy_kitchen, compiled backends included, for a GPU machine that has no network.

gpu_check.py compares our kernels with comfy_kitchen's "cuda" and "triton" backends. A lent GPU
machine cannot reach a package registry, and copying the comfy_kitchen installed here does not
work there: its compiled "cuda" backend is built for this machine's Python. So this script, run
here, downloads the comfy-kitchen wheel built for the GPU machine's Python (pip download, no
dependencies) and unpacks it into an ignored folder of the repository, leaving out what the
comparison does not need and what would not fit what a device run can carry (the ROCm "hip"
backend alone is about 150 MB). Then, on the GPU machine:

    PYTHONPATH=.devpkgs python benchmarks/gpu_check.py ...      (with carry: [".devpkgs"])

comfy_kitchen's cuda extension links no torch library (tensors cross by DLPack), so one wheel
serves the GPU machine's torch whatever its version.  A folder already holding that version is
kept (no download).  Every run also writes <dest>/SOURCE, the commit of this checkout (and
whether it has uncommitted changes), which gpu_check.py reports: a device copy of a working
tree carries no git repository of its own.  So run this right before each device run.

    python benchmarks/carry_comfy_kitchen.py [--python 3.12] [--version 0.2.40] [--dest .devpkgs]
"""
from __future__ import annotations

import argparse
import datetime
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "comfy_kitchen"
# Parts of the wheel a CUDA comparison does not use.
LEFT_OUT = ("comfy_kitchen/backends/hip/",)


def wanted(name: str) -> bool:
    """Whether a wheel member is unpacked: the package itself, minus LEFT_OUT (dist-info stays
    out too: nothing installs it, PYTHONPATH finds the package)."""
    return name.startswith(PACKAGE + "/") and not name.startswith(LEFT_OUT)


def unpack(wheel: Path, dest: Path) -> int:
    """Unpacks the wanted members of wheel under dest (replacing an earlier copy); returns the
    bytes written."""
    target = dest / PACKAGE
    shutil.rmtree(target, ignore_errors=True)
    written = 0
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            if info.is_dir() or not wanted(info.filename):
                continue
            z.extract(info, dest)
            path = dest / info.filename
            if info.filename.endswith(".so"):
                path.chmod(0o755)
            written += info.file_size
    return written


VERSION_FILE = "VERSION"  # in dest/comfy_kitchen: the version unpacked there


def write_stamp(dest: Path) -> str:
    """dest/SOURCE: commit=<short hash>, dirty=0/1 (tracked files changed), written=<time>."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = "1" if git("status", "--porcelain", "--untracked-files=no") else "0"
    written = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    (dest / "SOURCE").write_text(f"commit={commit}\ndirty={dirty}\nwritten={written}\n")
    return commit + ("-dirty" if dirty == "1" else "")


def unpacked_version(dest: Path) -> str | None:
    try:
        return (dest / PACKAGE / VERSION_FILE).read_text().strip()
    except OSError:
        return None


def installed_version() -> str | None:
    try:
        from importlib.metadata import version
        return version("comfy-kitchen")
    except Exception:  # not installed here: the caller must name a version
        return None


def download(version: str, python: str, into: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", f"comfy-kitchen=={version}", "--no-deps",
           "--only-binary", ":all:", "--python-version", python, "--platform", "manylinux_2_28_x86_64",
           "-d", str(into), "-q"]
    subprocess.run(cmd, check=True)
    wheels = sorted(into.glob("comfy_kitchen-*.whl"))
    if not wheels:
        raise SystemExit(f"pip download left no comfy_kitchen wheel in {into}")
    return wheels[0]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--python", default="3.12", help="the GPU machine's Python version (default %(default)s)")
    p.add_argument("--version", default=installed_version(),
                   help="comfy-kitchen version (default: the one installed here, %(default)s)")
    p.add_argument("--wheel", type=Path, help="unpack this wheel instead of downloading one")
    p.add_argument("--dest", type=Path, default=ROOT / ".devpkgs", help="folder to fill (default %(default)s)")
    args = p.parse_args(argv)
    args.dest.mkdir(parents=True, exist_ok=True)
    print(f"commit stamp: {write_stamp(args.dest)} in {args.dest / 'SOURCE'}")
    if args.wheel is None and args.version is not None and unpacked_version(args.dest) == args.version:
        print(f"comfy_kitchen {args.version} is already in {args.dest / PACKAGE}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        wheel = args.wheel
        if wheel is None:
            if args.version is None:
                raise SystemExit("comfy-kitchen is not installed here: pass --version")
            wheel = download(args.version, args.python, Path(tmp))
        written = unpack(wheel, args.dest)
        version = wheel.name.split("-")[1]
        (args.dest / PACKAGE / VERSION_FILE).write_text(version + "\n")
    print(f"{wheel.name}: {written / 1e6:.1f} MB unpacked into {args.dest / PACKAGE}")
    print(f"on the GPU machine: carry {args.dest.relative_to(ROOT) if args.dest.is_relative_to(ROOT) else args.dest}"
          f" and set PYTHONPATH={args.dest.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
