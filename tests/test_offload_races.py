# SPDX-License-Identifier: Apache-2.0
"""ComfyUI's asynchronous weight offload through every op of "c" that takes a weight, on the
emulated device with its cross-stream hazard detector (csrc/emu/emu_hazards.cpp).

The pattern (comfy/ops.py cast_bias_weight with an offload stream): the weight (codes, scales,
norm weights) is copied host-to-device on a side stream, an event is recorded there, the
compute stream waits on it, and the op runs on the compute stream; before the next layer's
weights are copied into the same buffer, the side stream waits for the compute stream (ComfyUI
PR #10501).  The field report's lead: an int8 ConvRot illegal memory access under async weight
offload, fixed by disabling offload for those weights (a stream or buffer-lifetime race).

What the tests show: with the waits, "c" adds no race of its own (no report, none of its work on
another stream than its caller's, results bit-identical to the same op without offload); without
the wait the detector reports the caller's race, once per weight tensor the op read too early,
naming the op and the argument.  The emulated device runs work when it is issued, so without the
detector the missing wait would not change a single result: the detector checks the order."""
import inspect
import sys

import pytest
import torch

if sys.platform == "win32":
    pytest.skip("the emulated device is not built on Windows yet", allow_module_level=True)
from comfy_kitchen_c import ops, selftest  # noqa: E402
from comfy_kitchen_c.testing import emulated_device, has_emulated_device, stream_hazards  # noqa: E402

if not has_emulated_device():
    pytest.skip("this build has no emulated device (_C_emu: development builds only)", allow_module_level=True)
from conftest import assert_same  # noqa: E402

OFFLOAD = 0x0FF1  # the side stream's handle (any value but the compute stream's 0)

# Per op of "c" that takes a weight: the arguments that are the weight (what ComfyUI stages).
WEIGHTS = {
    "int8_linear": ("weight", "weight_scale"),
    "int8_linear_modulated": ("weight", "weight_scale"),
    "int8_linear_rms_modulated": ("norm_weight", "weight", "weight_scale"),
    "dequantize_int8_simple": ("q", "scale"),
    "dequantize_int8_simple_dtype": ("q", "scale"),
    "dequantize_int8_convrot_weight": ("q", "scale"),
    "dequantize_int8_convrot_weight_dtype": ("q", "scale"),
    "dequantize_int8_embedding": ("q", "scale"),
    "dequantize_nvfp4": ("qx", "per_tensor_scale", "block_scales"),
    "scaled_mm_nvfp4": ("b", "tensor_scale_b", "block_scale_b"),
    "dequantize_per_tensor_fp8": ("x", "scale"),
    "dequantize_mxfp8": ("qx", "block_scales"),
    "scaled_mm_mxfp8": ("b", "block_scale_b"),
    "prepare_int4_weight_for_int8_linear": ("weight",),
    "dequantize_convrot_w4a4_weight": ("qdata", "scales"),
    "convrot_w4a4_linear": ("qweight", "wscales"),
    "dequantize_w4a8_int8_weight": ("qdata", "s_rel", "s_channel", "codebook"),
    "w4a8_int8_linear": ("qdata", "s_rel", "s_channel", "codebook"),
    "w4a8_packed_linear": ("qdata", "s_channel", "codebook"),
    "gemv_awq_w4a16": ("qweight", "wscales", "wzeros"),
    "rms_gated_residual": ("norm_weight",),
    "rms_rope1": ("scale",),
    "rms_rope": ("q_scale", "k_scale"),
}

# Weight arguments "c"'s Python wrapper first passes through a torch op (on a GPU: a kernel on the
# current stream, the caller's, as "c"'s own): the scale in the tensor's dtype converted to float32,
# alpha = tensor_scale_a * tensor_scale_b.  The emulated device does not see torch's CPU ops, so
# the detector reports these reads only where "c"'s kernels make them.
TORCH_FIRST = {"dequantize_int8_simple": ("scale",), "dequantize_int8_convrot_weight": ("scale",),
               "scaled_mm_nvfp4": ("tensor_scale_b",)}

# Fewer weight rows where the selftest's size makes the emulated kernels slow (rows are independent).
FEWER_ROWS = {"dequantize_convrot_w4a4_weight": lambda a: (a[0][:16], a[1][:16], *a[2:]),
              "dequantize_int8_embedding": lambda a: (a[0], a[1], a[2] % a[0].shape[0], *a[3:])}


