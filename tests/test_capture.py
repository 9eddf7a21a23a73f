# SPDX-License-Identifier: Apache-2.0
"""Every op captured into a CUDA graph and replayed, on the emulated device (its capture mode
follows CUDA's rules: csrc/emu/emu_graphs.cpp): the replays recompute the outputs from the
inputs' current contents, bit for bit as uncaptured calls; the checking modes that wait refuse
inside a capture; what CUDA forbids during a capture fails as there; and the flight record says
which replay of which graph ran last and which of its ops completed in it (csrc/diag/capture.c).

On a GPU, tests/test_cuda.py captures and replays every op with torch.cuda.graph."""
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from comfy_kitchen.tensor.w4a8_packed import default_w4a8_codebook

import comfy_kitchen_c as ckc
from comfy_kitchen_c import CaptureError, doctor, faults, flight, ops

from conftest import assert_same

if sys.platform == "win32":
    pytest.skip("the emulated device is not built on Windows yet", allow_module_level=True)
from comfy_kitchen_c.testing import emulated_capture, emulated_device, inject

ROOT = Path(__file__).resolve().parent.parent


def g(seed):
    return torch.Generator().manual_seed(seed)


def fp4_weight(device):
    w = torch.randn(48, 64, generator=g(9)).to(torch.bfloat16)
    pts = torch.tensor(float(w.abs().max()) / (448 * 6))
    q, s = ops.quantize_nvfp4(w, pts)
    return q.to(device), s.to(device), pts.to(device)


def op_cases(device="cpu"):
    """(name, call(inputs) -> outputs, inputs), everything on device: each call's torch work
    on the inputs is none (contiguous inputs of the dtypes the ops take), so a replay's
    outputs depend on the inputs' contents at replay, also on the emulated device, where
    torch's own work is not captured (on a GPU it is)."""
    def on(t):
        return t.to(device)

    x = on((torch.randn(8, 256, generator=g(1)) * 3).to(torch.bfloat16))
    x32 = on(torch.randn(8, 256, generator=g(2)))
    q = on(torch.randint(-127, 128, (8, 256), generator=g(3), dtype=torch.int8))
    s_row = on(torch.rand(8, 1, generator=g(4)) * 0.01)
    w = on(torch.randint(-127, 128, (32, 256), generator=g(5), dtype=torch.int8))
    ws = on(torch.rand(32, generator=g(6)) * 0.01)
    bias = on(torch.randn(32, generator=g(7)).to(torch.bfloat16))
    res = on(torch.randn(8, 32, generator=g(8)).to(torch.bfloat16))
    nw = on(torch.randn(256, generator=g(10)).to(torch.bfloat16))
    mod = on((torch.randn(256, generator=g(11)) * 0.3).to(torch.bfloat16))
    pts = on(torch.tensor([0.01]))
    ts_a = on(torch.tensor([0.005]))
    qw, sw, ptsw = fp4_weight(device)
    qa, sa = ops.quantize_nvfp4(torch.randn(16, 64, generator=g(12)), torch.tensor(0.005))
    qa, sa = on(qa), on(sa)
    table = on(torch.randint(-127, 128, (100, 256), generator=g(13), dtype=torch.int8))
    table_scale = on(torch.rand(100, 1, generator=g(16)) * 0.01)
    idx = on(torch.tensor([[3, 99], [0, 42]]))
    lin = (w, ws, bias, torch.bfloat16)
    # a W4A8 weight of 40 rows (the GEMM's last decoded part runs past n over zeroed rows)
    w4 = (on(torch.randint(-128, 128, (40, 128), generator=g(19), dtype=torch.int8)),
          on((torch.rand(40, 16, generator=g(20)) * 100 + 1).to(torch.float8_e4m3fn)),
          on(torch.rand(40, generator=g(21)) * 0.001), on(default_w4a8_codebook()))
    return [
        ("quantize_int8_rowwise", lambda x: ops.quantize_int8_rowwise(x), (x,)),
        ("quantize_int8_tensorwise", lambda x: ops.quantize_int8_tensorwise(x), (x32,)),
        ("quantize_int8_tensorwise scale", lambda x, s: ops.quantize_int8_tensorwise(x, s), (x32, pts.reshape(()))),
        ("quantize_and_rotate_rowwise", lambda x: ops.quantize_and_rotate_rowwise(x, None, 64), (x,)),
        ("quantize_int8_convrot_weight", lambda x: ops.quantize_int8_convrot_weight(x, 256), (x,)),
        ("rotate_int8_convrot_weight", lambda x: ops.rotate_int8_convrot_weight(x, 16), (x32,)),
        ("dequantize_int8_simple", lambda q, s: ops.dequantize_int8_simple(q, s), (q, s_row)),
        ("dequantize_int8_simple_dtype", lambda q, s: ops.dequantize_int8_simple_dtype(q, s, 1), (q, s_row)),
        ("dequantize_int8_convrot_weight", lambda q, s: ops.dequantize_int8_convrot_weight(q, s, 64), (q, s_row)),
        ("dequantize_int8_convrot_weight_dtype",
         lambda q, s: ops.dequantize_int8_convrot_weight_dtype(q, s, 256, 2), (q, s_row)),
        ("dequantize_int8_embedding", lambda t, i: ops.dequantize_int8_embedding(t, table_scale, i, 16, 2),
         (table, idx)),
        ("quantize_nvfp4", lambda x: ops.quantize_nvfp4(x, pts), (on(torch.randn(16, 64, generator=g(17))),)),
        ("quantize_and_rotate_nvfp4", lambda x: ops.quantize_and_rotate_nvfp4(x, pts, 16),
         (on(torch.randn(16, 64, generator=g(18)).to(torch.bfloat16)),)),
        ("dequantize_nvfp4", lambda q: ops.dequantize_nvfp4(q, ptsw, sw, torch.float16), (qw,)),
        ("scaled_mm_nvfp4", lambda a: ops.scaled_mm_nvfp4(a, qw, ts_a, ptsw, sa, sw, None, torch.bfloat16), (qa,)),
        ("int8_linear gemm", lambda x: ops.int8_linear(x, *lin), (x,)),
        ("int8_linear gemv", lambda x: ops.int8_linear(x, *lin), (x[:1].contiguous(),)),
        ("int8_linear convrot swiglu", lambda x: ops.int8_linear(x, *lin, True, 64, "swiglu"),
         (on(torch.randn(8, 512, generator=g(14)).to(torch.bfloat16)),)),
        ("int8_linear rms_norm residual",
         lambda x, r: ops.int8_linear(x, *lin, True, 256, "rms_norm", nw, 1e-6, r, bias), (x, res)),
        ("int8_linear situ gemv", lambda x: ops.int8_linear(x, *lin, input_act="situ"),
         (on(torch.randn(1, 512, generator=g(15)).to(torch.bfloat16)),)),
        ("int8_linear_modulated", lambda x: ops.int8_linear_modulated(x, mod, *lin), (x,)),
        ("w4a8_int8_linear gemm", lambda x: ops.w4a8_int8_linear(x, *w4),
         (on(torch.randn(20, 256, generator=g(22)).to(torch.bfloat16)),)),
        ("w4a8_int8_linear gemv", lambda x: ops.w4a8_int8_linear(x, *w4), (x[:3].contiguous(),)),
        ("int8_linear_rms_modulated", lambda x: ops.int8_linear_rms_modulated(x, nw, 1e-6, mod, *lin, True, 64),
         (x,)),
    ]


