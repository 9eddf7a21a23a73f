# SPDX-License-Identifier: Apache-2.0
"""The Markdown report (benchmarks/results/<gpu>.md) from the steps' results and the
workers' records.  Every table says which time it shows."""
from __future__ import annotations

from dataclasses import dataclass

from .profile import short_kernel_name
from .records import BACKENDS, COPY, FLIGHT_OFF, FLIGHT_RIDING, IMPLS, OURS, Row
from .targets import TARGETS, checks, summarize


@dataclass
class StepResult:
    key: str
    name: str
    status: str
    seconds: float
    budget_s: float = 0.0
    detail: str = ""
    command: str = ""
    log_tail: str = ""


def table(header: list[str], rows: list[list[str]], align: str) -> str:
    """A Markdown table; align has one character per column, l or r."""
    lines = ["| " + " | ".join(header) + " |",
             "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |" for cells in rows]
    return "\n".join(lines) + "\n"


def fmt_us(v: float | None, ahead: bool = True) -> str:
    """Microseconds, 4 significant digits; '*' marks a time taken without the host ahead."""
    if v is None:
        return "-"
    return f"{v:.4g}" + ("" if ahead else "*")


def fmt_ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def fmt_fraction(v: float | None) -> str:
    return "-" if v is None else f"{v:.0%}"


def steps_table(results: list[StepResult]) -> str:
    body = [[f"{r.key}. {r.name}", r.status, f"{r.seconds:.1f} s", f"{r.budget_s:.0f} s" if r.budget_s else "-",
             r.detail] for r in results]
    return table(["step", "status", "time", "budget", "detail"], body, "llrrl")


def step_logs(results: list[StepResult]) -> str:
    parts = []
    for r in results:
        if r.command:
            parts.append(f"- {r.key}. {r.name}: `{r.command}`\n")
        if r.log_tail:
            parts.append(f"\n<details><summary>{r.key}. {r.name}: end of output</summary>\n\n```\n"
                         f"{r.log_tail}\n```\n</details>\n\n")
    return "".join(parts)


GPU_TIME_NOTE = ("GPU microseconds per call with the host running ahead: calls queued behind a spin kernel, "
                 "timed between CUDA events once the host has queued them all while the GPU still spins "
                 "(median over rounds; `*`: no round had the host ahead, so that time may be the host's). "
                 "graph: ours from a replayed CUDA graph of the same calls. copy: a device-to-device copy "
                 "of the bytes our op moves. of copy BW: copy / ours. vs best: the faster of cuda and "
                 "triton / ours. model: gpu_model's prediction for ours, and its error. all riding: ours "
                 "with every completion mark riding on its op's kernel (before the riding limit of "
                 "csrc/diag/marks.h, ours gives ops over 32 MiB a separate mark). flight off: ours "
                 "with the flight record off (M = 4096).\n\n")


def gpu_table(rows: list[Row]) -> str:
    header = ["op", "shape", "MB", "ours", "graph", *BACKENDS, "copy", "of copy BW", "vs best", "model",
              "model err", "all riding", "flight off", "targets"]
    body = []
    for r in rows:
        ours = r.gpu_us.get(OURS)
        best = r.best_backend()
        err = r.model_us / ours - 1 if r.model_us and ours else None
        marks = ", ".join(f"{c.target} {c.text} {'ok' if c.met else 'MISS'}" for c in checks(r))
        body.append([r.op, r.shape, f"{r.nbytes / 1e6:.3g}",
                     *(fmt_us(r.gpu_us.get(i), r.ahead.get(i, True)) for i in (OURS,)), fmt_us(r.graph_us),
                     *(fmt_us(r.gpu_us.get(b), r.ahead.get(b, True)) for b in BACKENDS),
                     fmt_us(r.gpu_us.get(COPY), r.ahead.get(COPY, True)), fmt_fraction(r.ratio(COPY)),
                     fmt_ratio(best[1] / ours if best and ours else None), fmt_us(r.model_us),
                     "-" if err is None else f"{err:+.0%}", fmt_us(r.gpu_us.get(FLIGHT_RIDING)),
                     fmt_us(r.gpu_us.get(FLIGHT_OFF)), marks or "-"])
    return table(header, body, "llr" + "r" * 12 + "l")


HOST_TIME_NOTE = ("Host microseconds per call: the calling thread's time to queue one call (host clock, the "
                  "GPU busy spinning meanwhile, so a full launch queue never holds it up).\n\n")


