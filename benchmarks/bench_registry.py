# SPDX-License-Identifier: Apache-2.0
"""Through the registry: what a user gets with "c" first against eager alone, on the CPU.

    python benchmarks/bench_registry.py            # the full grid (benchmarks/results/registry_grid_cpu.md; about an hour on 2 cores)
    python benchmarks/bench_registry.py --quick    # M 1 and 256, K = N = 3072, all threads
    python benchmarks/bench_registry.py --smoke    # CI's: a few cells of each kind (a minute or two)
    python benchmarks/bench_registry.py --only dequantize_int8_simple --dtype float32 --m 1 16 64

Each cell times the same call two ways, side by side in one run: comfy_kitchen's dispatch
(``registry.get_implementation(op, kwargs=...)`` and the call, what comfy_kitchen's functions do)
with "c" first in the priority (comfy_kitchen_c.activate(), as ComfyUI's node does) and with "c"
out of it (eager alone).  The CPU speed rules are as a user has them: measured on this machine at
their first call (comfy_kitchen_c/cpu_speed.py; the cache file is COMFY_KITCHEN_C_CPU_SPEED_CACHE's,
else the user's, unless --fresh); that first call is the cell's warm-up and is not timed.

Columns: "served by" is who the registry picks with "c" first; ratio = eager alone ms / "c" first
ms (> 1: "c" first is faster), the median of the per-round ratios of REPS ABAB rounds (a round: a
block of calls with "c" first, then a block with eager alone, each opened by an untimed call that
absorbs the other block's still-spinning OpenMP workers), with the largest / smallest in brackets;
"+us" is "c" first's median time minus eager alone's, per call: for a call given to eager, what the
decline costs; for such a call under 100 us, in brackets the same of comfy_kitchen's dispatch alone
(get_implementation without the op, 2,000 calls a block: far less noise than a whole call).  The op's arguments are benchmarks/bench_cpu_grid.py's (ComfyUI's K and N, every
int8_linear form).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cpu  # noqa: E402
import bench_cpu_grid as grid_  # noqa: E402

import comfy_kitchen_c  # noqa: E402
from comfy_kitchen.registry import registry  # noqa: E402
from comfy_kitchen_c import _C, cpu_speed  # noqa: E402

REPS, REPS_QUICK = 5, 5
BLOCK_S = 0.01
M_FULL = (1, 16, 256, 1024, 4096)
M_ELEMENTWISE = (1, 4, 16, 64, 256, 1024, 4096)
# The largest linear the full grid times (M * K * N): 4096 x 3072 x 3072, both sides torch's oneDNN GEMM
MAX_MKN = 4096 * 3072 * 3072
# CI's smoke grid: the kinds of cell, a few of each (a declined small call, a served large one, a
# linear, a dtype eager serves at every size on some CPUs)
SMOKE = (("dequantize_int8_simple", "-", "float32", (1, 64, 1024)),
         ("dequantize_int8_simple_dtype", "-", "bfloat16", (4, 256)),
         ("rms_gated_residual", "-", "float16", (1, 256)),
         ("quantize_int8_rowwise", "-", "bfloat16", (1, 256)),
         ("int8_linear", "none", "bfloat16", (1, 256)))


def _block(fn, calls: int) -> float:
    fn()  # absorbs the other side's spinning OpenMP workers: untimed
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def side_by_side(op: str, kwargs: dict, reps: int) -> tuple:
    """(served by, eager alone s, "c" first s, ratio, spread) of one call through the registry."""
    def call():
        return registry.get_implementation(op, kwargs=kwargs)(**kwargs)

    comfy_kitchen_c.activate()
    served = registry.get_capable_backend(op, kwargs)  # the first call: a rule's measurement, if any
    call()
    one_c = _block(call, 1)
    comfy_kitchen_c.deactivate()
    call()
    one_e = _block(call, 1)
    calls = max(1, min(2000, round(BLOCK_S / max(min(one_c, one_e), 1e-7))))
    c, e, ratios = [], [], []
    for _ in range(reps):
        comfy_kitchen_c.activate()
        c.append(_block(call, calls))
        comfy_kitchen_c.deactivate()
        e.append(_block(call, calls))
        ratios.append(e[-1] / c[-1])
    ratios.sort()
    return served, statistics.median(e), statistics.median(c), statistics.median(ratios), ratios[-1] / ratios[0]


def dispatch_cost(op: str, kwargs: dict, reps: int = 7, calls: int = 2000) -> float:
    """us a call that "c" declines costs in comfy_kitchen's dispatch alone (get_implementation, not the
    op): "c" first against eager alone, the median of reps ABAB rounds of calls each."""
    def dispatch():
        for _ in range(calls):
            registry.get_implementation(op, kwargs=kwargs)

    diffs = []
    try:
        for _ in range(reps):
            comfy_kitchen_c.activate()
            start = time.perf_counter()
            dispatch()
            c = time.perf_counter() - start
            comfy_kitchen_c.deactivate()
            start = time.perf_counter()
            dispatch()
            diffs.append((c - (time.perf_counter() - start)) / calls * 1e6)
    finally:
        comfy_kitchen_c.deactivate()
    return statistics.median(diffs)


def cells(args) -> list[tuple]:
    """(threads, case, dtype, m, k, n) of the grid."""
    by = {(c.op, c.form): c for c in grid_.cases()}
    out = []
    threads = args.threads or ([torch.get_num_threads()] if args.quick or args.smoke else
                               sorted({1, torch.get_num_threads()}))
    if args.smoke:
        for t in threads:
            for op, form, dtype, ms in SMOKE:
                for m in ms:
                    out.append((t, by[(op, form)], dtype, m, 3072, 3072 if form != "-" else "-"))
        return out
    for t in threads:
        for case in by.values():
            if args.only and case.op not in args.only and case.form not in args.only:
                continue
            kns = args.kn[:1] if case.form == "-" else \
                [kn for kn in args.kn if kn == args.kn[0] or kn in grid_.FORM_KN[case.form] or args.kn_given]
            ms = args.m or (grid_.M_QUICK if args.quick else M_ELEMENTWISE if case.form == "-" else M_FULL)
            for k, n in kns:
                for dtype in args.dtype:
                    for m in ms:
                        if case.form != "-" and 0 < args.max_mkn < m * k * n:
                            continue
                        out.append((t, case, dtype, m, k, n if case.form != "-" else "-"))
    return out


def run(args) -> list[tuple]:
    rows = []
    everything = torch.get_num_threads()
    try:
        for t, case, dtype, m, k, n in cells(args):
            torch.set_num_threads(t)
            label = (t, case.op, case.form, dtype, m, k, n)
            try:
                kwargs = case.build(grid_.DTYPES[dtype], m, k, n if n != "-" else k)
                served, e, c, ratio, spread = side_by_side(case.op, kwargs, args.reps)
            except Exception as exc:  # noqa: BLE001 - a cell that cannot run says why
                rows.append(label + (f"n/a ({type(exc).__name__})", "", "", "", ""))
                continue
            extra = f"{(c - e) * 1e6:+.1f}"
            if served != "c" and e < 1e-4:  # a small call given to eager: what the decline costs, dispatch alone
                extra += f" ({dispatch_cost(case.op, kwargs):+.1f})"
            rows.append(label + (served, f"{e * 1e3:.4f}", f"{c * 1e3:.4f}", f"{ratio:.2f}x ({spread:.2f})", extra))
            print(f"  {' '.join(map(str, label))} {served} {ratio:.2f}x {(c - e) * 1e6:+.1f} us", file=sys.stderr,
                  flush=True)
    finally:
        torch.set_num_threads(everything)
        comfy_kitchen_c.deactivate()
    return rows


def table(rows: list[tuple]) -> str:
    head = ("threads", "op", "form", "dtype", "M", "K", "N", "served by", "eager alone ms", "\"c\" first ms",
            "eager alone / \"c\" first (max/min)", "+us")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def summary(rows: list[tuple]) -> str:
    timed = [r for r in rows if r[10]]
    ratio = {id(r): float(r[10].split("x")[0]) for r in timed}
    big = [r for r in timed if _elements(r) >= 65536]
    slow = [r for r in big if ratio[id(r)] < 0.95]
    small = [r for r in timed if r[7] != "c" and "(" in r[11]]
    whole = [float(r[11].split()[0]) for r in small]
    dispatch = [float(r[11].split("(")[1].rstrip(")")) for r in small]
    lines = [f"- cells: {len(timed)}; of 64k elements or more: {len(big)}, of which below 0.95x: {len(slow)}"
             + "".join(f"\n  - {' '.join(map(str, r[:8]))}: {r[10]}" for r in slow)]
    if small:
        lines.append(f"- calls under 100 us given to eager: {len(small)}; with \"c\" first each cost "
                     f"{statistics.median(whole):+.1f} us more than eager alone (median of whole calls; "
                     f"{min(whole):+.1f} to {max(whole):+.1f}), {statistics.median(dispatch):+.1f} us in the dispatch "
                     f"alone (median; {min(dispatch):+.1f} to {max(dispatch):+.1f})")
    return "\n".join(lines) + "\n"


def _elements(r: tuple) -> int:
    """The elements of the cell's main input (x, the codes): M x K (the element-wise ops' rows are K long)."""
    return r[4] * r[5]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--quick", action="store_true", help="M 1 and 256; K = N = 3072; all threads only")
    p.add_argument("--smoke", action="store_true", help="CI's few cells (SMOKE), all threads")
    p.add_argument("--only", nargs="+", help="ops or int8_linear forms to run")
    p.add_argument("--dtype", nargs="+", choices=list(grid_.DTYPES), default=list(grid_.DTYPES))
    p.add_argument("--m", nargs="+", type=int)
    p.add_argument("--kn", nargs="+", help="K x N pairs as KxN (default: ComfyUI's)")
    p.add_argument("--threads", nargs="+", type=int, help="torch thread counts (default: 1 and all)")
    p.add_argument("--reps", type=int)
    p.add_argument("--max-mkn", type=int, default=MAX_MKN, help="largest M*K*N of a linear cell (0: no limit)")
    p.add_argument("--fresh", action="store_true", help="measure the speed rules again (a new cache file)")
    p.add_argument("--markdown", metavar="PATH", help="also write the table there")
    p.add_argument("--pivot", action="store_true", help="one line per threads, op, form and dtype; a column per M "
                                                       "(\"e\": the registry gave the call to eager)")
    p.add_argument("--json", metavar="PATH", help="also keep the cells there (for --render)")
    p.add_argument("--render", metavar="PATH", help="no timing: tabulate the cells of a --json file")
    a = p.parse_args(argv)
    a.kn_given = a.kn is not None
    a.kn = [tuple(map(int, s.split("x"))) for s in a.kn] if a.kn else list(grid_.KN_QUICK if a.quick else grid_.KN_FULL)
    a.reps = a.reps or (REPS_QUICK if a.quick or a.smoke else REPS)
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    if cpu_speed.mode() == "off":
        print("COMFY_KITCHEN_C_CPU_SPEED=off: every valid call is served by \"c\" in this run", file=sys.stderr)
    if args.render:
        with open(args.render) as f:
            saved = json.load(f)
        rows, about = [tuple(r) for r in saved["rows"]], saved["about"]
    else:
        if args.fresh:
            cpu_speed.configure(cache_file=os.path.join(tempfile.mkdtemp(prefix="ckc-bench-"), "cpu_speed.json"))
        start = time.perf_counter()
        load = bench_cpu.OtherLoad()
        rows = run(args)
        about = (f"{time.perf_counter() - start:.0f} s, {cpu_speed.cpu_model()}, {os.cpu_count()} cores, torch "
                 f"{torch.__version__}, {torch.get_num_threads()} threads max, CPU kernels {_C.cpu_isa()}, "
                 f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, {args.reps} rounds; speed rules: "
                 f"{cpu_speed.mode()} ({cpu_speed.cache_file()}); other processes: "
                 f"{bench_cpu.describe_load(load.share())}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"rows": rows, "about": about}, f)
    text = f"{grid_.pivot(rows) if args.pivot else table(rows)}\n- {about}\n{summary(rows)}"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