CASES = op_cases()


def renew(inputs, seed):
    """New contents for each input, in place (what a captured graph reads at its next replay)."""
    for k, t in enumerate(inputs):
        if t.dtype.is_floating_point:
            new = torch.randn(t.shape, generator=g(seed + k)).to(t.dtype) * 2
        elif t.dtype == torch.int8:
            new = torch.randint(-127, 128, t.shape, generator=g(seed + k), dtype=torch.int8)
        elif t.dtype == torch.uint8:
            new = torch.randint(0, 256, t.shape, generator=g(seed + k), dtype=torch.uint8)
        else:  # indices
            new = torch.randint(0, 100, t.shape, generator=g(seed + k))
        t.copy_(new)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_every_op_captures_and_replays(case):
    _, call, inputs = case
    with emulated_device():
        with emulated_capture() as graph:
            outputs = call(*inputs)
        for seed in (100, 200):
            renew(inputs, seed)
            graph.replay()
            assert_same(call(*inputs), outputs, f"replay after new inputs (seed {seed})")


def test_nothing_runs_at_capture():
    x = torch.randn(4, 64)
    with emulated_device():
        with emulated_capture() as graph:
            q, s = ops.quantize_int8_rowwise(x)
            q.zero_()  # torch's CPU work runs now; the device's kernels have not run yet
        assert not q.any()
        graph.replay()
        assert_same(ops.quantize_int8_rowwise(x), (q, s), "after the replay")


# ---- the checking modes, and what CUDA forbids ----

