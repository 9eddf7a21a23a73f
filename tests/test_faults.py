# SPDX-License-Identifier: Apache-2.0
"""Checking modes, the CudaFault exceptions, stage/fence and the watchdog, on the
emulated device with injected faults (comfy_kitchen_c.testing.inject).

Every kind of fault in every mode: the exception's class, the op it is attributed
to (``op``) and the op whose check found it (``detected_by``)."""
import sys
import threading
import time

import pytest
import torch

import comfy_kitchen_c as ckc
from comfy_kitchen_c import faults, flight, ops

if sys.platform == "win32":
    pytest.skip("the emulated device is not built on Windows yet", allow_module_level=True)
from comfy_kitchen_c.testing import emulated_device, inject

A, B = "quantize_int8_rowwise", "dequantize_int8_simple"


@pytest.fixture(autouse=True)
def quick_watchdog(c_settings):
    """Small thresholds: the hang record after 50 ms, HangSuspected after 300 ms."""
    c_settings(HANG_MS="50", HANG_RAISE_MS="300")
    return c_settings


def workload():
    """stage -> A -> B -> stage + fence: the copy kind hits the first stage, the others A."""
    src = torch.randn(4, 256)
    dst = torch.empty_like(src)
    ckc.stage(dst, src)
    q, s = ops.quantize_int8_rowwise(dst)
    ops.dequantize_int8_simple(q, s)
    src2 = torch.randn(4, 256)
    ckc.stage(torch.empty_like(src2), src2)
    ckc.fence(src2)


# (kind, mode) -> (exception class, attributed op, detecting op)
EXPECTED = {
    ("launch", "launch"): (ckc.LaunchError, A, A),
    ("launch", "boundary"): (ckc.LaunchError, A, A),
    ("launch", "op"): (ckc.LaunchError, A, A),
    # launch mode: caught at the next boundary it reaches (B's launch check sees the sticky fault)
    ("kernel", "launch"): (ckc.KernelFault, A, B),
    ("kernel", "boundary"): (ckc.StagingFault, A, B),
    ("kernel", "op"): (ckc.KernelFault, A, A),
    # launch mode never waits on the ops: the fence on the later copy meets the hang
    ("hang", "launch"): (ckc.HangSuspected, A, "fence"),
    ("hang", "boundary"): (ckc.HangSuspected, A, B),
    ("hang", "op"): (ckc.HangSuspected, A, A),
    ("copy", "launch"): (ckc.StagingFault, "stage", A),
    ("copy", "boundary"): (ckc.StagingFault, "stage", A),
    ("copy", "op"): (ckc.StagingFault, "stage", "stage"),
}


@pytest.mark.parametrize("mode", ["launch", "boundary", "op"])
@pytest.mark.parametrize("kind", ["launch", "kernel", "hang", "copy"])
def test_fault_is_named_where_it_happened(kind, mode):
    cls, op, detected_by = EXPECTED[(kind, mode)]
    target = "stage" if kind == "copy" else A
    with emulated_device(), ckc.checking(mode), inject(kind, op=target):
        with pytest.raises(ckc.CudaFault) as info:
            workload()
    e = info.value
    assert type(e) is cls, f"{kind}/{mode}: {type(e).__name__}: {e}"
    assert isinstance(e, RuntimeError) and isinstance(e, ckc.KitchenError)
    assert (e.op, e.detected_by) == (op, detected_by), str(e)
    assert e.seq > 0
    assert e.record_path == faults.record_path() and e.record_path is not None
    message = str(e)
    assert message.startswith(f"{detected_by}: ")
    assert f"attributed to: {op} (flight record seq {e.seq})" in message
    assert "emulated:0, stream 0x0" in message and e.record_path in message
    if kind in ("kernel", "copy"):
        assert e.cuda_error.startswith("cudaErrorIllegalAddress: injected")
        assert "cudaErrorIllegalAddress" in message
    if kind == "kernel" and mode == "boundary":
        assert f"the fault happened before {B} started" in message
    if op == A:  # the launch parameters of the attributed op
        assert "tensors: x float32[4, 256]; q int8[4, 256]; scale float32[4, 1]" in message
        # the row-tile kernel takes 4 rows of 256 (kernels/int8_tile.cu): 8 threads a row, 4 rows a block
        assert "tile_rows grid=(1,1,1) block=(8,4,1)" in message or kind == "launch"
    # the flight record agrees
    record = {r["seq"]: r for r in flight.load(e.record_path)["records"]}[e.seq]
    assert record["op"] == op
    assert record["state"] == ("hang_suspected" if kind == "hang" else "failed")


