#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The CPU kernels' Windows code run under Wine, against the same program built natively.

    python3 tools/windows/kernel_test.py [--build-dir build/windows]   (after tools/windows/build.py)

tests/windows/cpu_kernels_test.c is linked twice:
  windows  with the very objects of csrc/cpu, csrc/platform and csrc/contract that
           build.py linked into _C.pyd (Windows threads, the UCRT's math, mingw GCC's
           code for every ISA), into cpu_kernels_test.exe;
  native   with the same sources as setup.py builds them on this machine (same flags),
           compiled with this machine's gcc: the known answers.
Each runs with every ISA this CPU has (baseline, avx2, avx512: csrc/cpu/dispatch.c lets the
program choose), natively and under Wine, and every run must print the lines of the
native baseline run (an ISA's vector kernels give the baseline's bits).  Any differing
line fails the check, named."""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import build  # noqa: E402
import setup_view  # noqa: E402
from toolchain import Toolchain  # noqa: E402
from wine import Wine, noise_free, session  # noqa: E402

ROOT = setup_view.ROOT
PROGRAM = "tests/windows/cpu_kernels_test.c"
# The CPU device and the layers it stands on (docs/architecture.md): no Python, no ops.
LAYERS = ("csrc/cpu/", "csrc/platform/", "csrc/contract/")


def _check(cmd: list[str], what: str) -> None:
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0 or r.stderr.strip():
        raise SystemExit(f"kernel_test: {what} failed:\n{' '.join(cmd)}\n{r.stdout}{r.stderr}")


def windows_program(build_dir: Path) -> Path:
    """cpu_kernels_test.exe from _C.pyd's own objects of the CPU layers."""
    tc = Toolchain(build_dir)
    view = setup_view.windows_build(with_cuda=False)
    ext, _ = setup_view.extension_sources(view, build.EXTENSION, "none")
    prefixes = tuple(layer.replace("/", "_") for layer in LAYERS)
    objects = sorted(o for o in (build_dir / "objects").glob("*.o") if o.name.startswith(prefixes))
    if not objects:
        raise SystemExit(f"kernel_test: no objects in {build_dir / 'objects'}: run tools/windows/build.py first")
    out = build_dir / "kernel_test"
    out.mkdir(exist_ok=True)
    test_obj = out / "cpu_kernels_test.o"
    _check(tc.compile_cmd(PROGRAM, test_obj, build.compile_flags(view, ext)), f"compiling {PROGRAM} for Windows")
    exe = out / "cpu_kernels_test.exe"
    _check(tc.link_cmd([*objects, test_obj], exe, dll=False), "linking cpu_kernels_test.exe")
    return exe


def native_program(build_dir: Path, workers: int) -> Path:
    """cpu_kernels_test for this machine, from setup.py's sources and flags for it."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise SystemExit("kernel_test: no native C compiler (gcc or cc) for the known answers")
    view = setup_view.windows_build(with_cuda=False, win32=False)
    ext, sources = setup_view.extension_sources(view, build.EXTENSION, "none")
    flags = build.compile_flags(view, ext)
    units = [(s, []) for s in sources if s.startswith(LAYERS)]
    units += [(s, f["unix"]) for s, f in view.isa_sources.items() if ("CKC_HAVE_X86_ISAS", "1") in ext.define_macros]
    units.append((PROGRAM, []))
    out = build_dir / "kernel_test" / "native"
    out.mkdir(parents=True, exist_ok=True)
    jobs = [([cc, *flags, *isa, "-c", s, "-o", str(build.object_path(out, s))], s) for s, isa in units]
    build.compile_all(jobs, workers)
    exe = out / "cpu_kernels_test"
    _check([cc, *[str(build.object_path(out, s)) for s, _ in units], "-o", str(exe), "-lpthread", "-lm"],
           "linking the native cpu_kernels_test")
    return exe


def differences(want: str, got: str) -> list[str]:
    w, g = want.splitlines(), got.splitlines()
    lines = [f"  want {a!r}\n  got  {b!r}" for a, b in zip(w, g) if a != b]
    if len(w) != len(g):
        lines.append(f"  {len(w)} lines wanted, {len(g)} printed")
    return lines


def compare(native: Path, exe: Path, wine: Wine) -> list[str]:
    """Runs both programs with every ISA; returns the failures (none: all agree)."""
    isas = subprocess.run([str(native), "--list-isas"], capture_output=True, text=True, check=True).stdout.split()
    wine_isas = wine.run(exe, "--list-isas")
    if wine_isas.returncode != 0 or wine_isas.stdout.split() != isas:
        return [f"ISAs under Wine: {wine_isas.stdout.split()} (exit {wine_isas.returncode}), natively: {isas}\n"
                + noise_free(wine_isas.stderr)]
    reference = subprocess.run([str(native), "--isa", "baseline"], capture_output=True, text=True)
    if reference.returncode != 0 or not reference.stdout.endswith("OK\n"):
        return [f"native baseline run: exit {reference.returncode}\n{reference.stdout}{reference.stderr}"]
    failures = []
    for isa in isas:
        for label, r in (("native", subprocess.run([str(native), "--isa", isa], capture_output=True, text=True)),
                         ("wine", wine.run(exe, "--isa", isa))):
            diff = differences(reference.stdout, r.stdout)
            if r.returncode != 0 or diff:
                failures.append(f"{label} --isa {isa}: exit {r.returncode}, lines differing from native baseline:\n"
                                + "\n".join(diff) + ("\n" + noise_free(r.stderr) if r.returncode else ""))
    cases = reference.stdout.count("\n") - 1
    if not failures:
        print(f"kernel_test: {cases} cases x ISAs {', '.join(isas)}: native and Wine print the same digests"
              f" (Wine: {len(wine.starts)} runs, {sum(wine.starts) / len(wine.starts):.2f} s each)")
    return failures


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", type=Path, default=ROOT / "build" / "windows")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--wine-dir", type=Path, help="reuse the Wine prefix in this folder (default: a new one)")
    args = p.parse_args(argv)
    build_dir = args.build_dir.resolve()
    # One after the other: reading setup.py swaps process-wide state (sys.platform).
    exe, native = windows_program(build_dir), native_program(build_dir, args.jobs)
    with session(args.wine_dir) as (wine, _):
        failures = compare(native, exe, wine)
    for f in failures:
        print(f"kernel_test: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
