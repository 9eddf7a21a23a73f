# SPDX-License-Identifier: Apache-2.0
"""Every op on a real CUDA GPU against the CPU path of the same op, bit for bit.

The checks of test_emulated_device.py, on CUDA tensors: inputs are built on the CPU
(tests/inputs.py), moved to the GPU, the op runs there and its results are moved back
and compared with the CPU path's.  The GPU kernels do the CPU kernels' arithmetic in
the same order, so any difference is a bug.  Stochastic rounding: for a seed, torch
draws other noise on a GPU than on the CPU, so the CPU reference runs with the noise
the GPU path draws (fixture ``gpu_noise``).

Beyond the emulated device's checks: results are on the caller's current stream,
misaligned inputs on the GPU, grids of more than 65535 rows, dispatch of CUDA tensors
to backend "c" through comfy_kitchen, and (with two GPUs) the device guard.

Tests on small shapes have "small" in their id: ``-k small`` is the subset that
benchmarks/gpu_check.py runs under compute-sanitizer memcheck.

Everything is skipped, with the reason, without a CUDA GPU or when comfy_kitchen_c
was built without CUDA."""
import pytest
import torch

from comfy_kitchen.float_utils import swap_nibbles

from comfy_kitchen_c import _C, ops
from conftest import DTYPE_IDS, FLOAT_DTYPES, assert_bitwise_equal, assert_rotated_quant_close, assert_same, tensors
from inputs import CASES


def _skip_reason() -> str | None:
    if not torch.cuda.is_available():
        return "needs a CUDA GPU: torch.cuda.is_available() is False"
    if not getattr(_C, "HAS_CUDA", 0):
        return ("comfy_kitchen_c._C was built without CUDA (HAS_CUDA is 0: nvcc was not found at build "
                "time, or COMFY_KITCHEN_C_NO_CUDA=1)")
    return None


SKIP_REASON = _skip_reason()
pytestmark = pytest.mark.skipif(SKIP_REASON is not None, reason=SKIP_REASON or "")

# Cycles torch.cuda._sleep spins a side stream for (tens of ms on any current GPU).
SPIN_CYCLES = 100_000_000


# ---- helpers --------------------------------------------------------------------------------

@pytest.fixture
def gpu() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device())


@pytest.fixture(autouse=True)
def gpu_noise(monkeypatch):
    """The CPU path draws its stochastic-rounding noise on the GPU (then copies it back),
    so that its results can be compared bit for bit with the GPU path's."""
    draw = ops._noise

    def noise(x, seed):
        if x.is_cuda or seed <= 0:
            return draw(x, seed)
        return draw(x.cuda(), seed).cpu()

    monkeypatch.setattr(ops, "_noise", noise)


def moved(value, device):
    """value with every tensor in it (alone or in a tuple) moved to device."""
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, tuple):
        return tuple(moved(v, device) for v in value)
    return value


def run_both(fn, cpu_args: tuple, gpu_args: tuple, device: torch.device):
    """(CPU path result, GPU path result moved to the CPU); the GPU results must be on device."""
    cpu = fn(*cpu_args)
    out = fn(*gpu_args)
    for t in tensors(out):
        assert t.device == device, f"{fn.__name__}: result on {t.device}, expected {device}"
    return cpu, moved(out, "cpu")


def on_both(fn, *args, device: torch.device):
    """fn on args (CPU tensors) and on copies of them on device."""
    return run_both(fn, args, moved(args, device), device)


def nvfp4_scale(x: torch.Tensor) -> torch.Tensor:
    return (x.float().abs().amax() / 2688).clamp(min=1e-12).reshape(())


