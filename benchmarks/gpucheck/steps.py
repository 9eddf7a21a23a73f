# SPDX-License-Identifier: Apache-2.0
"""The steps of a GPU check and their time budget.

Each step has a planned time (quick and full runs): the plan must fit the run's budget
(``--dry-run`` prints it).  When a step starts it may take what is left less the planned
time of the steps after it (but at least MIN_STEP_S), and at most OVERRUN times its own
plan (the benchmark, which stops itself at its budget, takes all of that).  A step with
less than MIN_STEP_S left is not run: an optional one is "skipped", another "failed".  A
failed step does not stop the next ones."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from .report import StepResult

PASSED, FAILED, SKIPPED, INCOMPLETE = "passed", "failed", "skipped", "incomplete"
MIN_STEP_S = 15
OVERRUN = 1.5
REPORT_RESERVE_S = 5
QUICK_BUDGET_S = 450    # --quick fits in 8 minutes on an H100 with start-up and copying
FULL_BUDGET_S = 600


@dataclass
class Outcome:
    status: str
    detail: str = ""
    command: str = ""
    log_tail: str = ""


@dataclass
class Step:
    key: str
    name: str
    purpose: str
    run: Callable                 # (context, seconds it may take) -> Outcome
    quick_s: float                # planned seconds in a --quick run (0: not run)
    full_s: float                 # planned seconds otherwise
    optional: bool = False        # its problems are reported, never a failure of the check
    takes_rest: bool = False      # may use every second the later steps do not need

    def planned(self, quick: bool) -> float:
        return self.quick_s if quick else self.full_s


@dataclass
class Context:
    args: object
    deadline: float
    quick: bool
    clock: Callable[[], float] = time.monotonic
    data: dict = field(default_factory=dict)   # what steps hand to later ones (rows, backends)

    def time_left(self) -> float:
        return self.deadline - self.clock() - REPORT_RESERVE_S


def planned_total(steps: list[Step], quick: bool) -> float:
    return sum(s.planned(quick) for s in steps) + REPORT_RESERVE_S


def step_time(steps: list[Step], step: Step, left: float, quick: bool) -> float:
    """Seconds `step` may take with `left` seconds left: what is left less the plans of the
    steps after it, at least MIN_STEP_S, at most OVERRUN times its own plan (unless it takes
    the rest)."""
    later = steps[steps.index(step) + 1:]
    share = max(left - sum(s.planned(quick) for s in later), MIN_STEP_S)
    return share if step.takes_rest else min(share, OVERRUN * step.planned(quick))


def run_step(ctx: Context, steps: list[Step], step: Step, log: Callable[[str], None] = print) -> StepResult:
    log(f"[{step.key}] {step.name} ...")
    start = ctx.clock()
    left = ctx.time_left()
    allowed = 0.0
    if step.planned(ctx.quick) == 0:
        outcome = Outcome(SKIPPED, "not part of a --quick run")
    elif left < MIN_STEP_S:
        outcome = Outcome(SKIPPED if step.optional else FAILED,
                          f"not run: {left:.0f} s of the time budget left")
    else:
        allowed = step_time(steps, step, left, ctx.quick)
        try:
            outcome = step.run(ctx, allowed)
        except Exception as exc:  # a bug of this script must not hide the other steps' results
            outcome = Outcome(INCOMPLETE if step.optional else FAILED, f"{type(exc).__name__}: {exc}")
    if step.optional and outcome.status == FAILED:
        outcome.status = INCOMPLETE
    result = StepResult(step.key, step.name, outcome.status, ctx.clock() - start, allowed, outcome.detail,
                        outcome.command, outcome.log_tail)
    log(f"[{result.key}] {result.name}: {result.status} ({result.seconds:.1f} s of {allowed:.0f}) {result.detail}")
    return result


def run_steps(ctx: Context, steps: list[Step], log: Callable[[str], None] = print) -> list[StepResult]:
    return [run_step(ctx, steps, step, log) for step in steps]


def exit_status(results: list[StepResult]) -> int:
    return 1 if any(r.status == FAILED for r in results) else 0


def plan_lines(steps: list[Step], quick: bool, budget: float, commands: dict[str, str]) -> list[str]:
    """The plan's step lines: planned time, limit and command of each step, and the total."""
    lines = []
    for s in steps:
        planned = s.planned(quick)
        if planned == 0:
            lines += [f"{s.key}. {s.name}: {s.purpose} -- not part of a --quick run"]
            continue
        limit = "what is left" if s.takes_rest else f"at most {OVERRUN * planned:.0f} s"
        lines += [f"{s.key}. {s.name}: {s.purpose} -- {planned:.0f} s planned, {limit}",
                  f"     {commands[s.name]}"]
    total = planned_total(steps, quick)
    verdict = "fits" if total <= budget else "DOES NOT FIT"
    lines.append(f"planned: {total:.0f} s with {REPORT_RESERVE_S} s for the report; budget {budget:.0f} s: {verdict}")
    return lines
