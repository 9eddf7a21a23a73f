# SPDX-License-Identifier: Apache-2.0
"""CPU grid: "c" against eager for every op "c" serves on the CPU, every float dtype, every
int8_linear form, M = 1 .. 4096 rows, ComfyUI's K x N, 1 thread and all threads.

    python benchmarks/bench_cpu_grid.py            # the full grid (benchmarks/results/cpu_grid.md; over 30 min on a loaded 2-core machine)
    python benchmarks/bench_cpu_grid.py --quick    # a CI-size subset (M 1 and 256, all threads: minutes)
    python benchmarks/bench_cpu_grid.py --only int8_linear --dtype float16 --m 1 16

What each cell is: ratio = eager ms / ours ms (> 1: "c" faster), each the median of REPS
repetitions; a repetition times a block of ours and then a block of eager (ABAB ...), each block
a warm-up call and then enough calls for BLOCK_S seconds, so the load of the shared machine hits
both alike and torch's OpenMP workers, still spinning after eager's block, are charged to the
warm-up call, not to ours (benchmarks/bench_cpu.py ``measure`` says why).  "ours" is always our
kernels; the column "served by" says who serves the registry's call (comfy_kitchen_c/cpu_speed.py):
where it says eager, the call runs eager's code and the ratio shown is the one that rule avoids
(those cells are the rules' evidence).  ``--json`` keeps the cells, ``--render`` re-tabulates them
with the rules as they are now.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cpu  # noqa: E402  (the element-wise ops' argument builders)

import comfy_kitchen_c.ops as C  # noqa: E402
from comfy_kitchen_c import cpu_speed  # noqa: E402
from comfy_kitchen.backends.eager import quantization as E  # noqa: E402

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
M_FULL = (1, 16, 256, 1024)
M_QUICK = (1, 256)
# ComfyUI's linears (Flux/WAN/Qwen: hidden 3072 / 5120, MLP 4x): K x N
KN_FULL = ((3072, 3072), (3072, 12288), (12288, 3072))
# The wide pairs where each form occurs in a DiT block (all forms are timed at 3072 x 3072 too):
# the activations feed the MLP's down projection (K = 12288), the norms and modulations its up
# projection and the attention's (N = 12288 for the MLP), the residual closes either
FORM_KN = {"none": KN_FULL, "gelu_tanh": ((12288, 3072),), "swiglu": ((12288, 3072),), "situ": ((12288, 3072),),
           "rms_norm": ((3072, 12288),), "modulated": ((3072, 12288),), "rms_modulated": ((3072, 12288),),
           "residual": ((12288, 3072),)}
KN_QUICK = ((3072, 3072),)
# The largest GEMM the full grid times (M*K*N; 3072 x 3072 up to M = 1024, the wide pairs up to
# 256): beyond, both sides are the same oneDNN GEMM (torch._int_mm, most of the time from M = 256
# on) and a cell takes tens of seconds on 2 cores; those cells are listed as skipped (--max-mkn;
# --m 4096 --max-mkn 0 ... times them).  The full grid's rows are sized for about 20 minutes on an
# idle 2-core machine: --m takes any other list.
MAX_MKN = 1024 * 3072 * 3072
M_ELEMENTWISE = (1, 256, 4096)  # the element-wise ops' rows in the full grid
REPS, REPS_QUICK = 3, 3
BLOCK_S = 0.015
LINEAR_FORMS = ("none", "gelu_tanh", "swiglu", "situ", "rms_norm", "residual", "modulated", "rms_modulated")
# The element-wise ops: x [M, K] as bench_cpu builds their arguments (K = the grid's first K)
ELEMENTWISE = tuple(op.name for op in bench_cpu.OPS if op.name in bench_cpu.ARG_BUILDERS
                    and op.name not in ("quantize_and_rotate_rowwise", "quantize_int8_convrot_weight",
                                        "rotate_int8_convrot_weight"))


@dataclass
class Case:
    op: str          # the registered op (cpu_speed's rules are keyed by it)
    form: str        # int8_linear's activation / residual form, or "-"
    build: Callable  # (dtype, m, k, n) -> kwargs of the op
    ours: Callable
    eager: Callable


def _weight(k: int, n: int) -> tuple:
    g = torch.Generator().manual_seed(1)
    return (torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8),
            torch.rand(n, generator=g) * 0.01 + 0.001)


def _linear_kwargs(form: str):
    def build(dtype, m, k, n):
        w, ws = _weight(k, n)
        g = torch.Generator().manual_seed(2)
        width = 2 * k if form in ("swiglu", "situ") else k
        x = torch.randn(m, width, generator=g).to(dtype)
        kw = dict(x=x, weight=w, weight_scale=ws, bias=torch.randn(n, generator=g).to(dtype), out_dtype=dtype)
        vec = (torch.rand(k, generator=g) + 0.5).to(dtype)
        if form in ("gelu_tanh", "swiglu", "situ"):
            kw["input_act"] = form
        elif form == "rms_norm":
            kw.update(input_act="rms_norm", input_act_weight=vec, input_act_eps=1e-6)
        elif form == "residual":
            kw.update(residual=torch.randn(m, n, generator=g).to(dtype),
                      residual_scale=torch.rand(n, generator=g).to(dtype))
        elif form == "modulated":
            kw = dict(kw, modulation_scale=vec * 0.1)
        elif form == "rms_modulated":
            kw = dict(kw, norm_weight=vec, norm_eps=1e-6, modulation_scale=vec * 0.1)
        return kw
    return build


def _linear_op(form: str) -> str:
    return {"modulated": "int8_linear_modulated", "rms_modulated": "int8_linear_rms_modulated"}.get(form, "int8_linear")


def _elementwise_kwargs(name: str):
    import inspect
    params = None

    def build(dtype, m, k, _n):
        nonlocal params
        args = bench_cpu.ARG_BUILDERS[name](torch.randn(m, k).to(dtype))
        if params is None:
            params = list(inspect.signature(getattr(C, name)).parameters)
        return dict(zip(params, args))
    return build


def cases() -> list[Case]:
    out = [Case(_linear_op(f), f, _linear_kwargs(f), getattr(C, _linear_op(f)), getattr(E, _linear_op(f)))
           for f in LINEAR_FORMS]
    eager_of = {op.name: op.eager for op in bench_cpu.OPS}
    out += [Case(name, "-", _elementwise_kwargs(name), getattr(C, name), eager_of[name]) for name in ELEMENTWISE]
    return out


# ---- timing ---------------------------------------------------------------------------------

def _block(fn: Callable, kwargs: dict, calls: int, warm_up: bool = True) -> float:
    """A warm-up call, then `calls` calls; ms per call."""
    if warm_up:
        fn(**kwargs)
    start = time.perf_counter()
    for _ in range(calls):
        fn(**kwargs)
    return (time.perf_counter() - start) * 1e3 / calls


def ratio(ours: Callable, eager: Callable, kwargs: dict, reps: int) -> tuple[float, float, float, float]:
    """(eager ms, ours ms, ratio, spread): medians over reps ABAB repetitions; the ratio is the
    median of the per-repetition ratios, spread the largest / smallest of them."""
    one = min(_block(ours, kwargs, 1), _block(eager, kwargs, 1)) / 1e3
    calls = max(1, min(50, round(BLOCK_S / max(one, 1e-6))))
    warm = one < 0.05  # a call of 50 ms and more outlasts the other side's spinning workers
    o, e = [], []
    for _ in range(reps):
        o.append(_block(ours, kwargs, calls, warm))
        e.append(_block(eager, kwargs, calls, warm))
    ratios = sorted(ei / oi for ei, oi in zip(e, o))
    return statistics.median(e), statistics.median(o), statistics.median(ratios), ratios[-1] / ratios[0]


def served_by(op: str, dtype: str, m: int, k: int) -> str:
    """Who the registry gives this CPU call to: "c", or "eager" where cpu_speed's rule declines
    (the first tensor is m x k of dtype: x, or the int8 codes of the dequantizers)."""
    first = torch.int8 if op.startswith("dequantize_int8") else DTYPES[dtype]
    return "c" if cpu_speed.rule(op, first, m, m * k) is None else "eager"


# ---- grid -----------------------------------------------------------------------------------

def grid(args) -> list[tuple]:
    rows = []
    threads = args.threads or ([torch.get_num_threads()] if args.quick else sorted({1, torch.get_num_threads()}))
    all_threads = torch.get_num_threads()
    todo = [c for c in cases() if (not args.only or c.op in args.only or c.form in args.only)]
    try:
        for t in threads:
            torch.set_num_threads(t)
            for case in todo:
                kns = args.kn[:1] if case.form == "-" else \
                    [kn for kn in args.kn if kn == args.kn[0] or kn in FORM_KN[case.form] or args.kn_given]
                ms = args.m if case.form != "-" or args.quick or args.m_given else M_ELEMENTWISE
                for k, n in kns:
                    for dname in args.dtype:
                        for m in ms:
                            rows.append(_cell(case, t, dname, m, k, n, args))
    finally:
        torch.set_num_threads(all_threads)
    return rows


def _cell(case: Case, t: int, dname: str, m: int, k: int, n: int, args) -> tuple:
    label = (t, case.op, case.form, dname, m, k, n if case.form != "-" else "-")
    if case.form != "-" and 0 < args.max_mkn < m * k * n:
        return label + ("skipped", "", "", "")
    try:
        kwargs = case.build(DTYPES[dname], m, k, n)
    except Exception as exc:  # noqa: BLE001 - an op that does not take this dtype is a row saying so
        return label + (f"n/a ({type(exc).__name__})", "", "", "")
    e_ms, o_ms, r, spread = ratio(case.ours, case.eager, kwargs, args.reps)
    print(f"  {' '.join(map(str, label))} {r:.2f}x", file=sys.stderr, flush=True)
    return label + ("", f"{e_ms:.3f}", f"{o_ms:.3f}", f"{r:.2f}x ({spread:.2f})")


def with_rules(rows: list[tuple]) -> list[tuple]:
    """The rows with "served by" filled from the rules as they are now (cell's thread count)."""
    return [(*r[:7], served_by(r[1], r[3], r[4], r[5]), *r[8:]) if r[7] in ("", "c", "eager") else tuple(r)
            for r in rows]


def table(rows: list[tuple]) -> str:
    head = ("threads", "op", "form", "dtype", "M", "K", "N", "served by", "eager ms", "ours ms",
            "eager/ours (max/min of reps)")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def pivot(rows: list[tuple]) -> str:
    """The cells as one line per (threads, op, form, dtype) and one column per (K x N, M): the
    ratio, or "e 0.70" where the registry gives the call to eager (the ratio it avoids); the
    linears' table, then the element-wise ops'."""
    parts = ([r for r in rows if r[2] != "-"], [r for r in rows if r[2] == "-"])
    return "\n".join(_pivot(part) for part in parts if part)


def _pivot(rows: list[tuple]) -> str:
    cols, lines = [], {}
    for r in rows:
        col = (r[5], r[6], r[4])
        if col not in cols:
            cols.append(col)
        key = r[:4]
        ratio_text = r[10].split("x")[0] if r[10] else r[7]
        lines.setdefault(key, {})[col] = ("e " if r[7] == "eager" else "") + ratio_text
    head = ["threads", "op", "form", "dtype"] + [f"{k}x{n} M={m}" if n != "-" else f"K={k} M={m}" for k, n, m in cols]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * 4 + "---:|" * len(cols)]
    for key, cells in lines.items():
        out.append("| " + " | ".join(map(str, key)) + " | " + " | ".join(cells.get(c, "") for c in cols) + " |")
    return "\n".join(out) + "\n"