def one_call_per_op() -> dict:
    """{name: (op, CPU args)}: every op (and stochastic rounding) once, on small inputs."""
    x = CASES["outliers"](48, 1024, torch.bfloat16)
    q, s = ops.quantize_int8_rowwise(x)
    qr, sr = ops.quantize_int8_convrot_weight(x, 256)
    pts = nvfp4_scale(x)
    qx, sx = ops.quantize_nvfp4(x, pts)
    return {
        "quantize_int8_rowwise": (ops.quantize_int8_rowwise, (x,)),
        "quantize_int8_rowwise_stochastic": (ops.quantize_int8_rowwise, (x, 7)),
        "quantize_int8_tensorwise": (ops.quantize_int8_tensorwise, (x,)),
        "quantize_and_rotate_rowwise": (ops.quantize_and_rotate_rowwise, (x, None, 256)),
        "quantize_int8_convrot_weight": (ops.quantize_int8_convrot_weight, (x, 256)),
        "rotate_int8_convrot_weight": (ops.rotate_int8_convrot_weight, (x, 256)),
        "dequantize_int8_simple": (ops.dequantize_int8_simple, (q, s)),
        "dequantize_int8_simple_dtype": (ops.dequantize_int8_simple_dtype, (q, s, 2)),
        "dequantize_int8_convrot_weight": (ops.dequantize_int8_convrot_weight, (qr, sr, 256)),
        "dequantize_int8_convrot_weight_dtype": (ops.dequantize_int8_convrot_weight_dtype, (qr, sr, 256, 1)),
        "quantize_nvfp4": (ops.quantize_nvfp4, (x, pts)),
        "dequantize_nvfp4": (ops.dequantize_nvfp4, (qx, pts, sx, torch.bfloat16)),
        "quantize_and_rotate_nvfp4": (ops.quantize_and_rotate_nvfp4, (x, pts * 4, 16)),
    }


OP_NAMES = list(one_call_per_op())


# ---- int8 quantization ----------------------------------------------------------------------

# (rows, K): one row, K equal to the group, K not a multiple of 16, a row longer
# than one segment of registers (the two-pass path), and a typical shape.
ROW_SHAPES = [pytest.param(1, 256, id="small-1x256"), pytest.param(5, 1024, id="small-5x1024"),
              pytest.param(3, 100, id="small-3x100"), pytest.param(2, 20480, id="2x20480"),
              pytest.param(40, 3072, id="40x3072")]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("rows,k", ROW_SHAPES)
def test_rowwise_quantization(gpu, dtype, case, rows, k):
    x = CASES[case](rows, k, dtype)
    assert_same(*on_both(ops.quantize_int8_rowwise, x, device=gpu), "rowwise")
    assert_same(*on_both(ops.quantize_int8_rowwise, x, 11, device=gpu), "rowwise stochastic")


# (rows, K or None for K = group, compare with eager too)
ROTATED_SHAPES = [pytest.param(1, None, False, id="small-1xG"), pytest.param(3, 2048, False, id="3x2048"),
                  pytest.param(2, 20480, True, id="2x20480")]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("group", [4, 16, 64, 256, 1024])
@pytest.mark.parametrize("rows,k,vs_eager", ROTATED_SHAPES)
def test_rotated_quantization(eager, gpu, dtype, case, group, rows, k, vs_eager):
    x = CASES[case](rows, k or group, dtype)
    what = f"G={group} {tuple(x.shape)}"
    cpu, out = on_both(ops.quantize_int8_convrot_weight, x, group, device=gpu)
    assert_same(cpu, out, f"convrot {what}")
    assert_same(*on_both(ops.quantize_and_rotate_rowwise, x, None, group, device=gpu), f"rotate+quantize {what}")
    assert_same(*on_both(ops.rotate_int8_convrot_weight, x, group, device=gpu), f"rotate {what}")
    if vs_eager:
        assert_rotated_quant_close(*out, *eager.quantize_int8_convrot_weight(x, group), f"vs eager {what}")


def test_rotated_quantization_small_keeps_leading_dims_and_stochastic_rounding(gpu):
    x = CASES["outliers"](24, 512, torch.bfloat16).reshape(2, 12, 512)
    assert_same(*on_both(ops.quantize_and_rotate_rowwise, x, None, 256, 5, device=gpu), "3-D stochastic")


# The large shape takes many blocks of the tensor-wide absmax reduction.
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("rows,k", [pytest.param(37, 300, id="small-37x300"), pytest.param(1024, 5120, id="1024x5120")])
def test_tensorwise_quantization(gpu, dtype, case, rows, k):
    x = CASES[case](rows, k, dtype)
    for scale in (None, 0.07, torch.tensor(0.07)):
        assert_same(*on_both(ops.quantize_int8_tensorwise, x, scale, device=gpu), f"tensorwise {scale}")
    assert_same(*on_both(ops.quantize_int8_tensorwise, x, None, 3, device=gpu), "tensorwise stochastic")


# ---- int8 dequantization --------------------------------------------------------------------

@pytest.mark.parametrize("group", [0, 4, 16, 64, 256, 1024])
@pytest.mark.parametrize("code", [0, 1, 2])
def test_dequantization_small(eager, gpu, group, code):
    q, s = ops.quantize_int8_rowwise(CASES["outliers"](9, 2048, torch.bfloat16))
    for scale in (s, s[0, 0].clone(), s.expand(q.shape).contiguous()):
        if group:
            cpu, out = on_both(ops.dequantize_int8_convrot_weight_dtype, q, scale, group, code, device=gpu)
        else:
            cpu, out = on_both(ops.dequantize_int8_simple_dtype, q, scale, code, device=gpu)
        assert_same(cpu, out, f"dequant G={group} code={code}")
    if not group:
        assert_bitwise_equal(out, eager.dequantize_int8_simple_dtype(q, scale, code), "vs eager")


