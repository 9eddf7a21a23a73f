# SPDX-License-Identifier: Apache-2.0
"""The flight record (csrc/diag/flight.c, read by comfy_kitchen_c/flight.py): what a
record holds, the states, wrap-around of the ring, the file surviving a killed
process, pruning, and parsing a file written elsewhere."""
import json
import os
import platform
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import comfy_kitchen_c as ckc
from comfy_kitchen_c import faults, flight, ops
from conftest import sigkilled

if sys.platform == "win32":
    pytest.skip("the emulated device is not built on Windows yet", allow_module_level=True)
from comfy_kitchen_c.testing import emulated_device, inject

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module", autouse=True)
def ring_is_open():
    """The ring opens at the first GPU op of the process: make sure there was one."""
    with emulated_device():
        ops.quantize_int8_rowwise(torch.randn(1, 16))


def records():
    return flight.load(faults.record_path())["records"]


def test_header_names_the_process():
    with emulated_device():
        ops.quantize_int8_rowwise(torch.randn(1, 16))
    analysis = flight.load(faults.record_path())
    p = analysis["process"]
    assert p["pid"] == os.getpid() and p["python"] == platform.python_version()
    assert p["package_version"] == ckc.__version__ and p["host"] == platform.node()[:63]
    assert abs(p["started_unix"] - time.time()) < 3600
    assert analysis["format_version"] == 3 and analysis["capacity"] == 4096
    assert os.path.dirname(faults.record_path()) == flight.default_dir()
    assert faults.record_path() in flight.record_files()


def test_an_op_record():
    x = torch.randn(6, 1024, dtype=torch.bfloat16)
    before = time.time()
    with emulated_device():
        ops.quantize_and_rotate_rowwise(x, None, 256)
    r = records()[-1]
    assert r["kind"] == "op" and r["op"] == "quantize_and_rotate_rowwise" and r["state"] == "completed"
    assert r["tensors"] == "x bfloat16[6, 1024]; q int8[6, 1024]; scale float32[6, 1]"
    # the row-tile kernel (kernels/int8_tile.cu): 32 threads a row of 1024, the 6 rows in one block
    assert r["params"] == "group=256 tile_rows grid=(1,1,1) block=(32,6,1)"
    assert r["device"] == 0 and r["stream"] == 0 and r["error"] == "" and r["host_memory"] == ""
    assert r["device_kind"] == "emulated"  # format 2: the emulated device marks its records
    assert before <= r["queued_unix"] <= time.time()
    assert r["seq"] == flight.load(faults.record_path())["written"]


def test_several_launches_are_counted():
    with emulated_device():
        ops.quantize_int8_tensorwise(torch.randn(4, 64))  # absmax, scale, quantize kernels
    assert records()[-1]["params"].startswith("compute_scale=1 +2 more, tensor_quantize grid=")


def test_cpu_ops_are_not_recorded():
    with emulated_device():
        ops.quantize_int8_rowwise(torch.randn(1, 16))
    written = flight.load(faults.record_path())["written"]
    ops.quantize_int8_rowwise(torch.randn(1, 16))  # the CPU path: no GPU work to record
    assert flight.load(faults.record_path())["written"] == written


def test_bad_arguments_leave_no_record():
    """The newest sequence number, not the record count: once the ring is full (another test may
    have filled it) the count stays at its capacity whatever is written."""
    with emulated_device():
        ops.quantize_int8_rowwise(torch.randn(1, 16))
        newest = flight.load(faults.record_path())["written"]
        with pytest.raises(ckc.ArgumentError):
            ckc.ops._run("quantize_int8_rowwise", "quantize_int8_rowwise", torch.device("cpu"),
                         (torch.randn(2, 16), torch.empty(3, 16, dtype=torch.int8), torch.empty(2), None), (0,))
    assert flight.load(faults.record_path())["written"] == newest


def test_ring_wraps_around():
    """Staged copies (no kernel to emulate) fill the ring faster than ops."""
    src, dst = torch.randn(4), torch.empty(4)
    with emulated_device():
        for _ in range(flight.load(faults.record_path())["capacity"] + 10):
            ckc.stage(dst, src)
    analysis = flight.load(faults.record_path())
    seqs = [r["seq"] for r in analysis["records"]]
    assert len(seqs) == analysis["capacity"]
    assert seqs == list(range(analysis["written"] - analysis["capacity"] + 1, analysis["written"] + 1))
    assert all(r["state"] == "completed" for r in analysis["records"])
    assert analysis["last_completed"]["seq"] == analysis["written"] and analysis["first_incomplete"] is None