@pytest.mark.parametrize("mode", ["boundary", "op"])
def test_waiting_modes_refuse_inside_a_capture_and_leave_it_valid(mode):
    x = torch.randn(4, 64)
    with emulated_device():
        with emulated_capture() as graph:
            with ckc.checking(mode), pytest.raises(CaptureError) as info:
                ops.quantize_int8_rowwise(x)
            q, s = ops.quantize_int8_rowwise(x)  # mode launch, in the same capture
        graph.replay()
        assert_same(ops.quantize_int8_rowwise(x), (q, s), "the capture went on")
    message = str(info.value)
    assert message.startswith("quantize_int8_rowwise: checking mode '%s' cannot run while its stream is captured"
                              % mode), message


def test_stage_refuses_inside_a_capture():
    src = torch.randn(64)
    with emulated_device():
        with emulated_capture():
            with pytest.raises(CaptureError, match="stage: a staged copy cannot be captured"):
                ckc.stage(torch.empty_like(src), src)


def test_a_wait_inside_a_capture_fails_as_in_cuda_and_invalidates_it():
    """What the refusals above avoid: a stream query during a capture fails (a CaptureError,
    cudaErrorStreamCaptureUnsupported) and the capture's end fails too."""
    from comfy_kitchen_c import _C_emu

    with emulated_device():
        with pytest.raises(CaptureError, match="cudaErrorStreamCaptureInvalidated"):
            with emulated_capture():
                ops.quantize_int8_rowwise(torch.randn(4, 64))
                with pytest.raises(CaptureError, match="cudaErrorStreamCaptureUnsupported"):
                    _C_emu.fence_stream("a test's fence", 0, 0)


def test_relaxed_capture_allows_what_others_forbid():
    from comfy_kitchen_c import _C_emu

    with emulated_device():
        with emulated_capture("relaxed") as graph:
            q, _ = ops.quantize_int8_rowwise(torch.ones(2, 16))
            _C_emu.fence_stream("a test's fence", 0, 0)
        graph.replay()
    assert int(q[0, 0]) == 127


def run_python(code: str, tmp_path, **env) -> subprocess.CompletedProcess:
    import os

    full_env = {**os.environ, "COMFY_KITCHEN_C_FLIGHT_DIR": str(tmp_path), **env}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("refused", ["0", "1"], ids=["file", "pinned-words"])
def test_a_process_whose_first_gpu_op_is_captured(tmp_path, refused):
    """The flight record's device resources (arrival counters, the registered file or pinned
    words) are made at a process's first GPU op, which CUDA forbids during a capture: there
    the op is captured without a completion mark (its record says so) and the capture stays
    valid; ops after the first uncaptured one are marked."""
    result = run_python("""
        import torch
        from comfy_kitchen_c import ops, faults, flight
        from comfy_kitchen_c.testing import emulated_capture, emulated_device
        x = torch.randn(4, 64)
        with emulated_device():
            with emulated_capture() as graph:
                q, s = ops.quantize_int8_rowwise(x)
            graph.replay()
            assert torch.equal(q, ops.quantize_int8_rowwise(x)[0])
            with emulated_capture() as second:
                ops.quantize_int8_rowwise(x)
            second.replay()
        data = flight.load(faults.record_path())
        first, later = data["captured"][0], data["captured"][1]
        print(first["state"], "|", first["error"], "|", later["state"], data["replay"]["number"])
    """, tmp_path, COMFY_KITCHEN_C_EMU_REFUSE_HOST_MAPPING=refused)
    assert result.returncode == 0, result.stderr
    first_state, error, later = result.stdout.strip().split(" | ")
    assert first_state == "failed" and "no completion mark" in error, result.stdout
    assert later == "completed 1", result.stdout


# ---- the flight record under replay ----

A, B, C = "quantize_int8_rowwise", "dequantize_int8_simple", "quantize_and_rotate_rowwise"


def captured_block():
    """A, B and C captured into one graph, after the process's first GPU op (outside it)."""
    x = torch.randn(8, 256)
    ops.quantize_int8_rowwise(x)
    with emulated_capture() as graph:
        q, s = ops.quantize_int8_rowwise(x)
        ops.dequantize_int8_simple(q, s)
        ops.quantize_and_rotate_rowwise(x, None, 256)
    return graph


def latest_replay():
    return flight.load(faults.record_path())["replay"]


