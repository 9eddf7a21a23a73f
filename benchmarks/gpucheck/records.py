# SPDX-License-Identifier: Apache-2.0
"""What the workers measure, one JSON line per record (a crash keeps the lines before it),
and the merging of the profile worker's kernels into the bench worker's rows."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

# Implementations measured per row: ours, comfy_kitchen's cuda and triton backends, a device
# copy of the same bytes, and ours with the flight record off (M >= FLIGHT_MIN_M only).
OURS, COPY, FLIGHT_OFF = "ours", "copy", "ours_flight_off"
FLIGHT_RIDING = "ours_all_marks_riding"  # every completion mark on its op's kernel (the policy before c7606bf)
BACKENDS = ("cuda", "triton")
IMPLS = (OURS, *BACKENDS, COPY)


@dataclass
class Row:
    """One op at one shape (M x K, or M x K x N for a linear op).  Times in microseconds
    per call, None where not measured (notes say why): gpu_us with the host running ahead
    (timing.time_queued), host_us the host's queueing time; ahead[impl] False where no round
    had the host ahead.  graph_us: ours from a replayed CUDA graph.  kernels[impl]: the
    profiler's [name, count per call, GPU us per call] per kernel, memcpy or memset.
    model_us: gpu_model's prediction for ours."""
    op: str
    m: int
    k: int
    n: int = 0
    nbytes: int = 0
    gpu_us: dict = field(default_factory=dict)
    host_us: dict = field(default_factory=dict)
    ahead: dict = field(default_factory=dict)
    graph_us: float | None = None
    kernels: dict = field(default_factory=dict)
    model_us: float | None = None
    notes: dict = field(default_factory=dict)

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.k}" + (f"x{self.n}" if self.n else "")

    @property
    def key(self) -> tuple:
        return (self.op, self.m, self.k, self.n)

    def ratio(self, numerator: str) -> float | None:
        """numerator's GPU time / ours: a speedup of ours over a backend, or ours' fraction of
        the copy's bandwidth."""
        mine, theirs = self.gpu_us.get(OURS), self.gpu_us.get(numerator)
        return theirs / mine if mine and theirs else None

    def best_backend(self) -> tuple[str, float] | None:
        """The faster of comfy_kitchen's backends that were measured: (name, us)."""
        measured = [(self.gpu_us[b], b) for b in BACKENDS if self.gpu_us.get(b)]
        return (min(measured)[1], min(measured)[0]) if measured else None


@dataclass
class Kernels:
    """The profile worker's record: one implementation of one row's call."""
    op: str
    m: int
    k: int
    n: int
    impl: str
    kernels: list            # [name, count per call, us per call]
    note: str = ""

    @property
    def key(self) -> tuple:
        return (self.op, self.m, self.k, self.n)


def write_record(out, kind: str, record) -> None:
    """One JSON line, flushed: a crash after it keeps it."""
    body = asdict(record) if hasattr(record, "__dataclass_fields__") else record
    out.write(json.dumps({"kind": kind, **body}) + "\n")
    out.flush()


def read_records(path: str) -> list[dict]:
    """The JSON records of a worker's output file, one a line; a line cut short by a crash
    is left out."""
    records = []
    with open(path) as f:
        for line in f:
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return records


def of_kind(records: list[dict], kind: str) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "kind"} for r in records if r.get("kind") == kind]


def rows_from(records: list[dict]) -> list[Row]:
    return [Row(**r) for r in of_kind(records, "row")]


def merge_kernels(rows: list[Row], items: list[Kernels]) -> list[Kernels]:
    """Puts each profiled implementation's kernels (or its note) into its row; returns the
    items whose row was not measured."""
    by_key = {r.key: r for r in rows}
    orphans = []
    for item in items:
        row = by_key.get(item.key)
        if row is None:
            orphans.append(item)
        elif item.note:
            row.notes[f"profile {item.impl}"] = item.note
        else:
            row.kernels[item.impl] = item.kernels
    return orphans