def write_record_file(path: Path, slots):
    """A flight-record file as another computer would write it (the documented format 1, which
    format 2's reader still reads: its replay words were reserved bytes, zero)."""
    header = flight.HEADER.pack(b"CKCFLIGHT", 1, 256, 512, len(slots), 4242, 1.7e9, 7, b"far-away-box",
                                b"3.12.1", b"0.1.0", 0, 0, 0, 0)
    body = b""
    for seq, done, state in slots:
        body += flight.RECORD_V1.pack(seq, done, 1, state, 0, 0, 0x55, 1.7e9 + seq, 0.0, 0, 0, 0, 0,
                                      f"op{seq}".encode(), b"x float16[2, 2]", b"", b"" if state != 3 else b"hang")
    path.write_bytes(header + body)


def test_parse_a_record_from_another_computer(tmp_path):
    # slot order is not seq order after wrap-around; a stale completion (done of an
    # older record in the slot) must not count; an empty slot is skipped
    path = tmp_path / "flight-0000000000001-4242.ckcf"
    write_record_file(path, [(5, 5, 0), (6, 2, 0), (7, 0, 3), (0, 0, 0), (4, 4, 0)])
    a = flight.load(str(path))
    assert a["process"] == {"pid": 4242, "started_unix": 1.7e9, "host": "far-away-box", "python": "3.12.1",
                            "package_version": "0.1.0"}
    assert [(r["seq"], r["state"]) for r in a["records"]] == [(4, "completed"), (5, "completed"), (6, "queued"),
                                                              (7, "hang_suspected")]
    assert a["last_completed"]["op"] == "op5" and a["first_incomplete"]["op"] == "op6"
    assert [r["op"] for r in a["hangs"]] == ["op7"] and a["faults"] == [] and a["written"] == 7
    assert a["records"][0]["stream"] == 0x55 and a["records"][0]["tensors"] == "x float16[2, 2]"
    assert flight.newest_record(str(tmp_path)) == str(path)
    bad = tmp_path / "flight-0000000000002-1.ckcf"
    bad.write_bytes(b"not a record")
    with pytest.raises(ValueError, match="not a comfy_kitchen_c flight record"):
        flight.load(str(bad))