def test_launch_mode_hang_record_names_the_hung_op():
    with emulated_device(), inject("hang", op=B):
        src = torch.randn(2, 256)
        q, s = ops.quantize_int8_rowwise(src)
        ops.dequantize_int8_simple(q, s)  # never completes
        ops.quantize_int8_rowwise(src)    # queued behind it: launch mode does not wait
        analysis = flight.load(faults.record_path())
        assert analysis["first_incomplete"]["op"] == B
        assert analysis["last_completed"]["op"] == A
        assert [r["state"] for r in analysis["records"][-3:]] == ["completed", "queued", "queued"]


def test_ops_after_a_reset_run_again():
    x = torch.randn(4, 256)
    with emulated_device():
        with inject("kernel", op=A):
            ops.quantize_int8_rowwise(x)  # faults asynchronously: nothing raised yet
        q, s = ops.quantize_int8_rowwise(x)  # the device was reset when inject ended
    ref_q, ref_s = ops.quantize_int8_rowwise(x)
    assert torch.equal(q, ref_q) and torch.equal(s, ref_s)


def test_nth_launch_of_an_op():
    x = torch.randn(2, 256)
    with emulated_device(), inject("launch", op=A, nth=3):
        ops.quantize_int8_rowwise(x)
        ops.dequantize_int8_simple(*ops.quantize_int8_rowwise(x))  # not A: not counted
        with pytest.raises(ckc.LaunchError, match="injected launch failure"):
            ops.quantize_int8_rowwise(x)


def test_watchdog_writes_the_hang_record_before_raising(quick_watchdog):
    quick_watchdog(HANG_RAISE_MS="3000")
    raised = []

    def next_op():
        with emulated_device(), ckc.checking("boundary"):
            try:
                ops.quantize_int8_rowwise(torch.randn(2, 256))
            except ckc.CudaFault as e:
                raised.append(e)

    with emulated_device(), inject("hang", op=B):
        ops.dequantize_int8_simple(*ops.quantize_int8_rowwise(torch.randn(2, 256)))
        hung_seq = flight.load(faults.record_path())["written"]
        waiter = threading.Thread(target=next_op)
        waiter.start()
        deadline = time.monotonic() + 2.5
        hangs = []
        while not hangs and time.monotonic() < deadline:
            time.sleep(0.02)
            hangs = [h for h in flight.load(faults.record_path())["hangs"] if h["seq"] == hung_seq]
        assert waiter.is_alive(), "the fence returned before the hang record could be read"
        assert [h["op"] for h in hangs][-1:] == [B]
        assert "no progress for 50 ms" in hangs[-1]["error"]
        waiter.join()
    assert len(raised) == 1 and type(raised[0]) is ckc.HangSuspected and raised[0].op == B


def test_checking_mode_is_scoped_and_validated():
    assert ckc.check_mode() == "launch"
    with ckc.checking("op"):
        assert ckc.check_mode() == "op"
        with ckc.checking("boundary"):
            assert ckc.check_mode() == "boundary"
        assert ckc.check_mode() == "op"
    assert ckc.check_mode() == "launch"
    with pytest.raises(ckc.ArgumentError, match="checking: argument 'mode'"):
        with ckc.checking("everything"):
            pass


def test_checking_mode_from_the_environment(monkeypatch):
    monkeypatch.setenv("COMFY_KITCHEN_C_CHECK", " Boundary ")
    assert faults._mode_from_env() == faults.MODES["boundary"]
    monkeypatch.setenv("COMFY_KITCHEN_C_CHECK", "")
    assert faults._mode_from_env() == faults.MODES["launch"]
    monkeypatch.setenv("COMFY_KITCHEN_C_CHECK", "sometimes")  # refused (reported at import): the default
    assert faults._mode_from_env() == faults.MODES["launch"]


# ---- stage / fence --------------------------------------------------------------------------

