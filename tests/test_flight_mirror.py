# SPDX-License-Identifier: Apache-2.0
"""Completion marks in pinned words, mirrored into the flight record's file (csrc/diag/marks.c,
csrc/diag/flight_mirror.c).  Where the device cannot write the file mapping (Linux >= 6.5
refuses CUDA to pin file-backed pages), the stream writes each completion into pinned host
memory and a thread copies it into the file while work is outstanding, sleeping otherwise.
The emulated device refuses the file the same way under ``testing.host_mapping_refused()`` /
``COMFY_KITCHEN_C_EMU_REFUSE_HOST_MAPPING=1``.

These tests read the file's bytes directly (not ``flight.load``, which brings this process's
own record up to date first): what they see is what a reader sees after the process is gone."""
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import comfy_kitchen_c as ckc
from comfy_kitchen_c import _C, faults, flight, ops
from conftest import sigkilled

if sys.platform == "win32":
    pytest.skip("the emulated device is not built on Windows yet", allow_module_level=True)
from comfy_kitchen_c.testing import emulated_device, has_emulated_device, host_mapping_refused, inject  # noqa: E402

if not has_emulated_device():
    pytest.skip("this build has no emulated device (_C_emu: development builds only)", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
REFUSE = "COMFY_KITCHEN_C_EMU_REFUSE_HOST_MAPPING"
# How long a completion may take to reach the file.  The mirror copies every millisecond while
# work is outstanding; the bound is far above that because the test machine may be loaded
# (the measured figure is printed by benchmarks/bench_faults.py's runs, not asserted).
MIRROR_BOUND_S = 2.0


def file_slot(path: str, seq: int) -> tuple[int, int, int]:
    """(seq, done, state) of seq's slot, read from the file's bytes."""
    with open(path, "rb") as f:
        data = f.read()
    header_size, record_size, capacity = struct.unpack_from("<III", data, 20)
    offset = header_size + (seq - 1) % capacity * record_size
    slot_seq, done, _kind, state = struct.unpack_from("<QQII", data, offset)
    return slot_seq, done, state


def newest_seq(path: str) -> int:
    with open(path, "rb") as f:
        data = f.read(flight.HEADER.size)
    return flight.HEADER.unpack(data)[7]


def wait_for_file_completion(path: str, seq: int) -> float:
    """Seconds until the file shows seq completed; fails past MIRROR_BOUND_S."""
    start = time.monotonic()
    while True:
        slot_seq, done, _ = file_slot(path, seq)
        assert slot_seq == seq
        if done == seq:
            return time.monotonic() - start
        assert time.monotonic() - start < MIRROR_BOUND_S, f"seq {seq}: not completed in the file"
        time.sleep(0.0005)


def test_completions_reach_the_file_through_the_mirror():
    x = torch.randn(4, 64)
    with emulated_device(), host_mapping_refused():
        ops.quantize_int8_rowwise(x)
        ckc.stage(torch.empty(64), x[0])
    marks = _C.flight_marks()
    assert marks["words"] == "pinned" and marks["mirror"] == "running"
    path = faults.record_path()
    newest = newest_seq(path)
    for seq in (newest - 1, newest):
        wait_for_file_completion(path, seq)
    # what the C readers and flight.load see agrees with the file
    assert [r["state"] for r in flight.load(path)["records"][-2:]] == ["completed", "completed"]


def test_fences_see_pinned_completions():
    """fence() waits on the records' completion words: with the pinned words it returns
    at once for a completed copy (the file may not have been mirrored yet)."""
    src = torch.randn(256)
    with emulated_device(), host_mapping_refused():
        ckc.stage(torch.empty(256), src)
        start = time.monotonic()
        ckc.fence(src)
    assert time.monotonic() - start < 1.0  # the watchdog would flag it after 1.5 s


def python_env(record_dir, **extra):
    env = {**os.environ, "COMFY_KITCHEN_C_FLIGHT_DIR": str(record_dir), **extra}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


# Launch mode: no fence, so nothing flushes the file; only the mirror can complete its records.
RUN_OPS = """
import json, sys, time, torch
import comfy_kitchen_c as ckc
from comfy_kitchen_c import _C, faults, ops
from comfy_kitchen_c.testing import emulated_device
x = torch.randn(8, 256)
with emulated_device():
    staged = torch.empty_like(x)
    ckc.stage(staged, x)
    q, scale = ops.quantize_int8_rowwise(staged)
    ops.dequantize_int8_simple(q, scale)
"""


IDLE_SCRIPT = """
import json, sys, time, torch
from comfy_kitchen_c import _C, faults, ops
from comfy_kitchen_c.testing import emulated_device, inject, reset_device
def wakeups():
    return _C.flight_marks()["mirror_wakeups"]
def wakeups_over(seconds):
    before = wakeups(); time.sleep(seconds); return wakeups() - before
with emulated_device():
    for _ in range(5):
        ops.quantize_int8_rowwise(torch.randn(2, 32))
    time.sleep(0.2)  # every completion mirrored, nothing outstanding for far longer than the mirror lingers
    idle = wakeups_over(0.3)
    with inject("hang", op="dequantize_int8_simple"):
        q, s = ops.quantize_int8_rowwise(torch.randn(2, 32))
        ops.dequantize_int8_simple(q, s)  # never completes: outstanding
        busy = wakeups_over(0.3)
    time.sleep(0.2)  # the reset abandoned it (failed): nothing outstanding again
    after = wakeups_over(0.3)
print(json.dumps({"marks": _C.flight_marks(), "idle": idle, "busy": busy, "after": after}))
"""


def test_mirror_polls_only_while_work_is_outstanding(tmp_path):
    """No permanent wakeups: the mirror sleeps once every record has been completed or failed
    for a while (CKC_FLIGHT_MIRROR_LINGER periods, 50 ms), and polls (about every millisecond)
    while one is outstanding."""
    out = subprocess.run([sys.executable, "-c", IDLE_SCRIPT], env=python_env(tmp_path, **{REFUSE: "1"}),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["marks"]["words"] == "pinned" and result["marks"]["mirror"] == "running"
    # 0.3 s at one wakeup per millisecond is ~300; a loaded machine still makes dozens.
    assert result["busy"] >= 20, result
    # asleep: at most a wakeup that was already under way when the window opened
    assert result["idle"] <= 1 and result["after"] <= 1, result


def test_the_file_is_written_where_the_device_can_write_it(tmp_path):
    """Without refusal the emulated device writes the file's own words: no pinned words, no mirror."""
    out = subprocess.run([sys.executable, "-c", RUN_OPS + "print(json.dumps(_C.flight_marks()), flush=True)"],
                         env=python_env(tmp_path, **{REFUSE: "0"}), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    marks = json.loads(out.stdout.splitlines()[-1])
    assert marks == {"words": "file", "mirror": "off", "mirror_wakeups": 0}


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_mirrored_completions_survive_a_killed_process(tmp_path):
    """The process is killed (no flush, no exit) a little after its last op: the file says
    every op completed, because the mirror copied the pinned words in time."""
    script = RUN_OPS + "print(faults.record_path(), flush=True)\ntime.sleep(600)\n"
    proc = subprocess.Popen([sys.executable, "-c", script], env=python_env(tmp_path, **{REFUSE: "1"}),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with sigkilled(proc):
        path = proc.stdout.readline().strip()
        assert path, proc.communicate()[1]
        time.sleep(0.2)  # 200 mirror periods
    assert proc.returncode == -signal.SIGKILL
    analysis = flight.load(path)
    assert analysis["process"]["pid"] == proc.pid
    assert [(r["op"], r["state"]) for r in analysis["records"]] == [
        ("stage", "completed"), ("quantize_int8_rowwise", "completed"), ("dequantize_int8_simple", "completed")]
    assert analysis["first_incomplete"] is None


def test_a_device_reset_abandons_pinned_records():
    """Work that never completes is marked failed at the reset (inject's exit), and stays so
    in the file: a stale pinned word cannot complete it."""
    with emulated_device(), host_mapping_refused():
        with inject("hang", op="quantize_int8_rowwise"):
            ops.quantize_int8_rowwise(torch.randn(2, 32))
            seq = newest_seq(faults.record_path())
            assert file_slot(faults.record_path(), seq)[1] != seq
    _, done, state = file_slot(faults.record_path(), seq)
    assert done != seq and state == flight.FAILED