@pytest.fixture(scope="module")
def arguments():
    """{op: the selftest's arguments for it}, at a small size (the selftest's inputs, 32 x 256)."""
    saved = selftest.ROWS, selftest.COLS
    selftest.ROWS, selftest.COLS = 32, 256
    try:
        eager, hadamard = selftest.load_reference()
        d = selftest.Inputs(eager, hadamard, "cpu", torch.bfloat16)
        found = {}
        for case in selftest.CASES:
            if case.op in WEIGHTS and case.op not in found:
                found[case.op] = FEWER_ROWS.get(case.op, tuple)(case.args(d))
    finally:
        selftest.ROWS, selftest.COLS = saved
    return found


def offloaded_call(op, args, wait: bool):
    """Runs op as ComfyUI's offload does; returns (result, reports, the arguments staged)."""
    names = list(inspect.signature(getattr(ops, op)).parameters)
    with emulated_device(), stream_hazards() as hazards:
        staged, args = [], list(args)
        for i, name in enumerate(names[:len(args)]):
            if name in WEIGHTS[op] and isinstance(args[i], torch.Tensor) and args[i].numel():
                device = torch.empty_like(args[i])
                hazards.copy(device, args[i], OFFLOAD)
                args[i] = device
                staged.append(name)
        if wait:
            hazards.wait(hazards.COMPUTE, hazards.record(OFFLOAD))
        result = getattr(ops, op)(*args)
        return result, hazards.reports(), staged


@pytest.mark.parametrize("op", WEIGHTS)
def test_offload_with_the_wait_has_no_race_and_the_same_result(arguments, op):
    if op not in arguments:
        pytest.skip(f"the selftest has no case of {op} beside this comfy_kitchen")
    with emulated_device():
        expected = getattr(ops, op)(*arguments[op])
    result, reports, staged = offloaded_call(op, arguments[op], wait=True)
    assert staged, f"{op}: no weight argument was staged (WEIGHTS names {WEIGHTS[op]})"
    assert reports == [], "\n".join(reports)
    assert_same(expected, result, f"{op} with offloaded weights")


@pytest.mark.parametrize("op", WEIGHTS)
def test_offload_without_the_wait_reports_the_callers_race(arguments, op):
    if op not in arguments:
        pytest.skip(f"the selftest has no case of {op} beside this comfy_kitchen")
    _, reports, staged = offloaded_call(op, arguments[op], wait=False)
    expected = [name for name in staged if name not in TORCH_FIRST.get(op, ())]
    assert len(reports) >= len(expected), "\n".join(reports)  # rms_rope reads q_scale twice (k_scale None)
    for line in reports:
        assert "read after write" in line and "a host-to-device copy on stream 0xff1" in line, line
        assert line.startswith(f"{op} (argument '") and "on stream 0 reads" in line, line
        assert "work of its own" not in line, line
    named = {line.split("(argument '", 1)[1].split("'", 1)[0] for line in reports}
    assert len(named) == len(expected), (named, expected)  # one report per weight tensor (C's names)


def test_refilling_a_weight_buffer_the_compute_stream_still_reads_is_reported(arguments):
    """The next layer's weights copied into the same buffer: the side stream must wait for the
    compute stream first (ComfyUI PR #10501: "use after free" without it)."""
    x, weight, scale, *rest = arguments["int8_linear"]
    for wait_for_compute in (False, True):
        with emulated_device(), stream_hazards() as hazards:
            buffers = [torch.empty_like(weight), torch.empty_like(scale)]
            for buffer, host in zip(buffers, (weight, scale)):
                hazards.copy(buffer, host, OFFLOAD)
            hazards.wait(hazards.COMPUTE, hazards.record(OFFLOAD))
            ops.int8_linear(x, *buffers, *rest)
            if wait_for_compute:
                hazards.wait(OFFLOAD, hazards.record(hazards.COMPUTE))
            for buffer, host in zip(buffers, (weight, scale)):
                hazards.copy(buffer, host, OFFLOAD)  # the next layer's weight, into the same buffer
            reports = hazards.reports()
        if wait_for_compute:
            assert reports == [], "\n".join(reports)
        else:
            assert len(reports) == 2 and all("write after read" in r and "int8_linear (argument '" in r
                                              for r in reports), "\n".join(reports)


def test_the_detector_is_off_outside_its_block(arguments):
    from comfy_kitchen_c import _C_emu
    x, weight, scale, *rest = arguments["int8_linear"]
    with emulated_device():
        with stream_hazards() as hazards:
            buffer = torch.empty_like(weight)
            hazards.copy(buffer, weight, OFFLOAD)
        ops.int8_linear(x, buffer, scale, *rest)  # after the block: nothing tracked, nothing reported
    assert _C_emu.hazards_take() == ""
    with pytest.raises(ValueError, match="argument 'event'"):
        _C_emu.hazard_wait(0, 12345)
