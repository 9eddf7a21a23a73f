# SPDX-License-Identifier: Apache-2.0
"""Host cost per call counted in instructions (valgrind's callgrind): bench_host.py's cases,
deterministic where wall time on a shared machine is not.

For each checkout given (default: this one), the cases of bench_host.py run under callgrind
with instrumentation switched on only around their timed loops (a tiny helper library issues
callgrind's client requests), and the table gives instructions per call, also in units of one
``torch.empty`` (allocating one output), for side-by-side comparison of checkouts:

    python benchmarks/host_instructions.py [--calls 100] [CHECKOUT ...]

Needs valgrind with its headers (valgrind/callgrind.h) and a C compiler.  PYTHONHASHSEED is
fixed, so dictionary probing costs the same in every run.
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
HELPER = """#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_zero(void) { CALLGRIND_ZERO_STATS; }
void cg_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
"""


def child(checkout: str, calls: int, helper: str) -> None:
    """Runs inside callgrind: every case's loop between a zero and a dump of the counters."""
    sys.path[:0] = [checkout, str(Path(checkout) / "benchmarks")]
    import torch
    import bench_host

    torch.set_num_threads(1)
    cg = ctypes.CDLL(helper)
    cases = [(label, fn, args) for label, fn, _eager, args in bench_host.cases()]
    cases.append(("torch.empty", lambda: torch.empty((bench_host.ROWS, bench_host.K), dtype=torch.int8), ()))
    for _, fn, args in cases:
        for _ in range(20):
            fn(*args)
    cg.cg_start()
    for label, fn, args in cases:
        for _ in range(5):
            fn(*args)
        cg.cg_zero()
        for _ in range(calls):
            fn(*args)
        cg.cg_dump(label.encode())


def measure(checkout: str, calls: int, scratch: Path, helper: Path) -> dict[str, float]:
    out = scratch / f"cg-{abs(hash(checkout))}"
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                    sys.executable, __file__, "--child", checkout, "--calls", str(calls), "--helper", str(helper)],
                   env=env, check=True, capture_output=True)
    per_call = {}
    for dump in sorted(glob.glob(f"{out}.*"), key=lambda d: int(d.rsplit(".", 1)[1])):
        text = Path(dump).read_text()
        name = re.search(r"Client Request: (.*)", text).group(1).strip()
        per_call[name] = int(re.search(r"^summary: (\d+)", text, re.MULTILINE).group(1)) / calls
    return per_call


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkouts", nargs="*", default=[str(HERE.parent)])
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--helper", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child, args.calls, args.helper)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        (scratch / "cg.c").write_text(HELPER)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", str(scratch / "cg.c"), "-o", str(scratch / "libcg.so")],
                       check=True)
        results = [measure(c, args.calls, scratch, scratch / "libcg.so") for c in args.checkouts]
    names = [n for n in results[0] if n != "torch.empty"] + ["torch.empty"]
    print("| op | " + " | ".join(f"{c} instr/call" for c in args.checkouts) + " | "
          + " | ".join(f"{c} / torch.empty" for c in args.checkouts) + " |")
    print("|---|" + "---:|" * (2 * len(args.checkouts)))
    for name in names:
        print(f"| {name} | " + " | ".join(f"{r[name] / 1000:.1f}k" for r in results) + " | "
              + " | ".join(f"{r[name] / r['torch.empty']:.2f}" for r in results) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
