# SPDX-License-Identifier: Apache-2.0
"""``python -m comfy_kitchen_c stress``: the field report's controls as a matrix.

For every cell (host regime x backend x staging option) it runs N back-to-back generations of
the DiT-like stack of stress_model.py, whose weights stream from a file on disk, and counts
runs, clean runs (no fault, no hang, the result equal to a reference generation), faults
(CudaFault: LaunchError, KernelFault, StagingFault), hangs (HangSuspected: no progress past
COMFY_KITCHEN_C_HANG_RAISE_MS at a fence), wrong results, and the median seconds per
generation.  Every run's flight records are a seq range of this process's record file (listed
in --json); the record of a run that was not clean is also copied to --out, for ``doctor
--record``.

Devices: "cuda" (a GPU; backends c, comfy_kitchen's cuda and triton where available, CUDA
graphs with --graphs), "emulated" (the GPU kernels on the CPU, backend c; ``--inject`` arms
testing.inject faults so that they show in the matrix: CI runs this), "cpu" (the C CPU
kernels, backend c).  On a GPU, a fault may leave the device unusable: the remaining cells are
then reported as not run.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field

import torch

from . import _C, faults, flight, settings, stress_model, testing

HELP = "stream a DiT-like int8 ConvRot stack from disk, N generations per cell, and count faults and hangs"
REGIMES = ("page-cache", "disk-paced")
OPTIONS = ("reuse", "reuse+fence", "unregister", "unregister+fence")
BACKENDS = ("c", "cuda", "triton")


@dataclass
class Cell:
    regime: str
    backend: str
    option: str
    times: list[float] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)  # clean | fault | hang | wrong | error
    runs: list[dict] = field(default_factory=list)
    not_run: str | None = None

    def count(self, outcome: str) -> int:
        return self.outcomes.count(outcome)

    def row(self) -> tuple:
        if self.not_run:
            return (self.regime, self.backend, self.option, "-", "-", "-", "-", "-", "-", self.not_run)
        median = f"{statistics.median(self.times):.3f}" if self.times else "-"
        return (self.regime, self.backend, self.option, len(self.outcomes), self.count("clean"), self.count("fault"),
                self.count("hang"), self.count("wrong") + self.count("error"), median, "")


# ---- injection ----------------------------------------------------------------------------------

def parse_inject(spec: str) -> tuple[int, str, str | None, int]:
    """"KIND[:OP[:NTH]]@RUN" -> (run, kind, op, nth): arm testing.inject in that run of every cell."""
    try:
        what, run = spec.split("@")
        parts = what.split(":")
        kind, op, nth = parts[0], (parts[1] or None) if len(parts) > 1 else None, int(parts[2]) if len(parts) > 2 else 1
        if kind not in testing.INJECT_KINDS or int(run) < 1 or nth < 1:
            raise ValueError
        return int(run), kind, op, nth
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--inject {spec!r}: expected KIND[:OP[:NTH]]@RUN, KIND one of {', '.join(testing.INJECT_KINDS)}") from None


# ---- progress -----------------------------------------------------------------------------------

class Progress:
    """A progress bar on stderr (a line per update when stderr is not a terminal)."""

    def __init__(self, total: int, enabled: bool = True):
        self.total, self.done, self.start, self.enabled = total, 0, time.perf_counter(), enabled
        self.tty = sys.stderr.isatty()

    def step(self, label: str) -> None:
        self.done += 1
        if not self.enabled:
            return
        width = 30
        filled = int(width * self.done / max(1, self.total))
        elapsed = time.perf_counter() - self.start
        eta = elapsed / self.done * (self.total - self.done)
        line = f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} runs, {elapsed:.0f} s, " \
               f"~{eta:.0f} s left: {label}"
        print(("\r" + line[:118].ljust(118)) if self.tty else line, end="" if self.tty else "\n",
              file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled and self.tty:
            print(file=sys.stderr)


# ---- running ------------------------------------------------------------------------------------

def available_backends(device: str) -> list[str]:
    if device != "cuda":
        return ["c"]
    from comfy_kitchen.registry import registry
    return [b for b in BACKENDS if b == "c" or registry.is_available(b)]


def available_options(device: str) -> list[str]:
    return list(OPTIONS) if device == "cuda" else [o for o in OPTIONS if not o.startswith("unregister")]


def _seq() -> int:
    path = faults.record_path()
    return flight.load(path)["written"] if path else 0


def _snapshot(out_dir: str | None, cell: Cell, run: int) -> str | None:
    path = faults.record_path()
    if out_dir is None or path is None:
        return None
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, f"run-{cell.regime}-{cell.backend}-{cell.option.replace('+', '_')}-{run}"
                                   f"{flight.SUFFIX}")
    if getattr(_C, "flight_sync", None):
        _C.flight_sync()
    shutil.copyfile(path, target)
    return target


def _attribution(exc) -> str:
    """"KernelFault in stage (flight record seq 12), found by int8_linear: <first line>"."""
    return (f"{type(exc).__name__} in {getattr(exc, 'op', '?')} (flight record seq {getattr(exc, 'seq', '?')}), "
            f"found by {getattr(exc, 'detected_by', '?')}: {str(exc).splitlines()[0]}")


def run_cell(cell: Cell, args, device: stress_model.Device, weights: str, layout, shapes, reference: dict,
             progress: Progress, injections: dict) -> bool:
    """N generations of one cell; False when the GPU is no longer usable."""
    linear = stress_model.linear_for(cell.backend)
    stager = stress_model.Stager(device, weights, layout, shapes, cell.option, cell.regime, args.disk_mbps)
    graphs = stress_model.GraphBlocks(linear) if args.graphs and device.kind == "cuda" else None
    usable = True
    try:
        x0 = stress_model.initial_input(device, shapes)
        for run in range(1, args.runs + 1):
            first = _seq() + 1
            arm = injections.get(run)
            start = time.perf_counter()
            outcome, message = "clean", ""
            try:
                with contextlib.ExitStack() as stack:
                    if arm is not None:
                        stack.enter_context(testing.inject(arm[0], arm[1], arm[2]))
                    out = stress_model.generation(stager, shapes, x0, linear, args.steps, graphs)
                if cell.backend not in reference:
                    reference[cell.backend] = out  # the first generation of a backend is its reference
                elif not stress_model.same_result(out, reference[cell.backend], cell.backend == "c"):
                    outcome, message = "wrong", "result differs from the backend's first generation"
            except _C.HangSuspected as exc:
                outcome, message = "hang", _attribution(exc)
            except _C.CudaFault as exc:
                outcome, message = "fault", _attribution(exc)
            except Exception as exc:  # noqa: BLE001 - a harness reports every failure in its matrix
                outcome, message = "error", f"{type(exc).__name__}: {exc}".splitlines()[0]
            seconds = time.perf_counter() - start
            if outcome in ("fault", "hang") and device.kind == "emulated":
                testing.reset_device()
            elif outcome in ("fault", "hang") and device.kind == "cuda":
                usable = False
            if outcome == "clean":
                cell.times.append(seconds)
            cell.outcomes.append(outcome)
            cell.runs.append({"run": run, "outcome": outcome, "seconds": seconds, "message": message,
                              "flight_record": faults.record_path(), "seq": [first, _seq()],
                              "snapshot": _snapshot(args.out, cell, run) if outcome != "clean" else None,
                              "injected": None if arm is None else f"{arm[0]}:{arm[1]}:{arm[2]}"})
            progress.step(f"{cell.regime} / {cell.backend} / {cell.option} run {run}: {outcome}")
            if not usable:
                break
    finally:
        stager.close()
    return usable


def matrix(args) -> list[Cell]:
    device = stress_model.Device(args.device)
    shapes = stress_model.Shapes.scaled(args.scale, args.layers, args.tokens)
    backends = [b for b in (args.backend or available_backends(args.device))]
    options = args.option or available_options(args.device)
    cells = [Cell(r, b, o) for r in (args.regime or REGIMES) for b in backends for o in options]
    injections = {}
    for run, kind, op, nth in args.inject or ():
        injections[run] = (kind, op, nth)
    if injections and args.device != "emulated":
        raise SystemExit("stress: --inject needs --device emulated (faults are injected by the emulated device)")
    progress = Progress(len(cells) * args.runs, not args.quiet)
    folder = tempfile.mkdtemp(prefix="ckc-stress-")
    weights = os.path.join(folder, "weights.bin")
    try:
        with device.context():
            layout = stress_model.write_weights(weights, shapes)
            reference, usable = {}, True
            for cell in cells:
                if not usable:
                    cell.not_run = "not run: the GPU was lost in an earlier cell"
                    continue
                if args.backend is None and cell.backend not in available_backends(args.device):
                    cell.not_run = "backend not available"
                    continue
                usable = run_cell(cell, args, device, weights, layout, shapes, reference, progress, injections)
    finally:
        progress.close()
        shutil.rmtree(folder, ignore_errors=True)
    args.shapes = shapes
    return cells


# ---- report -------------------------------------------------------------------------------------

COLUMNS = ("regime", "backend", "option", "runs", "clean", "faults", "hangs", "wrong", "s/generation", "")


def _short(text: str, limit: int = 170) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def print_matrix(cells: list[Cell], args, out) -> None:
    s = args.shapes
    print(f"stress: device {args.device}, {s.layers} blocks (hidden {s.hidden}, MLP {s.ffn}, {s.tokens} tokens; "
          f"{s.layer_bytes() / 2**20:.1f} MiB of int8 weights per block, streamed from disk), {args.steps} steps "
          f"per generation, {args.runs} generations per cell, checking mode {faults.check_mode()}"
          + (f", disk-paced at {args.disk_mbps:g} MB/s" if "disk-paced" in (args.regime or REGIMES) else "")
          + (", CUDA graphs" if args.graphs and args.device == "cuda" else ""), file=out)
    rows = [COLUMNS] + [tuple(str(c) for c in cell.row()) for cell in cells]
    widths = [max(len(r[k]) for r in rows) for k in range(len(COLUMNS))]
    for r in rows:
        print("  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)
    for cell in cells:
        for run in cell.runs:
            if run["outcome"] != "clean":
                where = f" (record: {run['snapshot']})" if run["snapshot"] else \
                    f" (seq {run['seq'][0]}-{run['seq'][1]} of {run['flight_record']})"
                print(f"  {cell.regime}/{cell.backend}/{cell.option} run {run['run']}: {run['outcome']}: "
                      f"{_short(run['message'])}{where}", file=out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    default_device = "cuda" if torch.cuda.is_available() and _C.HAS_CUDA else "emulated"
    parser.add_argument("--device", choices=("cuda", "emulated", "cpu"), default=default_device,
                        help=f"where the layers run (default here: {default_device})")
    parser.add_argument("--scale", type=float, default=0.02 if default_device != "cuda" else 0.25,
                        help="shapes as a fraction of the report's model (hidden 5376, MLP 14336, 80640 tokens)")
    parser.add_argument("--layers", type=int, help="blocks (default: from --scale, 90 at full scale)")
    parser.add_argument("--tokens", type=int, help="rows of the activations (default: from --scale)")
    parser.add_argument("--steps", type=int, default=2, help="passes through all blocks per generation")
    parser.add_argument("--runs", type=int, default=3, help="back-to-back generations per cell")
    parser.add_argument("--regime", action="append", choices=REGIMES, help="host regime (repeatable; default both)")
    parser.add_argument("--disk-mbps", type=float, default=800.0, help="read rate of the disk-paced regime")
    parser.add_argument("--backend", action="append", choices=BACKENDS, help="backend (default: those available)")
    parser.add_argument("--option", action="append", choices=OPTIONS,
                        help="what happens to the staging buffer after its copy (default: all available)")
    parser.add_argument("--graphs", action="store_true", help="replay each block from a CUDA graph (GPU only)")
    parser.add_argument("--check", choices=tuple(faults.MODES), help="checking mode (default: the setting)")
    parser.add_argument("--hang-ms", type=int, help="COMFY_KITCHEN_C_HANG_MS for this run (raise after 3x)")
    parser.add_argument("--inject", action="append", type=parse_inject, metavar="KIND[:OP[:NTH]]@RUN",
                        help="emulated device: fail that run of every cell (e.g. copy:stage:3@2, hang:int8_linear@3)")
    parser.add_argument("--out", metavar="DIR", help="copy the flight record of every run that was not clean here")
    parser.add_argument("--json", metavar="PATH", help="write the matrix and every run as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def main(args: argparse.Namespace) -> int:
    """0 when the matrix was made (whatever it shows), 2 when it cannot run here."""
    if args.device == "cuda" and not (torch.cuda.is_available() and _C.HAS_CUDA):
        print("stress: no usable CUDA device (use --device emulated or cpu)", file=sys.stderr)
        return 2
    if args.device == "emulated":
        try:
            testing._emu()
        except RuntimeError as exc:
            print(f"stress: {exc}", file=sys.stderr)
            return 2
    if args.hang_ms is not None:
        settings.apply(settings.load({**os.environ, "COMFY_KITCHEN_C_HANG_MS": str(args.hang_ms),
                                      "COMFY_KITCHEN_C_HANG_RAISE_MS": str(3 * args.hang_ms)}))
    mode = args.check or settings.value("COMFY_KITCHEN_C_CHECK")
    with faults.checking(mode):
        cells = matrix(args)
        print_matrix(cells, args, sys.stdout)
    if args.json:
        doc = {"device": args.device, "shapes": vars(args.shapes), "steps": args.steps, "runs": args.runs,
               "check": mode, "cells": [{"regime": c.regime, "backend": c.backend, "option": c.option,
                                         "not_run": c.not_run, "runs": c.runs} for c in cells]}
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
    return 0
