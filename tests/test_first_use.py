# SPDX-License-Identifier: Apache-2.0
"""What a new user met on a fresh clone and in a CPU-only ComfyUI: the README's order and claims,
settings that looked accepted, files written before anything needed them, the selftest's speed
column on a busy machine, and decline messages in the code's words instead of the user's.
(install-comfyui's messages and the node's line on a --cpu ComfyUI: tests/test_comfyui_node.py.)"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from comfy_kitchen_c import _C, backend, op_list, selftest_report, settings

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
P = settings.PREFIX


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(P)}
    env.update(PYTHONPATH=str(ROOT), **extra)
    return env


def test_the_cpu_only_torch_line_comes_before_the_set_up_command():
    """A reader who runs the set-up command first gets PyPI's CUDA torch (5.6 GB)."""
    cpu_torch = README.index("download.pytorch.org/whl/cpu")
    set_up = README.index('python -m pip install -e ".[test]"')
    assert cpu_torch < set_up


def test_the_readme_says_where_parity_is_not_bit_for_bit():
    """"bit for bit where eager is deterministic" held no exception for the ConvRot rotation, which
    eager computes as a torch matmul in the library's summation order."""
    first = README.split("## What it needs")[0]
    assert "where eager is deterministic" not in first
    for needed in ("bit for bit without a rotation or a transcendental activation", "ConvRot rotation",
                   "torch matmul", "docs/parity.md"):
        assert needed in first, needed


def test_docs_say_comfyui_runs_float32_on_the_cpu():
    cpu = (ROOT / "docs" / "cpu.md").read_text(encoding="utf-8")
    assert "ComfyUI runs a model on the CPU in float32" in cpu
    assert "bfloat16, the dtype ComfyUI runs on the CPU" not in cpu


def test_the_install_page_names_the_cpu_only_build():
    install = (ROOT / "docs" / "install.md").read_text(encoding="utf-8")
    assert "COMFY_KITCHEN_C_NO_CUDA=1 python -m pip install" in install


def test_an_unwritable_flight_folder_is_refused_also_as_root():
    """os.access says yes to root for any folder; /proc takes no folder from anyone."""
    loaded = settings.load({P + "FLIGHT_DIR": "/proc/comfy-kitchen-c-nope"})
    if not os.path.isdir("/proc"):
        pytest.skip("no /proc here")
    assert loaded.error(P + "FLIGHT_DIR") is not None
    assert "a folder cannot be made in /proc" in str(loaded.error(P + "FLIGHT_DIR"))


