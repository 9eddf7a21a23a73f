# SPDX-License-Identifier: Apache-2.0
"""Our thread pool beside torch's OpenMP: a few representative CPU calls, "c" against eager, with
the same torch thread count under each OMP_WAIT_POLICY (unset, PASSIVE, ACTIVE), each in a fresh
process (libgomp reads the variable once, at start).

    python benchmarks/bench_cpu_threads.py [--threads 2] [--reps 9]

Per configuration and call: ours ms, eager ms (medians of ABAB repetitions, as bench_cpu_grid),
the ratio eager / ours, and the spread of the per-repetition ratios (largest / smallest): the
spread is what the issue saw swing, the medians what a user's step costs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

POLICIES = (None, "PASSIVE", "ACTIVE")
CALLS = (("int8_linear", "none", "bfloat16", 256), ("int8_linear", "gelu_tanh", "bfloat16", 256),
         ("int8_linear", "none", "bfloat16", 16), ("int8_linear", "none", "bfloat16", 1),
         ("dequantize_int8_simple", "-", "bfloat16", 4096), ("quantize_int8_rowwise", "-", "bfloat16", 4096))
K = N = 3072


def measure(threads: int, reps: int) -> list:
    import torch
    import bench_cpu_grid as grid
    torch.set_num_threads(threads)
    by_key = {(c.op, c.form): c for c in grid.cases()}
    out = []
    for op, form, dtype, m in CALLS:
        case = by_key[(op, form)]
        kwargs = case.build(grid.DTYPES[dtype], m, K, N)
        e, o, r, spread = grid.ratio(case.ours, case.eager, kwargs, reps)
        out.append([op, form, dtype, m, e, o, r, spread])
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.threads, args.reps)))
        return 0
    here = os.path.dirname(os.path.abspath(__file__))
    print("| OMP_WAIT_POLICY | op | form | dtype | M | eager ms | ours ms | eager/ours (max/min) |\n"
          "|---|---|---|---|---:|---:|---:|---:|")
    for policy in POLICIES:
        env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
        if policy:
            env["OMP_WAIT_POLICY"] = policy
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (here, env.get("PYTHONPATH"))))
        done = subprocess.run([sys.executable, __file__, "--child", "--threads", str(args.threads),
                               "--reps", str(args.reps)], env=env, capture_output=True, text=True, check=True)
        for op, form, dtype, m, e, o, r, spread in json.loads(done.stdout.strip().splitlines()[-1]):
            print(f"| {policy or '(unset)'} | {op} | {form} | {dtype} | {m} | {e:.3f} | {o:.3f} | "
                  f"{r:.2f}x ({spread:.2f}) |", flush=True)
    print(f"\n- {args.threads} torch threads (torch.set_num_threads; our pool takes the same number), "
          f"K = N = {K}, {args.reps} ABAB repetitions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