@pytest.mark.parametrize("refused", [False, True], ids=["file", "pinned-words"])
def test_every_replay_is_numbered_and_its_ops_marked(refused):
    from comfy_kitchen_c.testing import host_mapping_refused

    with emulated_device(), (host_mapping_refused() if refused else _nothing()):
        graph = captured_block()
        assert latest_replay() is None or latest_replay()["first_incomplete"] is None
        for replays in (1, 2, 3):
            graph.replay()
            replay = latest_replay()
            assert replay["ops"] == 3 and replay["first_incomplete"] is None, replay
            assert replay["last_completed"]["op"] == C
            if replays > 1:
                assert replay["number"] == number + 1
            number = replay["number"]


def test_a_replay_marks_ops_past_the_riding_limit_with_separate_marks():
    """Ops over the riding limit (csrc/diag/marks.h) are captured with a separate mark kernel
    instead: the replays still number and complete every op."""
    from comfy_kitchen_c import _C_emu
    from comfy_kitchen_c.testing import riding_mark_limit

    with emulated_device(), riding_mark_limit(0):
        riding_before = _C_emu.mark_counts()["riding"]
        graph = captured_block()
        assert _C_emu.mark_counts()["riding"] == riding_before  # none rode
        for _ in range(2):
            graph.replay()
            replay = latest_replay()
            assert replay["ops"] == 3 and replay["first_incomplete"] is None, replay
            assert replay["last_completed"]["op"] == C


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_hang_in_a_replay_is_named_with_the_last_op_completed_in_it():
    with emulated_device():
        graph = captured_block()
        graph.replay()
        with inject("hang", op=B):
            graph.replay()  # B never completes in this replay, C never runs
            replay = latest_replay()
            assert replay["first_incomplete"]["op"] == B, replay
            assert replay["last_completed"]["op"] == A, replay
            sentences = ckc.doctor.verdict(flight.load(faults.record_path()))
    assert sentences[0].startswith(f"The emulated device stopped during replay #{replay['number']} of the CUDA graph"), \
        sentences
    assert f"did not complete seq {replay['first_incomplete']['seq']} (op {B}) in that replay" in sentences[0]
    assert f"the last captured op it completed in that replay was seq {replay['last_completed']['seq']} (op {A})" \
        in sentences[0]


def test_a_fault_in_a_replay_is_blamed_on_the_captured_op():
    """The next uncaptured op's launch check finds the device's sticky fault: it is blamed
    on the captured op that did not complete in the replay, not on the op that found it."""
    with emulated_device():
        graph = captured_block()
        with inject("kernel", op=B):
            graph.replay()
            with pytest.raises(ckc.KernelFault) as info:
                ops.quantize_int8_rowwise(torch.randn(4, 64))
    assert info.value.op == B and info.value.detected_by == A
    assert "latest CUDA-graph replay #" in str(info.value)


def test_a_killed_process_leaves_the_replay_in_its_record(tmp_path):
    """A process hangs in its third replay of a captured block and is killed; `doctor --json`
    from another process names the captured op that did not complete in that replay."""
    import signal

    from conftest import sigkilled

    script = """
        import sys, time, torch
        from comfy_kitchen_c import ops
        from comfy_kitchen_c.testing import emulated_capture, emulated_device, inject
        x = torch.randn(8, 256)
        with emulated_device():
            ops.quantize_int8_rowwise(x)
            with emulated_capture() as graph:
                q, s = ops.quantize_int8_rowwise(x)
                ops.dequantize_int8_simple(q, s)
                ops.quantize_and_rotate_rowwise(x, None, 256)
            graph.replay(); graph.replay()
            with inject("hang", op="dequantize_int8_simple"):
                graph.replay()
                print("hung", flush=True)
                time.sleep(600)
    """
    import os

    env = {**os.environ, "COMFY_KITCHEN_C_FLIGHT_DIR": str(tmp_path), "COMFY_KITCHEN_C_EMU_REFUSE_HOST_MAPPING": "1"}
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE, text=True,
                            env=env, cwd=ROOT)
    with sigkilled(proc):
        assert proc.stdout.readline().strip() == "hung"
        import time

        time.sleep(0.05)  # the mirror's period (pinned words): 1 ms while replays are seen
    assert proc.returncode == -signal.SIGKILL
    record = flight.newest_record(str(tmp_path))
    doctor = subprocess.run([sys.executable, "-m", "comfy_kitchen_c", "doctor", "--json", "--record", record],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert doctor.returncode == 0, doctor.stderr
    report = json.loads(doctor.stdout)["flight"]
    replay = report["record"]["replay"]
    assert replay["number"] == 3 and replay["ops"] == 3
    assert replay["first_incomplete"]["op"] == B and replay["last_completed"]["op"] == A
    assert report["verdict"][0].startswith("The emulated device stopped during replay #3 of the CUDA graph")