# ---- NVFP4 ----------------------------------------------------------------------------------

# aligned, rows not a multiple of 16, pad_16x (33, 65), and odd tile counts.
NVFP4_SHAPES = [pytest.param(256, 512, False, id="256x512"), pytest.param(129, 128, False, id="small-129x128"),
                pytest.param(33, 65, True, id="small-33x65-pad"), pytest.param(16, 16, False, id="small-16x16"),
                pytest.param(48, 80, False, id="48x80"), pytest.param(16, 4080, False, id="16x4080"),
                pytest.param(1, 7, True, id="small-1x7-pad")]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("rows,cols,pad", NVFP4_SHAPES)
def test_nvfp4(eager, gpu, dtype, case, rows, cols, pad):
    x = CASES[case](rows, cols, dtype)
    pts = nvfp4_scale(x)
    for hi_first in (True, False):
        cpu, out = on_both(ops.quantize_nvfp4, x, pts, 0.0, pad, hi_first, device=gpu)
        assert_same(cpu, out, f"quantize hi_first={hi_first}")
        qx, sx = cpu
        for out_dtype in FLOAT_DTYPES:
            assert_same(*on_both(ops.dequantize_nvfp4, qx, pts, sx, out_dtype, hi_first, device=gpu),
                        f"dequantize {out_dtype}")
    if case == "normal":
        qx_ref, sx_ref = eager.quantize_nvfp4(x, pts, 0.0, pad)
        assert_bitwise_equal(out[0], swap_nibbles(qx_ref), "vs eager codes (hi_first=False)")
        assert_bitwise_equal(out[1].view(torch.uint8), sx_ref.view(torch.uint8), "vs eager scales")


# ---- NVFP4 with rotation (quantize_and_rotate_nvfp4, nvfp4_linear) ----------------------------

# (rows, groups per row, pad_16x), as in test_nvfp4_rotate.py: padded rows, an odd tile count
# (48 x 5 groups of 16), two swizzle tiles of rows.
NVFP4_ROTATE_SHAPES = [pytest.param(33, 1, True, id="small-33-pad"), pytest.param(48, 5, False, id="small-48"),
                       pytest.param(300, 12, True, id="300-pad")]


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("group", [16, 64, 256])
@pytest.mark.parametrize("rows,groups,pad", NVFP4_ROTATE_SHAPES)
def test_quantize_and_rotate_nvfp4(gpu, dtype, case, group, rows, groups, pad):
    x = CASES[case](rows, groups * group, dtype)
    pts = nvfp4_scale(x) * group**0.5
    for hi_first in (True, False):
        assert_same(*on_both(ops.quantize_and_rotate_nvfp4, x, pts, group, pad, hi_first, device=gpu),
                    f"hi_first={hi_first}")


@pytest.mark.parametrize("group", [0, 16, 256])
def test_nvfp4_linear_small(gpu, group):
    """The quantized operands are the CPU path's bit for bit (above), so the GPU result obeys the
    CPU result's bound: float32 accumulation of the exact products (test_nvfp4_rotate.py)."""
    from test_nvfp4_rotate import assert_matmul_exact, quantized_weight
    x = CASES["outliers"](2 * 9, 512, torch.bfloat16).reshape(2, 9, 512)
    qw, pts, sw = quantized_weight(CASES["normal"](48, 512, torch.bfloat16, seed=7), group)
    bias = torch.linspace(-1, 1, 48).to(torch.bfloat16)
    y = ops.nvfp4_linear(*moved((x, qw, pts, sw, bias), gpu), None, bool(group), group or 16)
    assert y.device == gpu and y.shape == (2, 9, 48)
    assert_matmul_exact(y.cpu(), x, qw, pts, sw, bias, group)


# ---- GPU specifics --------------------------------------------------------------------------