def host_table(rows: list[Row]) -> str:
    names = (OURS, *BACKENDS)
    body = [[r.op, r.shape, *(fmt_us(r.host_us.get(i)) for i in names)] for r in rows]
    return table(["op", "shape", *names], body, "ll" + "r" * len(names))


def targets_table(rows: list[Row]) -> str:
    body = [[s.target, TARGETS[s.target], f"{s.met}/{s.counted}", s.worst, s.result] for s in summarize(rows)]
    return table(["target", "goal", "rows meeting", "worst (row)", "result"], body, "llrll")


KERNELS_NOTE = ("GPU microseconds per call of each kernel, memcpy and memset, from torch.profiler (a few calls "
                "per implementation after warm-up calls; names shortened, the full ones below); total: their "
                "sum, the GPU's busy time per call.\n\n")


def kernels_table(rows: list[Row]) -> tuple[str, list[str]]:
    body, full = [], {}
    for r in rows:
        for impl in IMPLS:
            items = r.kernels.get(impl)
            if not items:
                continue
            names = []
            for name, count, us in items:
                short = short_kernel_name(name)
                if short != name:
                    full[short] = name
                names.append(f"`{short}` x{count:g} {us:.1f}")
            body.append([r.op, r.shape, impl, "; ".join(names), f"{sum(e[2] for e in items):.1f}"])
    return table(["op", "shape", "impl", "kernels (count, us per call)", "total us"], body, "lllll"), \
        [f"- `{short}`: `{name}`\n" for short, name in full.items()]


def notes_list(rows: list[Row]) -> str:
    """Why cells are empty: one line per (implementation, op, reason), with the shapes."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for r in rows:
        for name, note in r.notes.items():
            grouped.setdefault((name, r.op, note), []).append(r.shape)
    return "".join(f"- {name} {op} ({', '.join(shapes)}): {note}\n" for (name, op, note), shapes in grouped.items())


def backends_list(backends: dict) -> str:
    lines = []
    for b, info in backends.items():
        state = "available" if info["available"] else f"unavailable ({info['reason']})"
        lines.append(f"- {b}: {state}; registers {', '.join(info['ops']) or 'none of the measured ops'}\n")
    return "".join(lines) or "- not measured\n"


def gemm_table(choices: list[dict]) -> str:
    """The int8 GEMM's algorithm per shape class, as the bench worker's timing chose it."""
    rows = [[str(c["m_bucket"]), str(c["n"]), str(c["k"]), str(c["index"]), str(c["candidates"]), f"{c['us']:.1f}"]
            for c in sorted(choices, key=lambda c: (c["n"], c["k"], c["m_bucket"]))]
    return table(["M up to", "N", "K", "chosen (heuristic's rank)", "eligible timed", "us per GEMM"], rows, "rrrrrr")


def render(header: dict[str, str], results: list[StepResult], rows: list[Row], backends: dict,
           gemm: list[dict] | None = None) -> str:
    """The whole report; header: its first lines (GPU, commit, command, ...)."""
    parts = [f"## GPU check: {header.get('GPU', 'unknown GPU').split(',')[0]}\n\n",
             *(f"- {k}: {v}\n" for k, v in header.items()),
             "\n### Steps\n\n", steps_table(results), "\n", step_logs(results),
             "\n### Backends\n\n", backends_list(backends)]
    if rows:
        kernels, full = kernels_table(rows)
        parts += ["\n### GPU time per call (us, host running ahead)\n\n", GPU_TIME_NOTE, gpu_table(rows),
                  "\n### Host time per call (us)\n\n", HOST_TIME_NOTE, host_table(rows),
                  "\n### Targets (computed, not asserted)\n\n", targets_table(rows),
                  "\n### GPU time per kernel (us per call, torch.profiler)\n\n", KERNELS_NOTE, kernels]
        if full:
            parts += ["\n<details><summary>Full kernel names</summary>\n\n", *full, "</details>\n"]
        if gemm:
            parts += ["\n### int8 GEMM algorithms chosen by timing (rank 0: cuBLASLt's first answer)\n\n",
                      gemm_table(gemm)]
        notes = notes_list(rows)
        if notes:
            parts += ["\n### Why cells are empty\n\n", notes]
    else:
        parts.append("\nNo rows were measured.\n")
    return "".join(parts)