def from_log(path: str) -> list[tuple]:
    """Cells from the progress lines a run printed to stderr ("threads op form dtype M K N ratio"):
    the ratio only (no ms, no spread), for a run stopped before its end."""
    rows = []
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) == 8 and p[7].endswith("x"):
                n = p[6] if p[6] == "-" else int(p[6])
                rows.append((int(p[0]), p[1], p[2], p[3], int(p[4]), int(p[5]), n, "", "", "", p[7]))
    return rows


def slower(rows: list[tuple]) -> list[tuple]:
    """The served-by-c cells below 1.0x."""
    return [r for r in rows if r[7] == "c" and float(r[10].split("x")[0]) < 1.0]


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--quick", action="store_true", help="M 1 and 256; K = N = 3072; all threads only; 3 reps")
    p.add_argument("--only", nargs="+", help="ops or int8_linear forms to run")
    p.add_argument("--dtype", nargs="+", choices=list(DTYPES), default=list(DTYPES))
    p.add_argument("--m", nargs="+", type=int)
    p.add_argument("--kn", nargs="+", help="K x N pairs as KxN (default: ComfyUI's)")
    p.add_argument("--threads", nargs="+", type=int, help="torch thread counts (default: 1 and all)")
    p.add_argument("--reps", type=int)
    p.add_argument("--json", metavar="PATH", help="also keep the cells there (for --render)")
    p.add_argument("--render", metavar="PATH", help="no timing: tabulate the cells of a --json file")
    p.add_argument("--log", metavar="PATH", help="no timing: tabulate the progress lines of a run's stderr")
    p.add_argument("--pivot", action="store_true", help="one line per op, form, dtype and threads")
    p.add_argument("--max-mkn", type=int, default=MAX_MKN, help="largest M*K*N of a linear cell (0: no limit)")
    p.add_argument("--markdown", metavar="PATH", help="also write the table there")
    a = p.parse_args(argv)
    a.m_given = a.m is not None
    a.m = a.m or (M_QUICK if a.quick else M_FULL)
    a.kn_given = a.kn is not None
    a.kn = [tuple(map(int, s.split("x"))) for s in a.kn] if a.kn else list(KN_QUICK if a.quick else KN_FULL)
    a.reps = a.reps or (REPS_QUICK if a.quick else REPS)
    return a


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.log:
        rows, about = from_log(args.log), f"cells of {args.log}"
    elif args.render:
        with open(args.render) as f:
            saved = json.load(f)
        rows, about = [tuple(r) for r in saved["rows"]], saved["about"]
    else:
        start = time.perf_counter()
        load = bench_cpu.OtherLoad()
        rows = grid(args)
        about = (f"{time.perf_counter() - start:.0f} s, torch {torch.__version__}, "
                 f"{torch.get_num_threads()} threads max, CPU kernels {C._C.cpu_isa()}, OMP_WAIT_POLICY="
                 f"{os.environ.get('OMP_WAIT_POLICY', '(unset)')}, {args.reps} reps; other processes: "
                 f"{bench_cpu.describe_load(load.share())}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"rows": rows, "about": about}, f)
    rows = with_rules(rows)
    text = f"{(pivot if args.pivot else table)(rows)}\n- {about}\n"
    below = slower(rows)
    text += f"- served by c and below 1.0x: {len(below)} of {len(rows)} cells\n"
    print(text)
    _save(args.markdown, text)
    return 0


def _save(path: str | None, text: str) -> None:
    if path:
        with open(path, "w") as f:
            f.write(text)


if __name__ == "__main__":
    sys.exit(main())
