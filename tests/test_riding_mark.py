# SPDX-License-Identifier: Apache-2.0
"""Completion marks that ride on an op's own last kernel (csrc/contract/done_mark.h,
kernels/done_mark.cuh, csrc/diag/marks.c): the converted ops queue no separate mark, yet every
record completes, in both places the device writes completions (the file's own words; pinned
words mirrored into the file).  A kernel that never ran leaves its record incomplete, and the
arrival counter of a slot is back at zero when the ring comes round to it again.

``_C_emu.mark_counts()`` counts this module's marks: 'riding' (taken by a kernel), 'separate'
(queued as work of their own)."""
import contextlib
import sys

import pytest
import torch

import comfy_kitchen_c as ckc
from comfy_kitchen_c import faults, flight, ops

if sys.platform == "win32":
    pytest.skip("the emulated device is not built on Windows yet", allow_module_level=True)
from comfy_kitchen_c.testing import emulated_device, has_emulated_device, host_mapping_refused, inject  # noqa: E402

if not has_emulated_device():
    pytest.skip("this build has no emulated device (_C_emu: development builds only)", allow_module_level=True)
from comfy_kitchen_c import _C_emu  # noqa: E402


def _int8_codes(rows, cols):
    return torch.randint(-127, 128, (rows, cols), dtype=torch.int8)


PTS = torch.tensor(0.05)


def _nvfp4_codes(rows, cols):
    """(qx, per_tensor_scale, block_scales), made on the CPU (no record, no mark)."""
    qx, sx = ops.quantize_nvfp4(torch.randn(rows, cols), PTS)
    return qx, PTS, sx


def _linear(rows):
    """int8_linear's inputs: x [rows, 64], weight [24, 64] int8, per-channel scale, bias."""
    g = torch.Generator().manual_seed(rows)
    return (torch.randn(rows, 64, generator=g), torch.randint(-127, 128, (24, 64), generator=g, dtype=torch.int8),
            torch.rand(24, generator=g) * 0.01 + 0.001, torch.randn(24, generator=g))


# case: (op name in the record, its inputs (made before counting), the op).  Grids of one block
# and of several (where the arrival counter decides the last block), the int8 dequantizer's
# element path, int8_linear's GEMV (one row) and its GEMM + epilogue.
CASES = {
    "quantize_int8_rowwise": ("quantize_int8_rowwise", lambda: (torch.randn(5, 300),), ops.quantize_int8_rowwise),
    "quantize_and_rotate_rowwise": ("quantize_and_rotate_rowwise",
                                    lambda: (torch.randn(6, 1024, dtype=torch.bfloat16), None, 256),
                                    ops.quantize_and_rotate_rowwise),
    "quantize_int8_tensorwise": ("quantize_int8_tensorwise", lambda: (torch.randn(4, 700),),
                                 ops.quantize_int8_tensorwise),
    "rotate_int8_convrot_weight": ("rotate_int8_convrot_weight", lambda: (torch.randn(8, 512), 256),
                                   ops.rotate_int8_convrot_weight),
    "dequantize_int8_simple": ("dequantize_int8_simple", lambda: (_int8_codes(64, 256), torch.rand(64, 1)),
                               ops.dequantize_int8_simple),
    "dequantize_int8_elements": ("dequantize_int8_simple_dtype", lambda: (_int8_codes(3, 17), torch.rand(3, 1), 0),
                                 ops.dequantize_int8_simple_dtype),
    "dequantize_int8_convrot_weight": ("dequantize_int8_convrot_weight",
                                       lambda: (_int8_codes(4, 512), torch.rand(4, 1), 256),
                                       ops.dequantize_int8_convrot_weight),
    "quantize_nvfp4": ("quantize_nvfp4", lambda: (torch.randn(64, 128), PTS), ops.quantize_nvfp4),
    "dequantize_nvfp4": ("dequantize_nvfp4", lambda: _nvfp4_codes(16, 48), ops.dequantize_nvfp4),
    "int8_linear_gemv": ("int8_linear", lambda: _linear(1), ops.int8_linear),
    "int8_linear_gemm": ("int8_linear", lambda: _linear(37), ops.int8_linear),
}

WORDS = {"file": contextlib.nullcontext, "pinned": host_mapping_refused}


def counts():
    c = _C_emu.mark_counts()
    return c["riding"], c["separate"]


def last_record():
    return flight.load(faults.record_path())["records"][-1]


@pytest.fixture(scope="module", autouse=True)
def ring_is_open():
    with emulated_device():
        ops.quantize_int8_rowwise(torch.randn(1, 16))


