# SPDX-License-Identifier: Apache-2.0
"""Staging hooks on ComfyUI's copy points (comfyui_hooks.py), against the stand-in ComfyUI
modules (tests/comfyui_standin: same signatures and call order), on the CPU and on the emulated
device, where the copies are checked, recorded in the flight record, and a fault injected into
one of them is reported as a staging fault on that copy."""
import io
import os
import sys

import pytest
import torch

import comfy_kitchen_c as ckc
from comfy_kitchen_c import comfyui_hooks, flight, testing
from comfy_kitchen_c.testing import emulated_device, inject

pytest.importorskip("comfy_kitchen")
from comfy_kitchen.tensor.base import QuantizedTensor  # noqa: E402

STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "comfyui_standin")


@pytest.fixture
def comfy():
    """The stand-in comfy package, hooked; unhooked and unloaded afterwards."""
    sys.path.insert(0, STANDIN)
    import comfy.memory_management as memory
    import comfy.model_management as model
    originals = (memory.read_tensor_file_slice_into, model.cast_to_gathered)
    names = comfyui_hooks.install()
    try:
        yield memory, model, names
    finally:
        comfyui_hooks.uninstall()
        assert (memory.read_tensor_file_slice_into, model.cast_to_gathered) == originals
        sys.path.remove(STANDIN)
        for name in [n for n in sys.modules if n == "comfy" or n.startswith("comfy.")]:
            del sys.modules[name]


def seq_now() -> int:
    path = ckc.faults.record_path()
    return flight.load(path)["written"] if path else 0


def records_since(seq: int) -> list[dict]:
    return [r for r in flight.load(ckc.faults.record_path())["records"] if r["seq"] > seq]


def file_backed(memory, tensor: torch.Tensor, tmp_path, name: str) -> torch.Tensor:
    """tensor as ComfyUI's loader leaves it: its storage knows the file slice it came from."""
    path = tmp_path / name
    path.write_bytes(tensor.contiguous().view(torch.uint8).numpy().tobytes())
    copy = tensor.clone()
    memory.attach_file_slice(copy, open(path, "rb"), 0)
    return copy


def quantized(rows=32, cols=256, seed=0) -> QuantizedTensor:
    g = torch.Generator().manual_seed(seed)
    return QuantizedTensor.from_float(torch.randn(rows, cols, generator=g), "TensorWiseINT8Layout")


def device_buffer(memory, tensors) -> torch.Tensor:
    return testing.device_memory(torch.zeros(memory.vram_aligned_size(tensors), dtype=torch.uint8))


def gathered_equal(memory, tensors, buffer) -> bool:
    for src, view in zip(tensors, memory.interpret_gathered_like(tensors, buffer)):
        if isinstance(src, QuantizedTensor):
            if not (torch.equal(view._qdata, src._qdata) and torch.equal(view._params.scale, src._params.scale)):
                return False
        elif not torch.equal(view, src):
            return False
    return True


def test_install_hooks_every_loaded_point_once(comfy):
    memory, model, names = comfy
    assert names[:3] == ["comfy.memory_management.read_tensor_file_slice_into",
                         "comfy.model_management.cast_to_gathered",
                         "QuantizedTensor.copy_ (comfy_kitchen _handle_copy_)"]
    assert "BaseLayoutParams.copy_from" in names
    assert comfyui_hooks.install() == []  # nothing new
    assert memory.read_tensor_file_slice_into.__wrapped__.__module__ == "comfy.memory_management"


def test_cpu_copies_are_unchanged_and_unrecorded(comfy, tmp_path):
    memory, model, _ = comfy
    weight = quantized()
    tensors = [file_backed(memory, torch.randn(64, 32), tmp_path, "w"), weight, torch.randn(7)]
    buffer = torch.zeros(memory.vram_aligned_size(tensors), dtype=torch.uint8)
    before = seq_now()
    model.cast_to_gathered(tensors, buffer)
    assert gathered_equal(memory, tensors, buffer)
    assert seq_now() == before


