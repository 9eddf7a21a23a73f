# SPDX-License-Identifier: Apache-2.0
"""The targets of issue 11 (item 5), computed per row from the measurements and reported,
never asserted:

- bandwidth: every quantizer and dequantizer at least 80% of the device copy's bandwidth
  for the same bytes (copy time / ours), at M = 4096;
- speed: every op at least 1.0x the faster of comfy_kitchen's cuda and triton backends
  wherever either serves it, at every shape (M = 1 included); int8_linear at every M;
- host: our host time per call at most 8 us for a quantizer or dequantizer, 15 us for
  int8_linear;
- flight: our GPU time with the flight record on within 2% of it off, at M = 4096;
- model: gpu_model's prediction within 30% of our measured GPU time."""
from __future__ import annotations

from dataclasses import dataclass

from .records import FLIGHT_OFF, OURS, Row

LINEAR_OPS = ("int8_linear", "scaled_mm_nvfp4")
BANDWIDTH_GOAL = 0.80
TARGET_M = 4096          # the bandwidth and flight targets are taken at this M
SPEED_GOAL = 1.0
HOST_GOAL_US = {"quantizer": 8.0, "int8_linear": 15.0}
FLIGHT_GOAL = 0.02
MODEL_GOAL = 0.30


@dataclass
class Check:
    """One target on one row: its value and whether it is met."""
    target: str
    value: float
    met: bool
    text: str   # the value as the report shows it


TARGETS = {
    "bandwidth": f"quantizers and dequantizers >= {BANDWIDTH_GOAL:.0%} of the copy's bandwidth (M = {TARGET_M})",
    "speed": f"every op >= {SPEED_GOAL:.1f}x the faster of comfy_kitchen cuda and triton (every shape)",
    "host": f"host time per call <= {HOST_GOAL_US['quantizer']:g} us (quantizers, dequantizers), "
            f"{HOST_GOAL_US['int8_linear']:g} us (int8_linear)",
    "flight": f"flight record on within {FLIGHT_GOAL:.0%} of off (M = {TARGET_M})",
    "model": f"gpu_model's prediction within {MODEL_GOAL:.0%} of the measured GPU time",
}


def kind(op: str) -> str:
    if op == "w4a8_int8_linear":  # an int8_linear with its weight decoded: that call's host goal
        return "int8_linear"
    return op if op in LINEAR_OPS else "quantizer"


def checks(row: Row) -> list[Check]:
    """The targets that apply to the row and were measured on it."""
    out = []
    ours = row.gpu_us.get(OURS)
    if kind(row.op) == "quantizer" and row.m == TARGET_M and row.ratio("copy") is not None:
        v = row.ratio("copy")
        out.append(Check("bandwidth", v, v >= BANDWIDTH_GOAL, f"{v:.0%}"))
    best = row.best_backend()
    if best is not None and ours:
        v = best[1] / ours
        out.append(Check("speed", v, v >= SPEED_GOAL, f"{v:.2f}x {best[0]}"))
    goal = HOST_GOAL_US.get(kind(row.op))
    host = row.host_us.get(OURS)
    if goal is not None and host is not None:
        out.append(Check("host", host, host <= goal, f"{host:.1f} us"))
    off = row.gpu_us.get(FLIGHT_OFF)
    if row.m == TARGET_M and ours and off:
        v = ours / off - 1
        out.append(Check("flight", v, v <= FLIGHT_GOAL, f"{v:+.1%}"))
    if row.model_us and ours:
        v = row.model_us / ours - 1
        out.append(Check("model", v, abs(v) <= MODEL_GOAL, f"{v:+.0%}"))
    return out


@dataclass
class Summary:
    target: str
    counted: int
    met: int
    worst: str     # the worst value and its row, "-" when nothing was counted

    @property
    def result(self) -> str:
        if not self.counted:
            return "not measured"
        return "met" if self.met == self.counted else "missed"


def worst_of(target: str, items: list[tuple[Row, Check]]) -> tuple[Row, Check]:
    """The row furthest from the goal: the lowest ratio, the highest time or overhead, the
    largest model error."""
    if target in ("bandwidth", "speed"):
        return min(items, key=lambda rc: rc[1].value)
    if target == "model":
        return max(items, key=lambda rc: abs(rc[1].value))
    return max(items, key=lambda rc: rc[1].value)


def summarize(rows: list[Row]) -> list[Summary]:
    out = []
    for target in TARGETS:
        items = [(r, c) for r in rows for c in checks(r) if c.target == target]
        if not items:
            out.append(Summary(target, 0, 0, "-"))
            continue
        row, check = worst_of(target, items)
        out.append(Summary(target, len(items), sum(c.met for _, c in items), f"{check.text} ({row.op} {row.shape})"))
    return out