def test_stage_copies_and_reports_the_memory(tmp_path):
    src = torch.randn(3, 100)
    dst = torch.empty_like(src)
    with emulated_device():
        assert ckc.stage(dst, src) == "pageable"
        ckc.fence(src)
    assert torch.equal(dst, src)
    path = tmp_path / "weights.bin"
    path.write_bytes(torch.arange(64, dtype=torch.float32).numpy().tobytes())
    mapped = torch.from_file(str(path), shared=True, size=64, dtype=torch.float32)
    out = torch.empty(64)
    with emulated_device():
        expected = "file-mapped" if sys.platform.startswith("linux") else "unknown"
        assert ckc.stage(out, mapped, non_blocking=False) == expected
    assert torch.equal(out, torch.arange(64, dtype=torch.float32))
    copy = flight.load(faults.record_path())["records"][-1]
    assert copy["kind"] == "copy" and copy["op"] == "stage" and copy["state"] == "completed"
    assert copy["host_memory"] == expected
    assert (copy["host_ptr"], copy["host_bytes"], copy["bytes"]) == (mapped.data_ptr(), 256, 256)
    assert copy["device_ptr"] == out.data_ptr()
    assert copy["tensors"] == "src float32[64] -> dst float32[64]"
    assert copy["completed_unix"] is not None and copy["completed_unix"] >= copy["queued_unix"]


def test_fence_waits_only_for_copies_from_its_range():
    a, b = torch.randn(256), torch.randn(256)
    with emulated_device(), inject("hang", op="stage", nth=2):
        ckc.stage(torch.empty(256), a)   # completes
        ckc.stage(torch.empty(256), b)   # never completes
        ckc.fence(a)                     # returns: a's copy is done
        with pytest.raises(ckc.HangSuspected) as info:
            ckc.fence(b)
    assert info.value.op == "stage" and info.value.detected_by == "fence"


def test_a_reset_ends_the_wait_on_copies_queued_before_it():
    """A copy that hung (hang-suspected) is abandoned by the device reset: a fence on the same
    host memory afterwards waits only for the copies queued since, which complete."""
    src = torch.randn(256)
    with emulated_device():
        with inject("hang", op="stage"):
            ckc.stage(torch.empty(256), src)  # never completes
            with pytest.raises(ckc.HangSuspected):
                ckc.fence(src)  # the watchdog marks it hang-suspected
        ckc.stage(torch.empty(256), src)
        start = time.monotonic()
        ckc.fence(src)
    assert time.monotonic() - start < 0.3  # HangSuspected would take the 300 ms raise threshold
    hangs = flight.load(faults.record_path())["hangs"]
    assert hangs and hangs[-1]["op"] == "stage"  # the hang record keeps its state


def test_fence_reports_a_failed_copy():
    src = torch.randn(256)
    with emulated_device(), inject("copy"):
        ckc.stage(torch.empty(256), src)  # the copy faults asynchronously
        with pytest.raises(ckc.StagingFault, match="a copy from the fenced host range did not complete") as info:
            ckc.fence(src)
    assert info.value.op == "stage" and info.value.cuda_error.startswith("cudaErrorIllegalAddress")


@pytest.mark.parametrize("bad,match,cls", [
    (lambda: ckc.stage(torch.empty(4), torch.empty(5)), "stage: argument 'dst': 16 bytes, but src has 20",
     ckc.ArgumentError),
    (lambda: ckc.stage(torch.empty(4), torch.empty(4, 2)[:, 0]), "stage: argument 'src': expected a contiguous",
     ckc.ArgumentError),
    (lambda: ckc.stage(torch.empty(4), [1, 2]), "stage: argument 'src': expected a tensor", ckc.ArgumentTypeError),
    (lambda: ckc.fence("buffer"), "fence: argument 'src': expected a tensor", ckc.ArgumentTypeError),
])
def test_stage_and_fence_reject_bad_arguments(bad, match, cls):
    with emulated_device():
        with pytest.raises(cls, match=match):
            bad()


def test_stage_needs_a_device_destination():
    if torch.cuda.is_available():
        pytest.skip("a CUDA build with a GPU accepts CUDA destinations; this checks the CPU refusal")
    with pytest.raises(ckc.ArgumentTypeError, match="stage: argument 'dst': expected a CUDA tensor, got cpu"):
        ckc.stage(torch.empty(4), torch.empty(4))


def test_inject_validates_its_arguments():
    with pytest.raises(ValueError, match="argument 'kind'"):
        with inject("meltdown"):
            pass
    with pytest.raises(ValueError, match="argument 'nth'"):
        with inject("hang", nth=0):
            pass