@pytest.mark.parametrize("words", list(WORDS))
@pytest.mark.parametrize("case", list(CASES))
def test_the_mark_rides_and_the_record_completes(case, words):
    op, inputs, run = CASES[case]
    args = inputs()
    with WORDS[words](), emulated_device(), ckc.checking("launch"):
        riding, separate = counts()
        run(*args)
        after = counts()
        if words == "pinned":
            assert _C_emu.flight_marks()["words"] == "pinned"
    assert after == (riding + 1, separate), f"{case}: the mark did not ride on its kernel"
    r = last_record()
    assert r["op"] == op and r["state"] == "completed", r


def test_int8_linear_in_chunks_marks_once_with_its_last_kernel():
    saved = ckc.linear_memory_limit()
    args = _linear(37)
    try:
        ckc.set_linear_memory_limit(1)  # the fewest rows per chunk
        with emulated_device(), ckc.checking("launch"):
            riding, separate = counts()
            ops.int8_linear(*args)
            assert counts() == (riding + 1, separate)
    finally:
        ckc.set_linear_memory_limit(saved)
    r = last_record()
    assert r["op"] == "int8_linear" and r["state"] == "completed"
    assert " more, " in r["params"]  # several chunks: the mark rode on the last of many kernels


def test_the_riding_limit_is_32_mib_by_default():
    assert _C_emu.riding_mark_limit() == 32 << 20


@pytest.mark.parametrize("words", list(WORDS))
def test_an_op_past_the_riding_limit_takes_a_separate_mark(words):
    """An op whose tensors hold more than the limit gets the separate mark (its riding kernel
    would pay a release fence in every block: marks.h), one at or under it still rides; both
    records complete.  The limit is set low here so that small tensors stand for big ones."""
    from comfy_kitchen_c.testing import riding_mark_limit

    x = torch.randn(8, 256)                    # 8 KiB of input, 2 KiB of codes, 32 bytes of scales
    small = torch.randn(1, 256)                # 1 KiB + 256 + 4 bytes
    with WORDS[words](), emulated_device(), ckc.checking("launch"), riding_mark_limit(2048):
        riding, separate = counts()
        q, s = ops.quantize_int8_rowwise(x)
        assert counts() == (riding, separate + 1)
        assert last_record()["state"] == "completed"
        expected, _ = ops.quantize_int8_rowwise(small)
        assert counts() == (riding + 1, separate + 1)
        assert last_record()["state"] == "completed"
    with emulated_device(), riding_mark_limit(0):  # none rides: the results do not change
        q0, s0 = ops.quantize_int8_rowwise(x)
    assert torch.equal(q0, q) and torch.equal(s0, s)
    assert _C_emu.riding_mark_limit() == 32 << 20  # restored


def test_a_copy_still_takes_a_separate_mark():
    """The counters tell the two apart: a staged copy has no kernel to carry its mark."""
    with emulated_device():
        riding, separate = counts()
        ckc.stage(torch.empty(4), torch.randn(4))
        assert counts() == (riding, separate + 1)
    assert last_record()["state"] == "completed"


@pytest.mark.parametrize("words", list(WORDS))
@pytest.mark.parametrize("kind", ["kernel", "hang"])
def test_a_kernel_that_never_ran_leaves_its_record_incomplete(kind, words):
    x = torch.randn(5, 300)
    with WORDS[words](), emulated_device(), ckc.checking("launch"):
        riding, _ = counts()
        with inject(kind, op="quantize_int8_rowwise"):
            ops.quantize_int8_rowwise(x)  # launch mode: the fault surfaces later
            assert counts()[0] == riding + 1  # the kernel took the mark...
            analysis = flight.load(faults.record_path())
            r = analysis["records"][-1]
            assert r["op"] == "quantize_int8_rowwise" and r["state"] == "queued"  # ...and never wrote it
            assert analysis["first_incomplete"]["seq"] == r["seq"]


def test_a_refused_launch_fails_its_record():
    with emulated_device(), ckc.checking("launch"), inject("launch", op="quantize_int8_rowwise"):
        with pytest.raises(ckc.LaunchError):
            ops.quantize_int8_rowwise(torch.randn(5, 300))
    assert last_record()["state"] == "failed"


def test_the_arrival_counter_is_zero_when_the_ring_comes_round():
    """A multi-block op, then copies up to the same slot one ring later: the op there completes
    only if the last block of the first reset the slot's counter."""
    x = torch.randn(7, 64)  # 7 blocks
    with emulated_device():
        ops.quantize_int8_rowwise(x)
        first = last_record()
        capacity = flight.load(faults.record_path())["capacity"]
        src, dst = torch.randn(4), torch.empty(4)
        for _ in range(capacity - 1):
            ckc.stage(dst, src)
        ops.quantize_int8_rowwise(x)
    r = last_record()
    assert r["seq"] == first["seq"] + capacity
    assert r["op"] == "quantize_int8_rowwise" and r["state"] == "completed"
