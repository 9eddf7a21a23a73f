# SPDX-License-Identifier: Apache-2.0
"""doctor's pinned host memory report (comfy_kitchen_c/doctor_memory.py): the figures it reads,
the threshold, and that it never raises."""
import argparse
import json
import sys
import types

import pytest

from comfy_kitchen_c import comfyui, doctor, doctor_memory

GIB = 1 << 30
RAM = 64 * GIB


@pytest.fixture
def comfyui_loaded(monkeypatch):
    """A ComfyUI model_management in this process, as when doctor runs inside ComfyUI."""
    module = types.ModuleType("comfy.model_management")
    module.TOTAL_PINNED_MEMORY = 0
    module.MAX_PINNED_MEMORY = 0.40 * RAM
    monkeypatch.setitem(sys.modules, "comfy.model_management", module)
    return module


def test_past_a_quarter_of_ram_pinned_on_windows_is_a_warning(comfyui_loaded):
    comfyui_loaded.TOTAL_PINNED_MEMORY = 20 * GIB
    doc = doctor_memory.pinned_memory(RAM, windows=True)
    assert doc["sources"]["comfyui_total"] == 20 * GIB and doc["pinned"] == 20 * GIB
    assert doc["pinned_share"] == pytest.approx(20 / 64) and doc["warn_share"] == 0.25
    assert doc["warning"].startswith("this process has 20.0 GiB of host memory pinned, 31% of 64.0 GiB")
    assert "past 25%" in doc["warning"]


def test_comfyuis_40_percent_cap_is_warned_about_and_a_32_gib_profile_is_not(comfyui_loaded):
    comfyui_loaded.TOTAL_PINNED_MEMORY = 2 * GIB
    doc = doctor_memory.pinned_memory(RAM, windows=True)
    assert doc["cap"] == int(0.40 * RAM) and doc["cap_source"].startswith("MAX_PINNED_MEMORY in force")
    assert "ComfyUI may pin up to 25.6 GiB, 40% of 64.0 GiB" in doc["warning"]
    assert "COMFY_KITCHEN_C_RAM_PROFILE=32" in doc["warning"]
    comfyui_loaded.MAX_PINNED_MEMORY = comfyui.max_pinned_memory(32 * GIB, True)  # what the RAM profile sets
    doc = doctor_memory.pinned_memory(RAM, windows=True)
    assert doc["cap_share"] == pytest.approx(0.20) and doc["warning"] is None
    comfyui_loaded.MAX_PINNED_MEMORY = -1  # --disable-pinned-memory
    doc = doctor_memory.pinned_memory(RAM, windows=True)
    assert doc["warning"] is None and doc["cap_source"].endswith("pinned memory is off")
    assert "cap off" in doctor_memory.summary(doc)


def test_off_windows_the_figures_are_reported_without_a_warning(comfyui_loaded):
    comfyui_loaded.TOTAL_PINNED_MEMORY = 40 * GIB
    doc = doctor_memory.pinned_memory(RAM, windows=False)
    assert doc["warn_share"] is None and doc["warning"] is None and doc["pinned"] == 40 * GIB
    assert "62% of RAM" in doctor_memory.summary(doc) and "no warning off Windows" in doctor_memory.summary(doc)


def test_in_its_own_process_doctor_judges_comfyuis_formula(monkeypatch):
    monkeypatch.delitem(sys.modules, "comfy.model_management", raising=False)
    doc = doctor_memory.pinned_memory(RAM, windows=True)
    assert doc["sources"]["comfyui_total"] is None
    assert any("ComfyUI is not loaded in this process" in n for n in doc["notes"])
    assert doc["cap"] == int(0.40 * RAM) and doc["cap_source"] == "ComfyUI's formula: 0.40 * RAM (Windows)"
    assert "ComfyUI may pin up to 25.6 GiB" in doc["warning"]
    unknown = doctor_memory.pinned_memory(None, windows=True)
    assert unknown["cap"] is None and unknown["warning"] is None


def test_torchs_pinned_pool_is_read_only_where_cuda_is_initialised(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert doctor_memory.torch_pool_bytes()[0] is None
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda.memory, "host_memory_stats", lambda: {"allocated_bytes.current": 3 * GIB})
    assert doctor_memory.torch_pool_bytes() == (3 * GIB, None)

    def broken():
        raise RuntimeError("no CUDA")
    monkeypatch.setattr(torch.cuda.memory, "host_memory_stats", broken)
    value, why = doctor_memory.torch_pool_bytes()
    assert value is None and "RuntimeError: no CUDA" in why


def test_attach_never_raises_and_doctor_json_has_the_part(monkeypatch, capsys):
    def broken(*_args, **_kwargs):
        raise ValueError("unreadable")
    doc = doctor_memory.attach({"recommendations": ["x"]})
    assert "pinned_memory" in doc and doc["recommendations"][0].startswith("Pinned host memory:")
    monkeypatch.setattr(doctor_memory, "pinned_memory", broken)
    doc = doctor_memory.attach({})
    assert doc["pinned_memory"] == {"error": "ValueError: unreadable"}
    assert doc["recommendations"] == ["Pinned host memory: not measured (ValueError: unreadable)."]
    monkeypatch.undo()
    assert doctor.main(argparse.Namespace(json=True, record=None, last=0)) == 0
    printed = json.loads(capsys.readouterr().out)
    assert set(printed["pinned_memory"]) >= {"ram", "pinned", "cap", "warning", "warn_share", "sources", "notes"}
    assert printed["recommendations"][0].startswith("Pinned host memory:")