def test_device_copies_on_the_emulated_device_are_recorded_in_order(comfy, tmp_path):
    """ComfyUI's DynamicVRAM sequence for one weight: file -> pin (cast_to_gathered to the pin,
    no stream), then pin -> device (cast_to_gathered with r2); and the direct file -> device read."""
    memory, model, _ = comfy
    plain = file_backed(memory, torch.randn(64, 32), tmp_path, "plain")
    weight = quantized()
    weight._qdata = file_backed(memory, weight._qdata, tmp_path, "qdata")
    bias = torch.randn(32)  # not from a file: ComfyUI's torch fallback copies it
    tensors = [plain, weight, bias]
    pin = torch.zeros(memory.vram_aligned_size(tensors), dtype=torch.uint8)
    pin.untyped_storage()._comfy_hostbuf = object()
    device = device_buffer(memory, tensors)
    with emulated_device():
        before = seq_now()
        model.cast_to_gathered(tensors, pin, r2=device, non_blocking=True)
        records = records_since(before)
        direct = device_buffer(memory, tensors)
        model.cast_to_gathered(tensors, direct, non_blocking=True)
        direct_records = records_since(records[-1]["seq"])
    assert gathered_equal(memory, tensors, device) and gathered_equal(memory, tensors, direct)
    assert [(r["op"], r["kind"], r["state"], r["device_kind"]) for r in records] == [
        ("aimdo read_file_slice", "copy", "completed", "emulated"),     # plain: pin -> device
        ("aimdo read_file_slice", "copy", "completed", "emulated"),     # weight._qdata: pin -> device
        ("stage", "copy", "completed", "emulated"),                     # weight's scale: pin -> device
        ("torch copy_ (cast_to_gathered)", "copy", "completed", "emulated"),  # bias: pin -> device
    ]
    pin_views = memory.interpret_gathered_like(tensors, pin)
    assert records[0]["host_ptr"] == pin_views[0].data_ptr() and records[0]["bytes"] == plain.nbytes
    assert records[3]["host_ptr"] == pin_views[2].data_ptr() and records[3]["bytes"] == bias.nbytes
    assert [r["op"] for r in direct_records] == ["aimdo read_file_to_device", "aimdo read_file_to_device", "stage",
                                                 "torch copy_ (cast_to_gathered)"]


def test_legacy_copy_of_a_quantized_tensor_is_staged(comfy):
    memory, model, _ = comfy
    src = quantized(seed=1)
    dst = QuantizedTensor(testing.device_memory(torch.zeros_like(src._qdata)), src._layout_cls,
                          src._params.clone())
    testing.device_memory(dst._params.scale)
    with emulated_device():
        before = seq_now()
        dst.copy_(src)
        records = records_since(before)
    assert torch.equal(dst._qdata, src._qdata) and torch.equal(dst._params.scale, src._params.scale)
    assert [(r["op"], r["bytes"]) for r in records] == [("stage", src._qdata.nbytes), ("stage", 4)]


@pytest.mark.parametrize("nth, what", [(1, "int8[32, 256]"), (2, "float32[]")])
def test_a_faulty_copy_is_a_staging_fault_on_that_copy_in_boundary_mode(comfy, nth, what):
    memory, model, _ = comfy
    weight = quantized()
    tensors = [weight]
    device = device_buffer(memory, tensors)
    with emulated_device(), ckc.checking("boundary"), inject("copy", op="stage", nth=nth):
        before = seq_now()
        with pytest.raises(ckc.StagingFault) as info:
            model.cast_to_gathered(tensors, device, non_blocking=True)
    fault = info.value
    # the scale's own copy fences before it (boundary mode), so it finds a fault of the data's
    # copy; the fence that ends cast_to_gathered finds one of the last copy
    assert fault.op == "stage" and fault.detected_by == ("stage" if nth == 1 else "cast_to_gathered")
    failed = [r for r in records_since(before) if r["seq"] == fault.seq][0]
    assert failed["kind"] == "copy" and what in failed["tensors"] and failed["device_kind"] == "emulated"
    assert f"seq {fault.seq}" in str(fault)


def test_a_faulty_copy_in_launch_mode_is_blamed_at_the_next_launch(comfy):
    """No fences in launch mode: the next launch (here the scale's copy) finds the sticky fault
    and the flight record blames the copy that did not complete."""
    memory, model, _ = comfy
    tensors = [quantized()]
    device = device_buffer(memory, tensors)
    with emulated_device(), inject("copy", op="stage", nth=1):
        before = seq_now()
        with pytest.raises(ckc.CudaFault) as info:
            model.cast_to_gathered(tensors, device, non_blocking=True)
    copy = [r for r in records_since(before) if r["op"] == "stage"][0]
    assert info.value.op == "stage" and info.value.seq == copy["seq"]


def test_a_hung_copy_is_named_by_the_watchdog(comfy, c_settings):
    c_settings(HANG_MS="50", HANG_RAISE_MS="200")
    memory, model, _ = comfy
    tensors = [quantized()]
    device = device_buffer(memory, tensors)
    with emulated_device(), ckc.checking("boundary"), inject("hang", op="stage", nth=1):
        before = seq_now()
        with pytest.raises(ckc.HangSuspected):
            model.cast_to_gathered(tensors, device, non_blocking=True)
        hung = [r for r in records_since(before) if r["state"] == "hang_suspected"]
    assert [r["op"] for r in hung] == ["stage"] and "int8[32, 256]" in hung[0]["tensors"]


def test_uninstall_restores_every_point(comfy):
    memory, model, _ = comfy
    import comfy_kitchen.tensor.base as base
    hooked = base._DISPATCH_TABLE[torch.ops.aten.copy_.default]
    original = hooked.__wrapped__
    comfyui_hooks.uninstall()
    assert base._DISPATCH_TABLE[torch.ops.aten.copy_.default] is original
    assert not hasattr(memory.read_tensor_file_slice_into, "__wrapped__")
    comfyui_hooks.install()  # the fixture's uninstall runs after
    buf = io.StringIO()
    print(comfyui_hooks.installed(), file=buf)
    assert "cast_to_gathered" in buf.getvalue()