def test_default_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("COMFY_KITCHEN_C_FLIGHT_DIR", str(tmp_path))
    assert flight.default_dir() == str(tmp_path)
    monkeypatch.delenv("COMFY_KITCHEN_C_FLIGHT_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    if sys.platform != "win32":
        assert flight.default_dir() == str(tmp_path / "cache" / "comfy_kitchen_c" / "flight")
    assert flight.newest_record(str(tmp_path / "nowhere")) is None


def python_env(record_dir, **extra):
    env = {**os.environ, "COMFY_KITCHEN_C_FLIGHT_DIR": str(record_dir), **extra}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


RUN_ONE_OP = ("import sys, torch; from comfy_kitchen_c import ops, faults, flight\n"
              "from comfy_kitchen_c.testing import emulated_device\n"
              "print(len(flight.record_files(sys.argv[1])))\n"
              "with emulated_device(): ops.quantize_int8_rowwise(torch.randn(2, 32))\n"
              "print(faults.record_path())")


def run_one_op(record_dir, **env):
    out = subprocess.run([sys.executable, "-c", RUN_ONE_OP, str(record_dir)], env=python_env(record_dir, **env),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    files_after_import, path = out.stdout.split()
    return int(files_after_import), path


GONE = 999_999_999  # a pid no process has (above every OS's limit): its records are a dead process's


def test_old_records_are_pruned_when_a_record_is_created_and_imports_touch_nothing(tmp_path):
    for k in range(20):
        (tmp_path / f"flight-{k:013d}-{GONE}.ckcf").write_bytes(b"old")
    (tmp_path / "flight-notes.txt").write_bytes(b"not a record")
    files_after_import, path = run_one_op(tmp_path)
    assert files_after_import == 20  # the import neither pruned nor created anything
    files = flight.record_files(str(tmp_path))
    assert len(files) == faults.KEEP_RECORDS and files[-1] == path  # the newest old ones, and this one
    assert files[0].endswith(f"flight-{20 - faults.KEEP_RECORDS + 1:013d}-{GONE}.ckcf")
    assert (tmp_path / "flight-notes.txt").exists()


def test_a_running_process_record_is_never_pruned(tmp_path):
    """The oldest record of all belongs to a process that still runs (this one): it stays, however
    many newer records there are, and the others are pruned as before."""
    running = tmp_path / f"flight-{0:013d}-{os.getpid()}.ckcf"
    running.write_bytes(b"live")
    for k in range(1, 21):
        (tmp_path / f"flight-{k:013d}-{GONE}.ckcf").write_bytes(b"old")
    _, path = run_one_op(tmp_path)
    files = flight.record_files(str(tmp_path))
    assert running.exists()
    assert len([f for f in files if f.endswith(f"-{GONE}.ckcf")]) == faults.KEEP_RECORDS - 1 and files[-1] == path


def test_flight_record_off(tmp_path):
    _, path = run_one_op(tmp_path, COMFY_KITCHEN_C_FLIGHT="0")
    assert path == "None" and os.listdir(tmp_path) == []


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("refuse", ["0", "1"], ids=["file-words", "pinned-words"])
def test_record_survives_a_killed_process(tmp_path, refuse):
    """tests/fault_scenario.py hangs in dequantize_int8_simple (boundary mode); once the
    watchdog has flushed the hang record the process is killed; the file tells what
    happened.  Both ways the device writes completions: into the file's words, and (as
    when the OS refuses to pin the file) into pinned words mirrored into the file."""
    env = python_env(tmp_path, COMFY_KITCHEN_C_EMU_REFUSE_HOST_MAPPING=refuse)
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fault_scenario.py"), str(tmp_path)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with sigkilled(proc):
        deadline = time.monotonic() + 60
        analysis = None
        while time.monotonic() < deadline and proc.poll() is None:
            newest = flight.newest_record(str(tmp_path))
            if newest is not None:
                try:
                    analysis = flight.load(newest)
                except ValueError:  # created, its header not written yet
                    analysis = None
                if analysis is not None and analysis["hangs"]:
                    break
            time.sleep(0.05)
        assert proc.poll() is None, f"the scenario ended early:\n{proc.communicate()[1]}"
    assert proc.returncode == -signal.SIGKILL
    analysis = flight.load(flight.newest_record(str(tmp_path)))
    assert analysis["process"]["pid"] == proc.pid
    assert [r["op"] for r in analysis["hangs"]] == ["dequantize_int8_simple"]
    assert analysis["first_incomplete"]["op"] == "dequantize_int8_simple"
    assert analysis["last_completed"]["op"] == "quantize_and_rotate_rowwise"
    assert [r["op"] for r in analysis["records"]] == ["stage", "quantize_int8_rowwise",
                                                      "quantize_and_rotate_rowwise", "dequantize_int8_simple"]
    assert analysis["records"][0]["kind"] == "copy" and analysis["records"][0]["host_memory"] == "pageable"
    assert "watchdog at the fence before quantize_int8_rowwise" in analysis["hangs"][0]["error"]

    # What a user runs afterwards: the doctor finds the newest record and names both ops.
    doctor = subprocess.run([sys.executable, "-m", "comfy_kitchen_c", "doctor", "--json"],
                            env=env, capture_output=True, text=True, timeout=120)
    assert doctor.returncode == 0, doctor.stderr
    report = json.loads(doctor.stdout)["flight"]
    assert report["status"] == "ok" and report["path"] == flight.newest_record(str(tmp_path))
    assert report["record"]["first_incomplete"]["op"] == "dequantize_int8_simple"
    assert report["record"]["last_completed"]["op"] == "quantize_and_rotate_rowwise"
    verdict = " ".join(report["verdict"])
    assert "dequantize_int8_simple" in verdict and "quantize_and_rotate_rowwise" in verdict


def test_records_from_several_threads():
    import threading
    before = flight.load(faults.record_path())["written"]
    x = torch.randn(1, 16)

    def work():
        with emulated_device():
            for _ in range(50):
                ops.quantize_int8_rowwise(x)
                ckc.stage(torch.empty(16), x.reshape(16))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    new = [r for r in records() if r["seq"] > before]
    assert len(new) == 300 and len({r["seq"] for r in new}) == 300
    assert all(r["state"] == "completed" for r in new)
    assert sorted(r["op"] for r in new) == ["quantize_int8_rowwise"] * 150 + ["stage"] * 150


def test_format_1_records_still_read_as_gpu_records(tmp_path):
    """A record written before format 2 (no device-kind bit) reads as a GPU's."""
    header = flight.HEADER.pack(flight.MAGIC.ljust(16, b"\0"), 1, flight.HEADER.size, flight.RECORD.size, 1, 42,
                                1.0, 1, b"host", b"3.11", b"0.1.0", 0, 0, 0, 0)
    record = flight.RECORD_V1.pack(1, 1, 2, 0, 0, 1, 0, 2.0, 3.0, 8, 0x1000, 8, 0x2000, b"stage", b"src -> dst", b"",
                                   b"")
    path = tmp_path / "flight-old.ckcf"
    path.write_bytes(header + record)
    r = flight.load(str(path))["records"][0]
    assert r["device_kind"] == "cuda" and r["host_memory"] == "pinned" and r["state"] == "completed"