def test_the_folder_probe_leaves_nothing_behind(tmp_path):
    assert settings.load({P + "FLIGHT_DIR": str(tmp_path / "flight")}).errors() == []
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not _C.HAS_CUDA, reason="a build without the GPU kernels loads no driver")
def test_a_driver_path_the_kernels_cannot_load_is_in_doctors_verdict(tmp_path):
    """COMFY_KITCHEN_C_CUDA_DRIVER=/nonexistent: doctor said "Nothing doctor checks is wrong here"."""
    missing = str(tmp_path / "no-such-libcuda.so")
    result = subprocess.run([sys.executable, "-m", "comfy_kitchen_c", "doctor"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300,
                            env=_clean_env(**{P + "CUDA_DRIVER": missing, P + "FLIGHT_DIR": str(tmp_path / "f")}))
    assert result.returncode == 1, result.stdout[-2000:]
    verdict = result.stdout.split("== Verdict ==")[1]
    assert f"the CUDA driver {P}CUDA_DRIVER names cannot be used" in verdict
    assert f"{P}CUDA_DRIVER={missing!r} (environment): no CUDA driver could be loaded" in verdict
    assert "no-such-libcuda.so" in verdict


def test_doctor_shows_the_cpu_and_the_cache_folder(tmp_path):
    env = _clean_env(XDG_CACHE_HOME=str(tmp_path / "cache"), LOCALAPPDATA=str(tmp_path / "cache"))
    result = subprocess.run([sys.executable, "-m", "comfy_kitchen_c", "doctor"], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, env=env)
    cpu = result.stdout.split("== CPU ==")[1].split("==")[0]
    assert "features torch's GEMMs and half-precision ops use" in cpu
    assert "speed rules: measured on this CPU at the first call each decides" in cpu
    assert f"cache folder: {tmp_path / 'cache' / 'comfy_kitchen_c'} (not created); pip uninstall leaves it" in cpu


@pytest.mark.skipif(bool(_C.HAS_CUDA and _C.cuda_driver() is None),
                    reason="a CUDA driver loads here: the flight folder is made at import for the GPU's records")
def test_nothing_is_written_to_disk_until_something_needs_it(tmp_path):
    """Without a GPU, importing the package and running CPU ops through the registry writes nothing
    (the flight folder was made at import; the CPU speed rules write their file only after a
    measurement, off here)."""
    cache = tmp_path / "cache"
    code = ("import torch, comfy_kitchen_c, comfy_kitchen\n"
            "comfy_kitchen_c.activate()\n"
            "q = torch.randint(-127, 128, (4, 64), dtype=torch.int8)\n"
            "comfy_kitchen.dequantize_int8_simple(q, torch.ones(4, 1))\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env=_clean_env(XDG_CACHE_HOME=str(cache), LOCALAPPDATA=str(cache),
                                           **{P + "CPU_SPEED": "off"}))
    assert result.returncode == 0, result.stderr
    assert not cache.exists(), sorted(p.name for p in cache.rglob("*"))


def test_the_selftest_says_when_the_machine_was_busy():
    quiet = [(1.5, 1.9), (3.0, 3.4)]
    assert selftest_report.busy_note(quiet, 0.01) is None
    note = selftest_report.busy_note(quiet + [(0.03, 1.3)], 0.01)
    assert note.startswith("The machine was busy while timing (1 of 3 rows' rounds spread over 2x)")
    assert "OMP_WAIT_POLICY=PASSIVE" in note
    assert "other processes used 40% of all cores" in selftest_report.busy_note(quiet, 0.4)


def test_the_selftest_prints_the_busy_note(monkeypatch):
    import io

    from comfy_kitchen_c import selftest
    monkeypatch.setattr(selftest_report.OtherLoad, "share", lambda self: 0.5)
    out = io.StringIO()
    assert selftest.run(["cpu"], out, only={"quantize_int8_rowwise"})
    assert "The machine was busy while timing (other processes used 50% of all cores" in out.getvalue()


@pytest.mark.parametrize("kwargs, argument, words", [
    ({"scale": torch.ones(4, 1)}, "q", "dequantize_int8_simple: argument 'q': missing (required by backend 'c')"),
    ({"q": torch.zeros(4, 64, dtype=torch.int8), "scale": torch.ones(3)}, "scale",
     "dequantize_int8_simple: argument 'scale': "),
    ({"q": torch.zeros(4, 64, dtype=torch.int8), "scale": torch.ones(4, 1), "newer": 1}, "newer",
     "dequantize_int8_simple: argument 'newer': backend 'c' does not take it"),
])
def test_a_declined_call_names_the_argument_in_the_ops_words(kwargs, argument, words, caplog):
    """The reason the registry shows and the DEBUG line name the argument, not check_...() or __call__."""
    rule = backend._call_rule(op_list.BY_NAME["dequantize_int8_simple"])
    with caplog.at_level("DEBUG", logger="comfy_kitchen_c"):
        result = rule(kwargs)
    assert not result.success and result.failed_param == argument
    assert result.failure_reason.startswith(words), result.failure_reason
    text = " ".join(r.getMessage() for r in caplog.records)
    assert words in text and "check_dequantize_int8_simple()" not in text and "__call__" not in text
