# SPDX-License-Identifier: Apache-2.0
"""The fuzz engine and its command line.

    python3 tests/fuzz/run.py --inputs 100000 --seed 1        # what CI runs (under the sanitizers)
    python3 tests/fuzz/run.py --replay 1:4711 --verbose       # one input again, alone
    python3 tests/fuzz/run.py --inputs 200 --op int8_linear   # one target

Input i of a run draws everything from Random(seed, i) (draw.py): the target (round robin),
its arguments, one argument replaced by a bad value (a quarter of the inputs), the call's form
(a positional prefix, the rest by keyword), and whether it also runs on the emulated device
(the GPU kernels, which must give the CPU's bits) or through comfy_kitchen's registry with "c"
pinned.  A crash of the process is replayed with --verbose, which prints each input before
running it.  Plain Python with a seeded generator rather than hypothesis or atheris: the
inputs are structured (shapes tied across arguments, layouts, torch views), which a table of
drawers states directly, CI needs no extra package, and a failure is two integers to replay;
coverage-guided mutation (atheris) would add little over the argument checks in Python.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
import time
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

from comfy_kitchen_c.testing import emulated_device  # noqa: E402
from draw import Draw  # noqa: E402
import oracle  # noqa: E402
from targets import TARGETS  # noqa: E402

P_MUTATE = 0.25      # one argument replaced by a bad value
P_DROP = 0.03        # one argument left out (a required one: TypeError from Python itself)
P_EMULATED = 0.05    # also on the emulated device
P_REGISTRY = 0.25    # through comfy_kitchen's registry instead of comfy_kitchen_c.ops


class Stats:
    def __init__(self):
        self.inputs = 0
        self.by_outcome = collections.Counter()
        self.failures = []

    def add(self, target, outcome):
        self.inputs += 1
        self.by_outcome[(target, outcome)] += 1


def _mutate(d: Draw, target, args: dict) -> str:
    """Replaces (or sets) one argument to a bad value: its own bad values (draw.py) or junk."""
    name = d.pick(target.params)
    bad = target.hostile.get(name)
    args[name] = bad(d, args) if bad is not None and d.chance(0.8) else d.junk()
    return name


def _form(d: Draw, target, args: dict):
    """(positional args, keyword args): a prefix of the signature positionally, the rest by name."""
    prefix = 0
    while prefix < len(target.params) and target.params[prefix] in args:
        prefix += 1
    j = d.int_in(0, prefix)
    positional = tuple(args[p] for p in target.params[:j])
    return positional, {k: v for k, v in args.items() if k not in target.params[:j]}


def _outcome(fn):
    try:
        return fn(), None
    except Exception as exc:  # noqa: BLE001 - classified by the oracle
        return None, exc


def _registry_call(target, args):
    from comfy_kitchen.exceptions import NoCapableBackendError
    from comfy_kitchen.registry import registry

    try:
        impl = registry.get_implementation(target.op, backend="c", kwargs=args)
    except NoCapableBackendError:
        return "fell through", None
    except Exception as exc:  # noqa: BLE001
        # comfy_kitchen's own validation failing on a value (e.g. an unhashable list in its dtype
        # check): its code, not ours, and the call does not reach "c".  Ours would show in the stack.
        if any("comfy_kitchen_c" in frame.filename for frame in traceback.extract_tb(exc.__traceback__)):
            raise
        return "comfy_kitchen raised", None
    return impl, args


def run_one(target, d: Draw, verbose: bool = False, skip_eager_on_error: bool = False) -> str:
    """One input; returns its outcome class, raises Mismatch (or anything else) on a failure."""
    args = target.make(d)
    mutated = _mutate(d, target, args) if d.chance(P_MUTATE) else None
    if d.chance(P_DROP) and args:
        args.pop(d.pick(list(args)))
    via_registry = target.registered and d.chance(P_REGISTRY)
    emulated = d.chance(P_EMULATED) and target.emulated_same_bits is not None
    if emulated and target.gpu_differs is not None and target.gpu_differs(args):
        emulated = False  # a documented difference of the GPU path (docs/gpu.md): not compared
    positional, keywords = ({}, args) if via_registry else _form(d, target, args)
    if verbose:
        print(f"  {target.op} registry={via_registry} emulated={emulated} mutated={mutated} "
              f"positional={len(positional)} args={_describe(args)}", flush=True)
    fn = target.call()
    if via_registry:
        impl, _ = _registry_call(target, args)
        if isinstance(impl, str):
            return impl
        ours, error = _outcome(lambda: impl(**args))
        if error is not None and _python_signature_error(error):
            return "signature"  # no kwargs at all: the registry skips validation (comfy_kitchen's rule)
        if error is not None and any(args.get(name) is None for name in target.probe_optional):
            return "probe"  # a probe's missing argument: the checks accept it on purpose, the op refuses it
        if error is not None:  # accepted by the constraints, so the call must run
            raise oracle.Mismatch(f"{target.op}: the registry's rules accepted a call that raised "
                                  f"{type(error).__name__}: {error}") from error
    else:
        ours, error = _outcome(lambda: fn(*positional, **keywords))
    if error is not None:
        if _python_signature_error(error):
            return "signature"
        oracle.check_error(target.op, target.params, error)
        if emulated:
            _same_error_on_the_emulated_device(fn, positional, keywords, error)
        if not skip_eager_on_error and target.reference is not None and _small(args):
            _, ref_error = _outcome(lambda: target.reference(args))
            return "refused" if ref_error is not None else "refused, eager answers"
        return "refused"
    if emulated:
        with emulated_device():
            gpu, gpu_error = _outcome(lambda: fn(*positional, **keywords))
        if gpu_error is not None:
            raise oracle.Mismatch(f"{target.op}: the CPU answered, the emulated device raised {gpu_error!r}")
        if target.emulated_same_bits:
            _same_bits(ours, gpu, target.op, not target.zero_sign_free)
        elif target.reference is not None:
            target.compare(gpu, target.reference(args), args)
    if target.reference is None:
        return "answered"
    ref, ref_error = _outcome(lambda: target.reference(args))
    if ref_error is not None:
        raise oracle.Mismatch(f"{target.op}: we answered where eager raised {type(ref_error).__name__}: "
                              f"{ref_error}") from ref_error
    target.compare(ours, ref, args)
    return "answered"


def _small(args) -> bool:
    """No tensor of more than 2^20 elements and no int beyond 2^20: we refuse those without
    touching memory; eager would materialise them (an expanded view of 2^31 rows, a Hadamard
    matrix of group_size 2^40)."""
    return all(v.numel() <= 2**20 for v in args.values() if isinstance(v, torch.Tensor)) and all(
        abs(v) <= 2**20 for v in args.values() if isinstance(v, int))  # eager builds an H of group_size


def _python_signature_error(error) -> bool:
    """A call Python itself refuses (missing or extra arguments): not ours to name."""
    import comfy_kitchen_c as ckc

    text = str(error)
    return (isinstance(error, TypeError) and not isinstance(error, ckc.KitchenError)
            and any(s in text for s in ("positional argument", "keyword argument", "multiple values")))


def _same_error_on_the_emulated_device(fn, positional, keywords, error):
    with emulated_device():
        _, gpu_error = _outcome(lambda: fn(*positional, **keywords))
    if type(gpu_error) is not type(error) or str(gpu_error) != str(error):
        raise oracle.Mismatch(f"the CPU raised {error!r}, the emulated device {gpu_error!r}")


def _same_bits(cpu, gpu, op, zero_signs=True):
    cpu = cpu if isinstance(cpu, tuple) else (cpu,)
    gpu = gpu if isinstance(gpu, tuple) else (gpu,)
    for k, (a, b) in enumerate(zip(cpu, gpu)):
        if a is None or b is None:  # an optional result (the W4A8 quantizer's correction, codebook)
            if (a is None) != (b is None):
                raise oracle.Mismatch(f"{op} result {k}: None on {'the CPU' if a is None else 'the emulated device'} "
                                      "only")
            continue
        oracle.same_form(b, a)
        oracle.bits_equal(b, a, f"{op} result {k} on the emulated device vs the CPU", zero_signs)


def _describe(args) -> str:
    parts = []
    for k, v in args.items():
        if isinstance(v, torch.Tensor):
            flags = ("neg " if v.is_neg() else "") + ("" if v.is_contiguous() else "strided ")
            parts.append(f"{k}={flags}{str(v.dtype).replace('torch.', '')}{list(v.shape)}"
                         f"@{v.storage_offset()}")
        else:
            parts.append(f"{k}={v!r}"[:60])
    return ", ".join(parts)


def run(n: int, seed: int, ops=None, verbose=False, skip_eager_on_error=False, start=0,
        stop_on_failure=False) -> Stats:
    names = sorted(ops or TARGETS)
    stats = Stats()
    warnings.filterwarnings("ignore")  # torch's notes on what the hostile inputs do (complex casts, ...)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny inputs: a thread pool's wake-ups cost more than the work
    try:
        _run_inputs(names, stats, n, seed, verbose, skip_eager_on_error, start, stop_on_failure)
    finally:
        torch.set_num_threads(threads)
    return stats


def _run_inputs(names, stats, n, seed, verbose, skip_eager_on_error, start, stop_on_failure):
    for i in range(start, start + n):
        target = TARGETS[names[i % len(names)]]
        if verbose:
            print(f"input {seed}:{i}", flush=True)
        try:
            outcome = run_one(target, Draw(seed, i), verbose, skip_eager_on_error)
        except Exception as exc:  # noqa: BLE001 - a finding
            stats.failures.append((f"{seed}:{i}", target.op, f"{type(exc).__name__}: {exc}",
                                   traceback.format_exc()))
            outcome = "FAILED"
            if stop_on_failure:
                stats.add(target.op, outcome)
                break
        stats.add(target.op, outcome)


def report(stats: Stats, seconds: float) -> str:
    lines = [f"{stats.inputs} inputs in {seconds:.1f} s, {len(stats.failures)} failures"]
    per_target = collections.defaultdict(dict)
    for (op, outcome), count in stats.by_outcome.items():
        per_target[op][outcome] = count
    for op in sorted(per_target):
        lines.append(f"  {op:38s} " + ", ".join(f"{k} {v}" for k, v in sorted(per_target[op].items())))
    for where, op, what, _ in stats.failures[:20]:
        lines.append(f"FAIL {where} {op}: {what[:400]}")
    return "\n".join(lines)


def _in_processes(args, argv) -> int:
    """Splits [start, start + inputs) into args.jobs contiguous shares, one process each."""
    import subprocess

    share = -(-args.inputs // args.jobs)
    rest, skip = [], False
    for a in argv:  # the other options, as given (--jobs, --inputs and --start are set per share)
        if skip:
            skip = False
        elif a in ("--jobs", "--inputs", "--start"):
            skip = True
        elif not a.startswith(("--jobs=", "--inputs=", "--start=")):
            rest.append(a)
    procs = []
    for j in range(args.jobs):
        n = min(share, args.inputs - j * share)
        cmd = [sys.executable, os.path.abspath(__file__), *rest, "--inputs", str(n), "--start",
               str(args.start + j * share)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    rc = 0
    for j, proc in enumerate(procs):
        out, _ = proc.communicate()
        print(f"== share {j + 1} of {args.jobs} (exit {proc.returncode})\n{out}", end="")
        rc = rc or proc.returncode
    return rc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--inputs", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--op", action="append", help="only this target (repeatable)")
    p.add_argument("--replay", help="SEED:INDEX of one input")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--start", type=int, default=0, help="index of the first input")
    p.add_argument("--jobs", type=int, default=1, help="processes, each a contiguous share of the inputs")
    p.add_argument("--skip-eager-on-error", action="store_true",
                   help="do not run eager on inputs we refuse (CI: the comparison is only needed where we answer)")
    args = p.parse_args(argv)
    start = args.start
    if args.jobs > 1 and not args.replay:
        return _in_processes(args, argv or sys.argv[1:])
    if args.replay:  # the same target and draws as input INDEX of the run over the same targets
        seed, index = args.replay.split(":")
        args.seed, start, args.inputs = int(seed), int(index), 1
    t0 = time.perf_counter()
    stats = run(args.inputs, args.seed, args.op, args.verbose,
                args.skip_eager_on_error, start)
    print(report(stats, time.perf_counter() - t0))
    if stats.failures and (args.verbose or args.replay):
        for _, _, _, tb in stats.failures[:3]:
            print(tb)
    return 1 if stats.failures else 0


if __name__ == "__main__":
    sys.exit(main())