def misaligned(t: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A copy of t on device whose data starts one element past an allocation (not 16-byte aligned)."""
    base = torch.empty(t.numel() + 1, dtype=t.dtype, device=device)
    view = base[1:].view(t.shape)
    view.copy_(t)
    assert view.data_ptr() % 16 != 0
    return view


def test_misaligned_inputs_small(gpu):
    """Vector loads would be misaligned: the kernels must take their scalar path."""
    x = CASES["outliers"](3, 512, torch.bfloat16)
    q, s = ops.quantize_int8_rowwise(x)
    pts = nvfp4_scale(x)
    x_gpu, q_gpu, pts_gpu, s_gpu = misaligned(x, gpu), misaligned(q, gpu), pts.to(gpu), s.to(gpu)
    calls = [(ops.quantize_and_rotate_rowwise, (x, None, 256), (x_gpu, None, 256)),
             (ops.quantize_int8_rowwise, (x,), (x_gpu,)),
             (ops.rotate_int8_convrot_weight, (x, 256), (x_gpu, 256)),
             (ops.quantize_nvfp4, (x, pts), (x_gpu, pts_gpu)),
             (ops.quantize_and_rotate_nvfp4, (x, pts, 64), (x_gpu, pts_gpu, 64)),
             (ops.dequantize_int8_simple_dtype, (q, s, 2), (q_gpu, s_gpu, 2)),
             (ops.dequantize_int8_convrot_weight, (q, s, 64), (q_gpu, s_gpu, 64))]
    # FP4 codes one byte past an allocation: the dequantizer's 8-byte loads would be misaligned
    qx, sx = ops.quantize_nvfp4(x, pts)
    calls.append((ops.dequantize_nvfp4, (qx, pts, sx), (misaligned(qx, gpu), pts_gpu, sx.to(gpu))))
    for fn, cpu_args, gpu_args in calls:
        assert_same(*run_both(fn, cpu_args, gpu_args, gpu), f"misaligned {fn.__name__}")


def written_late(stream: torch.cuda.Stream, args: tuple) -> tuple:
    """args (CPU tensors) as zero-filled buffers on stream's GPU that stream fills with the
    tensors' values only after spinning for tens of milliseconds."""
    sources = moved(args, stream.device)
    buffers = tuple(torch.zeros_like(a) if isinstance(a, torch.Tensor) else a for a in sources)
    stream.wait_stream(torch.cuda.current_stream(stream.device))
    with torch.cuda.stream(stream):
        torch.cuda._sleep(SPIN_CYCLES)
        for buf, src in zip(buffers, sources):
            if isinstance(buf, torch.Tensor):
                buf.copy_(src)
                src.record_stream(stream)  # freed now, but read on stream later
    return buffers


@pytest.mark.parametrize("name", OP_NAMES)
def test_results_on_current_stream_small(gpu, name):
    """Each op runs on torch's current stream: on a side stream whose inputs are written late
    on that same stream, a kernel launched on any other stream would read zeros."""
    fn, args = one_call_per_op()[name]
    side = torch.cuda.Stream(gpu)
    gpu_args = written_late(side, args)
    with torch.cuda.stream(side):
        out = fn(*gpu_args)
    side.synchronize()
    assert_same(fn(*args), moved(out, "cpu"), f"{name} on a side stream")


def test_many_rows():
    """More rows than a grid's y dimension holds (65535), and more elements than one pass of
    the grid-stride loops."""
    device = torch.device("cuda", torch.cuda.current_device())
    x = CASES["outliers"](70_000, 512, torch.bfloat16)
    q, s = ops.quantize_int8_rowwise(x)
    pts = nvfp4_scale(x)
    calls = [(ops.quantize_int8_rowwise, (x,)), (ops.quantize_and_rotate_rowwise, (x, None, 256)),
             (ops.quantize_int8_tensorwise, (x,)), (ops.dequantize_int8_simple_dtype, (q, s, 2)),
             (ops.dequantize_int8_convrot_weight, (q, s, 256)), (ops.quantize_nvfp4, (x, pts))]
    for fn, args in calls:
        assert_same(*on_both(fn, *args, device=device), f"{fn.__name__} {tuple(x.shape)}")


def test_comfy_kitchen_dispatches_cuda_tensors_to_c_small(gpu, monkeypatch):
    """With backend "c" selected, comfy_kitchen serves a CUDA tensor with our CUDA kernels."""
    import comfy_kitchen as ck

    calls = []
    real = _C.quantize_int8_rowwise

    def spy(op, *args):
        calls.append(op)
        return real(op, *args)

    monkeypatch.setattr(_C, "quantize_int8_rowwise", spy)
    x = CASES["normal"](8, 512, torch.bfloat16)
    with ck.use_backend("c"):
        out = ck.quantize_int8_rowwise(x.to(gpu))
    assert calls == ["quantize_int8_rowwise"]
    assert_same(ops.quantize_int8_rowwise(x), moved(out, "cpu"), "via comfy_kitchen")


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
@pytest.mark.parametrize("name", OP_NAMES)
def test_device_guard_second_gpu_small(name):
    """Inputs on cuda:1 while cuda:0 is current: the kernels run on the inputs' GPU (on its
    current stream), results land there, and the current device is left as it was."""
    fn, args = one_call_per_op()[name]
    second = torch.device("cuda", 1)
    with torch.cuda.device(0):
        cpu, out = on_both(fn, *args, device=second)
        assert torch.cuda.current_device() == 0
    assert_same(cpu, out, f"{name} on cuda:1")


# ---- completion marks riding on the ops' last kernels (csrc/diag/marks.c, kernels/done_mark.cuh) ----

def test_completion_marks_ride_on_the_ops_kernels_small():
    """On the GPU the converted ops queue no separate mark kernel, and their records complete
    (the last block of the last kernel wrote the seq into host memory)."""
    import comfy_kitchen_c as ckc
    from comfy_kitchen_c import faults, flight

    gpu = torch.device("cuda")
    x = CASES["normal"](37, 512, torch.bfloat16).to(gpu)
    with ckc.checking("launch"):
        ops.quantize_int8_rowwise(x[:1])  # opens the ring, first use of the arrival counters
        torch.cuda.synchronize()
        before = _C.mark_counts()
        q, s = ops.quantize_int8_rowwise(x)
        ops.dequantize_int8_simple(q, s)
        ops.quantize_nvfp4(x.float(), torch.tensor(0.05, device=gpu))
        after = _C.mark_counts()
    torch.cuda.synchronize()
    assert after == {"riding": before["riding"] + 3, "separate": before["separate"]}
    records = flight.load(faults.record_path())["records"][-3:]
    assert [r["op"] for r in records] == ["quantize_int8_rowwise", "dequantize_int8_simple", "quantize_nvfp4"]
    assert [r["state"] for r in records] == ["completed"] * 3


# ---- CUDA graphs: every op captured with torch.cuda.graph and replayed (tests/test_capture.py
# runs the same cases on the emulated device) ------------------------------------------------

def _capture_cases(device):
    from test_capture import op_cases

    return op_cases(device)


CAPTURE_CASES = [name for name, _, _ in _capture_cases("cpu")] if SKIP_REASON is None else ["none"]


def _warm_up(call, inputs):
    """One call on a side stream before the capture, as torch's documentation (and ComfyUI,
    GRAPH_WARMED_MODULES) do: what the flight record and cuBLASLt need is set up there."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        call(*inputs)
    torch.cuda.current_stream().wait_stream(side)


@pytest.mark.parametrize("index", range(len(CAPTURE_CASES)), ids=[f"small-{n}" for n in CAPTURE_CASES])
def test_every_op_captures_and_replays_small(gpu, index):
    from test_capture import renew

    name, call, inputs = _capture_cases(gpu)[index]
    _warm_up(call, inputs)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        outputs = call(*inputs)
    for seed in (100, 200):
        renew(inputs, seed)
        graph.replay()
        assert_same(moved(call(*inputs), "cpu"), moved(outputs, "cpu"), f"{name}: replay after new inputs")


@pytest.mark.parametrize("mode", ["boundary", "op"])
def test_waiting_modes_refuse_inside_a_capture_small(gpu, mode):
    import comfy_kitchen_c as ckc

    x = torch.randn(8, 256, device=gpu)
    _warm_up(ops.quantize_int8_rowwise, (x,))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        with ckc.checking(mode), pytest.raises(ckc.CaptureError, match=f"checking mode '{mode}' cannot run"):
            ops.quantize_int8_rowwise(x)
        q, s = ops.quantize_int8_rowwise(x)  # the capture is still valid
    graph.replay()
    assert_same(moved(ops.quantize_int8_rowwise(x), "cpu"), moved((q, s), "cpu"), "after the refusal")


def test_the_flight_record_numbers_replays_small(gpu):
    from comfy_kitchen_c import faults, flight

    x = torch.randn(8, 256, device=gpu)
    _warm_up(ops.quantize_int8_rowwise, (x,))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        q, s = ops.quantize_int8_rowwise(x)
        ops.dequantize_int8_simple(q, s)
    numbers = []
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        replay = flight.load(faults.record_path())["replay"]
        assert replay["ops"] == 2 and replay["first_incomplete"] is None, replay
        numbers.append(replay["number"])
    assert numbers[1] == numbers[0] + 1 and numbers[2] == numbers[1] + 1
