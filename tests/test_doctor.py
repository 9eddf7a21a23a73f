# SPDX-License-Identifier: Apache-2.0
"""``python -m comfy_kitchen_c doctor``: the command runs anywhere (no GPU, no record), the
RAM-derived ComfyUI settings follow ComfyUI's formulas, the backend table agrees with
comfy_kitchen's registry, and the flight-record analysis names the right records.

The analysis is tested on records shaped exactly like ``flight.load``'s result
(comfy_kitchen_c/flight.py), through a stand-in ``comfy_kitchen_c.flight``."""
import argparse
import json
import os
import subprocess
import sys
import types

import pytest
import torch

import comfy_kitchen_c
from comfy_kitchen_c import comfyui, doctor, doctor_comfyui
from conftest import saved_priority

GIB = 1 << 30
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_doctor(*args, flight_dir, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMFY_KITCHEN_C_")}
    env.update(COMFY_KITCHEN_C_FLIGHT_DIR=str(flight_dir), **extra)
    return subprocess.run([sys.executable, "-m", "comfy_kitchen_c", "doctor", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


def no_record_line(flight_dir) -> str:
    """What doctor says with an empty flight folder."""
    return f"no flight record found in {flight_dir}"


# ---- the command ------------------------------------------------------------------------------

def test_text_report_without_a_record(tmp_path):
    result = run_doctor(flight_dir=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for heading in ("== Environment ==", "== Backends ==", "== Flight record =="):
        assert heading in out
    for label in ("OS", "Python", "torch", "comfy-kitchen-c", "CUDA driver", "CUDA runtime", "CPU ISA", "RAM",
                  "Variables", "Settings:",
                  "cache_ram", "cache_ram_inactive", "MAX_PINNED_MEMORY", "EXTRA_RESERVED_VRAM"):
        assert f"\n  {label} " in out, label
    assert no_record_line(tmp_path) in out
    assert comfy_kitchen_c._C.cpu_isa() in out


def test_json_report_without_a_record(tmp_path):
    result = run_doctor("--json", flight_dir=tmp_path)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == {"doctor_version", "environment", "comfyui_settings", "comfyui", "recommendations",
                        "backends", "flight", "gemm", "cpu", "problems", "verdict", "pinned_memory"}
    assert doc["problems"] == [] and doc["verdict"] == "Nothing doctor checks is wrong here."
    env = doc["environment"]
    assert set(env) == {"os", "python", "torch", "comfy_kitchen", "comfy_kitchen_c", "cuda", "kernels", "gpus",
                        "gpu_error", "cpu_isa", "ram", "variables", "settings", "unknown_settings"}
    assert set(env["settings"]) == set(comfy_kitchen_c.settings.SETTINGS)
    assert env["settings"]["COMFY_KITCHEN_C_FLIGHT_DIR"] == {"value": str(tmp_path), "source": "environment",
                                                             "error": None}
    assert set(doc["comfyui"]["memory"]["values"]) == {"cache_ram", "cache_ram_inactive", "max_pinned_memory",
                                                       "extra_reserved_vram"}
    assert doc["recommendations"] and all(isinstance(line, str) for line in doc["recommendations"])
    assert env["variables"]["COMFY_KITCHEN_C_FLIGHT_DIR"] == str(tmp_path)
    assert set(env["cuda"]) == {"driver", "nvidia_driver", "runtime_torch", "runtime_extension",
                                "extension_has_cuda", "error", "driver_problem"}
    if env["cuda"]["extension_has_cuda"]:
        assert env["cuda"]["runtime_extension"] is not None
        # the reason the kernels cannot run exactly when no usable driver answered
        assert (env["cuda"]["driver_problem"] is None) == (env["cuda"]["driver"] is not None)
    assert env["torch"]["version"] == torch.__version__
    assert env["comfy_kitchen_c"]["version"] == comfy_kitchen_c.__version__
    assert env["cpu_isa"]["in_use"] == comfy_kitchen_c._C.cpu_isa()
    if not torch.cuda.is_available():
        assert env["gpus"] == []
    settings = doc["comfyui_settings"]
    assert settings == json.loads(json.dumps(
        doctor.comfyui_settings(env["ram"]["total"], sys.platform == "win32", comfyui.swap_for_pins())))
    assert set(doc["backends"]) == {"installed", "error", "priority", "in_priority", "c_registered", "c_active",
                                    "backends", "ops"}
    flight = doc["flight"]
    assert set(flight) == {"status", "directory", "path", "message", "owner", "summary", "verdict", "others",
                           "record"}
    assert flight["status"] == "none" and flight["record"] is None
    assert no_record_line(tmp_path) in flight["message"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="cross-checks /proc/meminfo with sysconf")
def test_total_ram_is_the_physical_memory():
    ram = doctor.total_ram()
    assert ram["source"] == "/proc/meminfo"
    assert ram["total"] == os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_windows_report_uses_the_windows_ram_and_formula(monkeypatch, tmp_path):
    """The reporter's machine: Windows 11 build 26200, 64 GiB visible."""
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(sys, "getwindowsversion", lambda: types.SimpleNamespace(build=26200), raising=False)
    monkeypatch.setattr(doctor, "_windows_memory", lambda: (64 * GIB, 16 * GIB))
    monkeypatch.setattr(doctor, "flight_report", lambda path=None: {"status": "none"})
    doc = doctor.report()
    assert doc["environment"]["ram"] == {"total": 64 * GIB, "swap": 16 * GIB, "source": "GlobalMemoryStatusEx"}
    assert doc["environment"]["os"]["windows_build"] == 26200
    assert "TDR" in doc["environment"]["os"]["note"]
    s = doc["comfyui_settings"]
    assert s["windows"] is True
    assert (s["cache_ram_gib"], s["cache_ram_inactive_gib"]) == pytest.approx((6.4, 64))
    assert s["max_pinned_memory_gib"] == pytest.approx(25.6)  # swap plays no part on Windows


# ---- RAM-derived settings: root-cause-notes §2 table ------------------------------------------

@pytest.mark.parametrize("ram_gib, cache_ram, inactive, pinned", [(32, 3.2, 32, 12.8), (64, 6.4, 64, 25.6)])
def test_settings_at_32_and_64_gib_on_windows(ram_gib, cache_ram, inactive, pinned):
    s = doctor.comfyui_settings(ram_gib * GIB, windows=True)
    assert s["cache_ram_gib"] == pytest.approx(cache_ram)
    assert s["cache_ram_inactive_gib"] == pytest.approx(inactive)
    assert s["max_pinned_memory_gib"] == pytest.approx(pinned)


@pytest.mark.parametrize("ram_gib, swap_gib, pinned", [
    (32, 0, 16.0),    # RAM + swap - 16 GiB is the smallest of the three, above 0.40 * RAM
    (64, 0, 48.0),
    (64, 16, 57.6),   # swap lifts the last term: 0.90 * RAM is the smallest
    (16, 0, 6.4),     # RAM - 16 GiB is 0: the 0.40 * RAM floor
])
def test_max_pinned_elsewhere(ram_gib, swap_gib, pinned):
    s = doctor.comfyui_settings(ram_gib * GIB, windows=False, swap=swap_gib * GIB)
    assert s["max_pinned_memory_gib"] == pytest.approx(pinned)


@pytest.mark.parametrize("ram_gib, cache_ram, inactive", [(8, 2.0, 8), (256, 10.0, 128)])
def test_settings_clamp(ram_gib, cache_ram, inactive):
    s = doctor.comfyui_settings(ram_gib * GIB, windows=True)
    assert s["cache_ram_gib"] == pytest.approx(cache_ram)
    assert s["cache_ram_inactive_gib"] == pytest.approx(inactive)


# ---- backend table ----------------------------------------------------------------------------

@pytest.fixture
def registry():
    reg = pytest.importorskip("comfy_kitchen.registry").registry
    with saved_priority(reg):
        yield reg


@pytest.mark.parametrize("activate", [False, True])
def test_cpu_pick_agrees_with_the_registry(registry, activate):
    if activate:
        comfy_kitchen_c.activate()
    else:  # comfy_kitchen's own order, whatever earlier tests did
        comfy_kitchen_c.deactivate()
    table = doctor.backend_table()
    assert table["installed"] and table["c_registered"]
    assert table["c_active"] is activate
    rows = {r["op"]: r for r in table["ops"]}
    assert set(rows) == set(comfy_kitchen_c.backend.capabilities())
    x = torch.randn(8, 64)
    assert rows["quantize_int8_rowwise"]["cpu"] == registry.get_capable_backend("quantize_int8_rowwise", {"x": x})
    assert rows["quantize_int8_rowwise"]["cpu"] == ("c" if activate else "eager")


def test_cuda_pick_follows_device_constraints(registry):
    comfy_kitchen_c.activate()
    rows = {r["op"]: r for r in doctor.backend_table()["ops"]}
    expected = "c" if comfy_kitchen_c._C.HAS_CUDA else next(
        name for name in registry._priority if name != "c" and registry.is_available(name)
        and "quantize_int8_rowwise" in registry.list_backends()[name]["capabilities"]
        and doctor._tensor_devices(registry.get_constraints(name, "quantize_int8_rowwise"), "cuda"))
    assert rows["quantize_int8_rowwise"]["cuda"] == expected


def test_disabled_c_is_registered_not_active(registry, capsys):
    comfy_kitchen_c.activate()
    registry.disable("c")
    try:
        table = doctor.backend_table()
        doctor.print_backends(table, sys.stdout)
    finally:
        registry.enable("c")
    assert table["c_registered"] and not table["c_active"]
    assert all(row["cpu"] != "c" for row in table["ops"])
    assert "but disabled: comfy_kitchen skips it" in capsys.readouterr().out


def test_a_failing_driver_query_is_reported(monkeypatch):
    def cuda_versions():
        raise RuntimeError("cuda_versions: cudaDriverGetVersion(driver) failed: cudaErrorUnknown: unknown error")

    monkeypatch.setattr(doctor, "_C", types.SimpleNamespace(cuda_versions=cuda_versions, HAS_CUDA=1))
    info = doctor._cuda_info()
    assert info["driver"] is None and info["runtime_extension"] is None
    assert "cudaErrorUnknown" in info["error"]


def test_without_comfy_kitchen(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "comfy_kitchen.registry", None)
    table = doctor.backend_table()
    assert table["installed"] is False and table["ops"] == []
    doctor.print_backends(table, sys.stdout)
    assert "comfy_kitchen is not installed" in capsys.readouterr().out


# ---- flight-record analysis -------------------------------------------------------------------

T0 = 1_790_000_000.0


def rec(seq, op, state, kind="op", error="", stream=0x7F00, **kw):
    """One record exactly as flight.load returns it."""
    r = {"seq": seq, "kind": kind, "op": op, "state": state, "device": 0, "stream": stream,
         "queued_unix": T0 + seq, "completed_unix": T0 + seq + 0.002 if state == "completed" else None,
         "tensors": "", "params": "", "bytes": 0, "host_ptr": 0, "host_bytes": 0, "device_ptr": 0,
         "host_memory": "", "error": error}
    r.update(kw)
    return r


def loaded(records, path="/records/ckc-4242.flight"):
    """flight.load's dict for these records, with its analysis fields filled as documented."""
    completed = [r for r in records if r["state"] == "completed"]
    last = max(completed, key=lambda r: r["seq"]) if completed else None
    pending = [r for r in records if r["state"] in ("queued", "hang_suspected")]
    return {
        "path": path, "format_version": 1,
        "process": {"pid": 4242, "started_unix": T0, "host": "gpu-box", "python": "3.12.7",
                    "package_version": "0.1.0"},
        "capacity": 4096, "written": records[-1]["seq"] if records else 0,
        "records": records,
        "last_completed": last,
        "first_incomplete": min(pending, key=lambda r: r["seq"]) if pending else None,
        "faults": [r for r in records if r["state"] == "failed"],
        "hangs": [r for r in records if r["state"] == "hang_suspected"],
    }


def hang_records():
    return [
        rec(1, "stage", "completed", kind="copy", bytes=4, host_ptr=0x7F10_0000, host_bytes=4,
            device_ptr=0xB000_0000, host_memory="pinned", tensors="dst float32[]; src float32[]"),
        rec(2, "quantize_and_rotate_rowwise", "completed", tensors="x bfloat16[4096, 3072]",
            params="group_size=256 grid=(4096,1,1) block=(256,1,1)"),
        rec(3, "int8_linear", "hang_suspected", tensors="x int8[4096, 3072]; w int8[12288, 3072]",
            params="algo=cublasLt#3 grid=(96,32,1)", error="still running after 1500 ms"),
        rec(4, "dequantize_int8_simple", "queued", tensors="q int8[4096, 12288]"),
    ]


@pytest.fixture
def fake_flight(monkeypatch, tmp_path):
    """Installs a stand-in comfy_kitchen_c.flight serving the records put in state["records"]."""
    state = {"records": None, "loaded": [], "dir": str(tmp_path)}

    def load(path):
        state["loaded"].append(path)
        if state["records"] is None:
            raise ValueError("not a flight record")
        return loaded(state["records"], path)

    def record_files(directory=None):
        return [str(tmp_path / "flight-1-4242.ckcf")] if state["records"] is not None else []

    module = types.SimpleNamespace(
        default_dir=lambda: str(tmp_path), record_files=record_files, record_pid=lambda path: 4242,
        owner=lambda process, path: "ended", header=lambda path: loaded([])["process"], load=load,
        cache_root=lambda: str(tmp_path / "cache"))
    monkeypatch.setitem(sys.modules, "comfy_kitchen_c.flight", module)
    monkeypatch.setattr(comfy_kitchen_c, "flight", module, raising=False)
    return state


def run_main(capsys, *argv):
    parser = argparse.ArgumentParser()
    doctor.add_arguments(parser)
    status = doctor.main(parser.parse_args(list(argv)))
    return status, capsys.readouterr().out


def test_verdict_names_last_completed_first_incomplete_and_the_hang():
    sentences = doctor.verdict(loaded(hang_records()))
    assert sentences[0] == ("The GPU stopped completing work at seq 3 (op int8_linear); it had completed "
                            "seq 2 (op quantize_and_rotate_rowwise).")
    assert sentences[1].startswith("A hang record was written for seq 3 (op int8_linear, queued ")
    assert sentences[1].endswith(": still running after 1500 ms.")
    assert len(sentences) == 2


def test_verdict_for_a_fault_and_for_a_clean_record():
    records = [rec(1, "quantize_nvfp4", "completed"),
               rec(2, "dequantize_nvfp4", "failed", error="cudaErrorIllegalAddress: an illegal memory access "
                                                          "was encountered")]
    fault = doctor.verdict(loaded(records))
    assert fault == ["Seq 2 (op dequantize_nvfp4) failed: cudaErrorIllegalAddress: an illegal memory access "
                     "was encountered.",
                     "The GPU completed all other recorded work, up to seq 1 (op quantize_nvfp4)."]
    assert doctor.summary(loaded(records)) == "The GPU failed at seq 2 (op dequantize_nvfp4)."
    clean = doctor.verdict(loaded(records[:1]))
    assert clean == ["The GPU completed all recorded work, up to seq 1 (op quantize_nvfp4).",
                     "No fault or hang was recorded."]


def test_verdict_when_the_process_died_with_work_queued():
    records = [rec(1, "stage", "completed", kind="copy", bytes=6291456, host_memory="pageable"),
               rec(2, "quantize_int8_rowwise", "queued")]
    assert doctor.verdict(loaded(records)) == [
        "The GPU stopped completing work at seq 2 (op quantize_int8_rowwise); it had completed seq 1 "
        "(stage: copy of 6291456 bytes from pageable host memory).",
        "No fault or hang was recorded: the process ended (or the device was lost) while seq 2 was queued "
        "or running."]


def test_verdict_when_another_stream_completed_later():
    records = [rec(1, "quantize_int8_rowwise", "queued", stream=0x10), rec(2, "stage", "completed",
                                                                         kind="copy", stream=0x20, bytes=8)]
    first = doctor.verdict(loaded(records))[0]
    assert first.startswith("The GPU stopped completing work at seq 1 (op quantize_int8_rowwise); "
                            "work on other streams completed later, up to seq 2")


def test_text_analysis_of_the_newest_record(fake_flight, capsys):
    fake_flight["records"] = hang_records()
    status, out = run_main(capsys)
    assert status == 0
    flight = out[out.index("== Flight record =="):]
    assert f"flight record {fake_flight['dir']}/flight-1-4242.ckcf, of process 4242 on gpu-box (ended) - not this " \
           "doctor process's: the newest record in the folder" in flight
    assert "process 4242 on gpu-box" in flight
    assert "Verdict: The GPU was suspected of a hang at seq 3 (op int8_linear).\n" in flight
    assert "The GPU stopped completing work at seq 3 (op int8_linear); it had completed seq 2" in flight
    last_completed = flight[flight.index("Last completed:"):flight.index("First not completed:")]
    assert "seq 2 op quantize_and_rotate_rowwise: completed" in last_completed
    assert "params: group_size=256 grid=(4096,1,1) block=(256,1,1)" in last_completed
    first = flight[flight.index("First not completed:"):flight.index("Faults:")]
    assert "seq 3 op int8_linear: hang_suspected" in first
    assert "tensors: x int8[4096, 3072]; w int8[12288, 3072]" in first
    assert "params: algo=cublasLt#3 grid=(96,32,1)" in first
    assert "error: still running after 1500 ms" in first
    assert "stream 0x7f00" in first and "not completed" in first
    assert "Faults: none" in flight
    hangs = flight[flight.index("Hangs:"):flight.index("Last 4 records")]
    assert "seq 3 op int8_linear: see above" in hangs
    start = flight.index("Last 4 records")
    table = flight[start:flight.index("\n== ", start)].strip().splitlines()[1:]  # up to the next part
    assert [line.split()[0] for line in table] == ["seq", "1", "2", "3", "4"]
    assert table[1].split()[3:7] == ["(pinned)", "completed", "cuda:0", "0x7f00"]  # host memory of the copy
    assert table[3].split()[6] == "3.000"  # queued 3 s after the process started


def test_copy_details_name_host_and_device_ranges():
    lines = doctor.details(hang_records()[0])
    assert lines[0] == "seq 1 stage: copy of 4 bytes from pinned host memory: completed"
    assert "  host 0x7f100000 (4 bytes, pinned) -> device 0xb0000000" in lines


def test_completion_without_a_time_is_still_completion():
    done = rec(2, "quantize_int8_rowwise", "completed", completed_unix=None)
    assert "queued 2026-09-21 14:13:22.000 UTC, completed (time not recorded)" in "\n".join(doctor.details(done))
    pending = rec(3, "quantize_int8_rowwise", "queued")
    assert doctor.details(pending)[2].endswith(", not completed")


def test_json_analysis_of_a_record_from_another_computer(fake_flight, capsys):
    fake_flight["records"] = hang_records()
    status, out = run_main(capsys, "--json", "--record", "/copied/ckc-4242.flight")
    assert status == 0
    assert fake_flight["loaded"] == ["/copied/ckc-4242.flight"]
    flight = json.loads(out)["flight"]
    assert flight["status"] == "ok" and flight["path"] == "/copied/ckc-4242.flight"
    assert flight["record"]["first_incomplete"]["op"] == "int8_linear"
    assert flight["record"]["last_completed"]["op"] == "quantize_and_rotate_rowwise"
    assert flight["verdict"] == doctor.verdict(loaded(hang_records(), "/copied/ckc-4242.flight"))


def test_unreadable_record_fails_with_a_message(fake_flight, capsys):
    status, out = run_main(capsys, "--record", "/copied/garbage.bin")
    assert status == 1
    assert "cannot read flight record /copied/garbage.bin: not a flight record" in out


def test_no_record_in_the_flight_folder(fake_flight, capsys, tmp_path):
    status, out = run_main(capsys)
    assert status == 0
    assert f"no flight record found in {tmp_path}" in out


# ---- ComfyUI: sources, switches in force, recommendations, the priority sentence --------------

def test_every_derived_value_has_formula_source_and_value_in_force():
    memory = doctor_comfyui.memory_settings(64 * GIB, True, 0, 16 * GIB, None)
    values = memory["values"]
    assert values["max_pinned_memory"]["derived_gib"] == pytest.approx(25.6)
    assert values["cache_ram"]["derived_gib"] == pytest.approx(6.4)
    assert values["extra_reserved_vram"]["derived_gib"] == pytest.approx(700 / 1024)  # Windows, 16 GiB card
    for row in values.values():
        assert row["formula"] and "ComfyUI" in row["source"] and "(derived)" in row["in_force"] \
            or "(default)" in row["in_force"]


def test_switches_in_force_change_the_values_in_force():
    flags = {"cache_ram": [3.2, 32.0], "reserve_vram": 2.0, "disable_pinned_memory": True}
    values = doctor_comfyui.memory_settings(64 * GIB, True, 0, None, flags)["values"]
    assert values["cache_ram"]["in_force"] == "3.2 GiB (--cache-ram)"
    assert values["cache_ram_inactive"]["in_force"] == "32 GiB (--cache-ram)"
    assert values["max_pinned_memory"]["in_force"] == "none: --disable-pinned-memory"
    assert values["extra_reserved_vram"]["in_force"] == "2 GiB (--reserve-vram)"
    classic = doctor_comfyui.memory_settings(64 * GIB, True, 0, None, {"cache_classic": True})["values"]
    assert classic["cache_ram"]["in_force"].startswith("none: --cache-classic")


def test_flags_of_a_running_comfyui_are_parsed_by_its_own_parser(monkeypatch, tmp_path):
    standin = os.path.join(ROOT, "tests", "comfyui_standin")
    monkeypatch.setattr(doctor_comfyui, "_command_lines", lambda: [
        (1, ["bash"], "/"),
        (4242, ["python", "main.py", "--cache-ram", "3.2", "32", "--disable-cuda-graphs", "--listen"], standin)])
    flags = doctor_comfyui.flags_in_force()
    assert flags["source"].startswith("ComfyUI process 4242 (") and flags["error"] is None
    assert flags["flags"] == {"cache_ram": [3.2, 32.0], "disable_cuda_graphs": True}


def test_flags_without_a_running_comfyui(monkeypatch):
    monkeypatch.setattr(doctor_comfyui, "_command_lines", lambda: [(1, ["bash"], "/")])
    assert doctor_comfyui.flags_in_force()["flags"] is None


def test_recommendations_follow_the_machine():
    env = {"os": {"windows_build": 26200}, "variables": {}}
    backends = {"c_active": False, "ops": [{"op": "int8_linear", "cpu": "eager", "cuda": "cuda"}]}
    lines = "\n".join(doctor_comfyui.recommendations(env, backends, 64 * GIB, None))
    for part in ('Put "c" first', "COMFY_KITCHEN_DISABLE_CUTLASS=1", "Sysmem Fallback", "COMFY_KITCHEN_C_RAM_PROFILE=32",
                 "--disable-cuda-graphs"):
        assert part in lines, part
    env = {"os": {"windows_build": None}, "variables": {}}
    backends = {"c_active": True, "ops": [{"op": "int8_linear", "cpu": "c", "cuda": "c"}]}
    lines = "\n".join(doctor_comfyui.recommendations(env, backends, 32 * GIB, {"disable_cuda_graphs": True}))
    for part in ('Put "c" first', "CUTLASS", "Sysmem", "RAM_PROFILE", "--disable-cuda-graphs"):
        assert part not in lines, part


@pytest.mark.parametrize("priority, active, disabled, expected", [
    (["c", "cuda", "eager"], True, False, "at position 1 of 3: the first available backend"),
    (["cuda", "c", "eager"], False, False, "at position 2 of 3, behind cuda: those are tried first"),
    (["cuda", "eager"], False, False, "NOT in the priority list"),
    (["c", "eager"], False, True, "at position 1 of 2, but disabled"),
])
def test_priority_sentence(priority, active, disabled, expected):
    table = {"in_priority": priority, "c_registered": True, "c_active": active,
             "backends": [{"name": "c", "disabled": disabled}]}
    assert expected in doctor.priority_sentence(table)


def test_emulated_device_records_say_so():
    emulated = [rec(1, "stage", "completed", kind="copy", device_kind="emulated"),
                rec(2, "quantize_int8_rowwise", "queued", device_kind="emulated")]
    assert "emulated:0 (the emulated device" in doctor.details(emulated[1])[1]
    assert doctor.verdict(loaded(emulated))[-1].startswith("Every record was written by the emulated device")
    gpu = [rec(1, "stage", "completed", kind="copy")]  # format 1: no device_kind, a GPU
    assert doctor.details(gpu[0])[1].startswith("  device cuda:0")
    assert "emulated" not in " ".join(doctor.verdict(loaded(gpu)))


def test_a_real_record_of_the_emulated_device(tmp_path):
    """Written by the emulated device in a child process: flight.load and doctor say so."""
    code = ("import torch, comfy_kitchen_c as c\nfrom comfy_kitchen_c.testing import emulated_device\n"
            "with emulated_device():\n    c.ops.quantize_int8_rowwise(torch.randn(4, 64))\n")
    env = dict(os.environ, COMFY_KITCHEN_C_FLIGHT_DIR=str(tmp_path))
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=True, timeout=300)
    result = run_doctor("--json", flight_dir=tmp_path)
    flight = json.loads(result.stdout)["flight"]
    assert flight["record"]["format_version"] == 3
    assert {r["device_kind"] for r in flight["record"]["records"]} == {"emulated"}
    assert flight["verdict"][-1].startswith("Every record was written by the emulated device")


# ---- settings it cannot read, whose record, one verdict, no text cut mid-word ------------------

def test_several_bad_settings_are_lines_of_the_report_not_a_traceback(tmp_path):
    """COMFY_KITCHEN_C_CHECK=foo once crashed doctor; now each bad setting is a line, the verdict
    names them in one sentence, and the exit status is 1 because the verdict says so."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    bad = {"COMFY_KITCHEN_C_CHECK": "foo", "COMFY_KITCHEN_C_HANG_MS": "9000", "COMFY_KITCHEN_C_CHEK": "op",
           "COMFY_KITCHEN_C_LINEAR_MEMORY_MB": "lots", "COMFY_KITCHEN_C_ACTIVATE": "maybe"}
    result = run_doctor("--pid", "1", flight_dir=tmp_path, **bad)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    out = result.stdout
    for line in ("Refused: COMFY_KITCHEN_C_CHECK='foo' (environment): expected one of launch, boundary, op; "
                 "the default is used (launch)",
                 "Refused: COMFY_KITCHEN_C_HANG_MS='9000' (environment): expected a whole number of milliseconds "
                 "below COMFY_KITCHEN_C_HANG_RAISE_MS, which is 5000 (default); the default is used (1500)",
                 "Refused: COMFY_KITCHEN_C_LINEAR_MEMORY_MB='lots' (environment)",
                 "Refused: COMFY_KITCHEN_C_ACTIVATE='maybe' (environment)",
                 "Unknown: COMFY_KITCHEN_C_CHEK (environment) is not a setting of comfy-kitchen-c and is ignored; "
                 "did you mean COMFY_KITCHEN_C_CHECK?"):
        assert f"\n  {line}" in out, line
    verdict = out[out.index("== Verdict =="):].splitlines()
    assert verdict[1] == (
        "  6 things are wrong here: COMFY_KITCHEN_C_ACTIVATE is refused (its default is used), "
        "COMFY_KITCHEN_C_CHECK is refused (its default is used), COMFY_KITCHEN_C_LINEAR_MEMORY_MB is refused "
        "(its default is used), COMFY_KITCHEN_C_HANG_MS is refused (its default is used), COMFY_KITCHEN_C_CHEK "
        "is not a setting and the flight record asked for cannot be shown.")
    assert verdict[-1] == f"  - no flight record of process 1 in {tmp_path}" and len(verdict) == 8
    assert "== Backends ==" in out and "CPU ISA" in out  # the rest of the report is there


def test_a_part_doctor_cannot_make_is_a_problem_line(monkeypatch, fake_flight, capsys):
    def broken():
        raise OSError("registry unreadable")
    monkeypatch.setattr(doctor, "backend_table", broken)
    status, out = run_main(capsys)
    assert status == 1
    assert "== Backends ==\n  not available: see the verdict below" in out
    assert out.rstrip().endswith("1 thing is wrong here: doctor could not make its backend table part.\n"
                                 "  - doctor could not make its backend table part: OSError: registry unreadable")


def test_whose_record_this_process_and_an_ended_one(tmp_path):
    """A process asks doctor about itself: its own record is shown as its own; a record of an
    ended process (its own record's copy, with the pid of a child that has exited) is listed as
    another process's, and --pid shows it as that process's."""
    code = """
import json, os, shutil, struct, subprocess, sys, torch, comfy_kitchen_c as c
from comfy_kitchen_c import doctor, faults, flight
from comfy_kitchen_c.testing import emulated_device
with emulated_device():
    c.ops.quantize_int8_rowwise(torch.randn(4, 64))
child = subprocess.Popen([sys.executable, "-c", ""])
child.wait()
other = os.path.join(os.path.dirname(faults.record_path()), f"flight-0000000000001-{child.pid}.ckcf")
shutil.copyfile(faults.record_path(), other)
with open(other, "r+b") as f:
    f.seek(32)  # csrc/diag/flight.h ckc_flight_header: the pid after magic and four uint32
    f.write(struct.pack("<Q", child.pid))
own, theirs = doctor.flight_report(), doctor.flight_report(pid=child.pid)
print(json.dumps([os.getpid(), child.pid, own["owner"], own["message"], own["others"], theirs["owner"],
                  theirs["message"], theirs["summary"]]))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COMFY_KITCHEN_C_")}
    env["COMFY_KITCHEN_C_FLIGHT_DIR"] = str(tmp_path)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    pid, ended, own, own_message, others, other, other_message, other_summary = json.loads(result.stdout)
    assert own["pid"] == pid and own["state"] == "this process"
    assert own_message.endswith(f", of this process ({pid})")
    assert [(o["pid"], o["owner"]) for o in others] == [(ended, "ended")]
    assert other["pid"] == ended and other["state"] == "ended"
    assert f"-{ended}.ckcf, of process {ended} on " in other_message and other_message.endswith(" (ended)")
    assert other_summary == ("The emulated device completed all recorded work, up to seq 1 "
                             "(op quantize_int8_rowwise), with no fault or hang.")


def test_owner_of_a_running_process_and_of_another_computer(tmp_path):
    import socket
    import time
    from comfy_kitchen_c import flight
    path = str(tmp_path / "flight-1-1.ckcf")
    here = {"pid": os.getppid(), "host": socket.gethostname()[:63], "started_unix": time.time()}
    assert flight.owner(here, path) == "running"  # pytest's parent is running
    assert flight.owner(dict(here, started_unix=time.time() - 10 * 365 * 86400), path) == (
        "ended" if sys.platform.startswith("linux") else "running")  # Linux: the pid is another process's now
    assert flight.owner(dict(here, host="gpu-box-elsewhere"), path) == "on another computer (gpu-box-elsewhere)"


def test_record_of_another_process_is_never_shown_as_this_ones(fake_flight, capsys):
    fake_flight["records"] = hang_records()
    status, out = run_main(capsys, "--json")
    flight = json.loads(out)["flight"]
    assert flight["owner"] == {"pid": 4242, "host": "gpu-box", "state": "ended"}
    assert "not this doctor process's" in flight["message"]
    status, out = run_main(capsys, "--json", "--pid", "4242")
    assert status == 0 and "not this doctor process's" not in json.loads(out)["flight"]["message"]


@pytest.mark.parametrize("records, expected", [
    ([rec(1, "a", "completed"), rec(2, "b", "failed", error="boom."), rec(3, "c", "failed")],
     "The GPU failed at seq 2 (op b) (and 1 more failed)."),
    ([rec(1, "a", "completed"), rec(2, "b", "queued")],
     "The GPU stopped at seq 2 (op b) with no fault or hang recorded: the process ended or the device was lost "
     "while it was queued or running."),
    ([rec(1, "a", "completed", device_kind="emulated")],
     "The emulated device completed all recorded work, up to seq 1 (op a), with no fault or hang."),
    ([], "The record holds no work, and no fault or hang."),
])
def test_the_records_verdict_is_one_sentence(records, expected):
    data = loaded(records)
    assert doctor.summary(data) == expected
    assert expected.count(". ") == 0 and expected.endswith(".")
    findings = " ".join(doctor.verdict(data))
    assert ".." not in findings  # an error text ending in a full stop is not given a second one
    if {r.get("device_kind") for r in records} == {"emulated"}:
        assert "GPU completed" not in findings and "GPU stopped" not in findings


def test_a_text_the_writer_cut_ends_at_a_whole_word():
    from comfy_kitchen_c import flight
    field = 104  # csrc/diag/flight.h: char error[104]; the writer keeps 103 bytes and a NUL
    text = ("cudaErrorIllegalAddress: an illegal memory access was encountered while the kernel "
            "quantize_and_rotate_rowwise_weights ran out")
    assert " " not in text[field - 2:field]  # the writer cuts it mid-word
    shown = flight._message(text.encode()[:field - 1] + b"\0")
    assert shown == text[:text.rindex(" ", 0, field - 1)] + "\u2026" and shown.endswith("kernel\u2026")
    assert flight._message(b"short text\0" + b"\0" * (field - 11)) == "short text"
    assert flight._message(("\u00e9" * 60).encode()[:field - 1] + b"\0").endswith("\u2026")  # no half character
    sentence = doctor.verdict(loaded([rec(1, "a", "failed", error=shown)]))[0]
    assert sentence.endswith("kernel\u2026") and not sentence.endswith("\u2026.")


def test_the_verdict_carries_the_records_own_so_nothing_wrong_never_reads_as_a_clean_record():
    from comfy_kitchen_c import doctor as d
    flight = {"summary": "The GPU failed at seq 2 (op dequantize_nvfp4).", "owner": {"pid": 4242}}
    assert d.overall_verdict([], flight) == (
        "Nothing doctor checks is wrong here; the flight record of process 4242 says: "
        "the GPU failed at seq 2 (op dequantize_nvfp4).")
    problem = [{"what": "COMFY_KITCHEN_C_CHEK is not a setting", "detail": "..."}]
    assert d.overall_verdict(problem, flight).startswith("1 thing is wrong here: COMFY_KITCHEN_C_CHEK is not a setting; ")
    assert d.overall_verdict([], None) == "Nothing doctor checks is wrong here."


@pytest.mark.skipif(not comfy_kitchen_c._C.HAS_CUDA, reason="a build without GPU kernels serves no GPU")
def test_doctor_says_which_gpus_and_drivers_the_build_serves():
    """Every architecture the fatbins hold as SASS, and the PTX, with the oldest driver each needs
    (read from the fatbins: _C.kernel_images()), in the report's "GPU kernels" line."""
    images = comfy_kitchen_c._C.kernel_images()
    service = doctor.kernel_service()
    sass = {f"{arch // 10}.{arch % 10}" for _, kind, arch, *_ in images if kind == "sass"}
    assert sass and sass == {a for s in service if s["kind"] == "sass" for a in s["archs"]}
    assert any(s["kind"] == "ptx" for s in service)
    text = doctor._service_text(service)
    for s in service:
        assert f"CUDA {s['driver']}+" in text
    assert all(a in text for a in sass)
