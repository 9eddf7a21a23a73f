# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures and comparison helpers.  comfy_kitchen's eager backend is the
reference for parity (the project's contract)."""
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest
import torch

# The test process's flight record (comfy_kitchen_c, csrc/diag) goes to a temporary
# folder, not the user's cache, unless the caller chose one.
os.environ.setdefault("COMFY_KITCHEN_C_FLIGHT_DIR", tempfile.mkdtemp(prefix="ckc-flight-tests-"))
# The registry's CPU speed preferences (comfy_kitchen_c/cpu_speed.py) are measured on the machine at
# first use: off in the tests, so that which backend serves a call never depends on a timing;
# tests/test_cpu_speed.py turns them on with timings it gives.  Measurements go to a temporary file.
os.environ.setdefault("COMFY_KITCHEN_C_CPU_SPEED", "off")
os.environ.setdefault("COMFY_KITCHEN_C_CPU_SPEED_CACHE",
                      os.path.join(tempfile.mkdtemp(prefix="ckc-cpu-speed-tests-"), "cpu_speed.json"))

E = pytest.importorskip("comfy_kitchen.backends.eager.quantization")


# ---- what the installed comfy_kitchen has -------------------------------------------------------
# The suites run against the newest comfy_kitchen and against the oldest the README supports
# (0.2.31, .ci/run's step old_ck_suites).  A test of something an older comfy_kitchen lacks skips,
# naming the version and what is missing; found by feature (the function, its parameter, the
# activation, the behaviour), not by version, so a backport or a removal is seen as such.
try:
    from importlib.metadata import version as _version

    CK_VERSION = _version("comfy-kitchen")
except Exception:  # noqa: BLE001 - a source checkout without metadata
    CK_VERSION = "(unknown version)"


def _ck_has(feature: str) -> bool:
    """One feature of the installed comfy_kitchen:
    "E.name": a function of the eager backend; "ck.name": of the public API;
    "E.fn(param)" / "ck.fn(param)": a parameter of that function;
    "input_act='name'": an activation eager's int8_linear accepts;
    "module:name": an attribute of a comfy_kitchen module;
    "fused split-half rope": eager's split-half RoPE adds its second product with addcmul_ (0.2.40:
    one fused multiply-add on torch's AVX2/AVX-512 and CUDA kernels, which ours follows; 0.2.31
    rounded f0 * a + f1 * b as two products and a sum);
    "saturating nvfp4 block scales": eager's quantize_nvfp4 saturates a block scale below -448
    (a negative per-tensor scale) to -448 (0.2.31 gave e4m3 NaN, tests/fuzz/README.md)."""
    import importlib
    import inspect

    import comfy_kitchen as ck

    if feature == "fused split-half rope":
        rope = importlib.import_module("comfy_kitchen.backends.eager.rope")
        return "addcmul_" in inspect.getsource(rope.apply_rope_split_half1)
    if feature == "saturating nvfp4 block scales":
        _, s = E.quantize_nvfp4(torch.full((1, 16), 3000.0), torch.tensor(-0.5))
        return not bool(s.float().isnan().any())
    if feature.startswith("input_act="):
        from comfy_kitchen.backends._activations import INPUT_ACT_TO_CODE

        return feature.split("=", 1)[1].strip("'") in INPUT_ACT_TO_CODE
    if ":" in feature:
        module, name = feature.split(":")
        return hasattr(importlib.import_module(module), name)
    owner, _, rest = feature.partition(".")
    name, _, param = rest.partition("(")
    fn = getattr({"E": E, "ck": ck}[owner], name, None)
    if fn is None or not param:
        return fn is not None
    return param.rstrip(")") in inspect.signature(fn).parameters


def ck_lacks(*features: str) -> list[str]:
    """The features (see _ck_has) the installed comfy_kitchen lacks."""
    return [f for f in features if not _ck_has(f)]


def ck_lacks_reason(missing) -> str:
    return f"comfy_kitchen {CK_VERSION} lacks {', '.join(missing)}"


def requires_ck(*features: str):
    """A skip mark for a test whose reference or call needs these features."""
    missing = ck_lacks(*features)
    return pytest.mark.skipif(bool(missing), reason=ck_lacks_reason(missing))


def skip_unless_ck(*features: str) -> None:
    """Inside a test: skip, with the reason, when a feature is missing."""
    missing = ck_lacks(*features)
    if missing:
        pytest.skip(ck_lacks_reason(missing))


# The fused forms of int8_linear (comfy_kitchen 0.2.40); 0.2.31 has none of them.
RMS_NORM_ACT = ("input_act='rms_norm'", "E.int8_linear(input_act_weight)")
RESIDUAL = ("E.int8_linear(residual)",)
MODULATED = ("E.int8_linear_modulated", "E.int8_linear_rms_modulated")


def pytest_report_header(config):
    """The emulated device's schedule (csrc/emu/emu_runtime.cpp), so that a failure under a
    shuffled one can be replayed with the same seed."""
    schedule = os.environ.get("COMFY_KITCHEN_C_EMU_SCHEDULE", "order")
    return f"emulated device schedule: {schedule} (COMFY_KITCHEN_C_EMU_SCHEDULE)"

FLOAT_DTYPES = [torch.float32, torch.float16, torch.bfloat16]
DTYPE_IDS = ["f32", "f16", "bf16"]

# nvcc for the tests that build with the CUDA toolkit (no GPU needed): on PATH, else where
# the toolkit installs by default; None without a toolkit.
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if Path("/usr/local/cuda/bin/nvcc").exists() else None)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that reaches the emulated device in a build without it (_C_emu is built
    only for development, see setup.py) is skipped, with the reason, not failed."""
    from comfy_kitchen_c.testing import EmulatedDeviceMissing

    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and call.excinfo.errisinstance(EmulatedDeviceMissing):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {call.excinfo.value}")


@pytest.fixture
def eager():
    return E


@pytest.fixture
def fresh_capabilities():
    """comfy_kitchen_c's per-process cache of compute capabilities emptied before and after the
    test, for tests that monkeypatch torch.cuda.get_device_capability."""
    from comfy_kitchen_c import ops

    ops.compute_capability.cache_clear()
    yield
    ops.compute_capability.cache_clear()


@pytest.fixture
def activated():
    """comfy_kitchen_c activated (first in comfy_kitchen's registry) for one test; the priority
    before it is restored afterwards."""
    from comfy_kitchen.registry import registry

    import comfy_kitchen_c

    with saved_priority(registry):
        comfy_kitchen_c.activate()
        yield


@pytest.fixture
def speed_rules_off():
    """The registry's CPU speed rules (comfy_kitchen_c/cpu_speed.py: calls eager runs faster, most of
    them small) switched off for one test, for tests of routing and parity at toy shapes: every
    valid call is then served by "c" (the tests' default, COMFY_KITCHEN_C_CPU_SPEED=off, made sure
    of).  tests/test_cpu_speed.py tests the rules themselves."""
    from comfy_kitchen_c import cpu_speed

    cpu_speed.configure(mode="off")
    yield
    cpu_speed.configure()


@pytest.fixture
def measured_speed(monkeypatch, tmp_path):
    """The registry's CPU speed rules on, measured with timings the test gives instead of the
    clock: call the fixture's value with ratio(op, size) -> eager time / ours (below
    cpu_speed.MARGIN eager serves that size), before the first call it should decide.  The
    measurements go to a file of the test's own (returned by the call)."""
    from comfy_kitchen_c import cpu_speed

    ratio = {"of": lambda op, size: 1.0}
    timed = []

    def time_pair(ours, eager, kwargs, rounds=cpu_speed.ROUNDS):
        probe = cpu_speed.PROBES[ours.__name__]
        size = probe.size(kwargs, kwargs[probe.main])
        timed.append((probe.op, size))
        return ratio["of"](probe.op, size), 1.0

    monkeypatch.setattr(cpu_speed, "time_pair", time_pair)
    files = iter(range(1000))

    def use(of=None, cache_file=None):
        if of is not None:
            ratio["of"] = of
        path = cache_file or str(tmp_path / f"cpu_speed{next(files)}.json")
        cpu_speed.configure(mode="measure", cache_file=path)
        return path

    use.timed = timed
    use()
    yield use
    cpu_speed.configure()


@pytest.fixture
def c_settings(monkeypatch):
    """put(HANG_MS="50", ...): sets those COMFY_KITCHEN_C_* variables for the test and puts them in
    force (settings.reload(): C takes its settings in one call, never from the environment); the
    process's own settings are back in force after the test."""
    from comfy_kitchen_c import settings

    def put(**values):
        for name, value in values.items():
            monkeypatch.setenv(settings.PREFIX + name, value)
        settings.reload()

    yield put
    monkeypatch.undo()
    settings.reload()


@contextlib.contextmanager
def saved_priority(registry):
    """comfy_kitchen's backend priority and the place "c" keeps in it (backend.py), restored
    afterwards: a plain set_priority of the old list would give "c" its kept place back."""
    from comfy_kitchen_c import backend

    saved, place = backend.priority(registry), backend._place
    try:
        yield
    finally:
        backend._place = place
        registry.set_priority(saved)


def kernels_of(device: str):
    """The kernels a parity test runs: "cpu" (the CPU kernels) or "emulated" (the GPU kernels on
    the emulated device, a context manager)."""
    if device == "cpu":
        return contextlib.nullcontext()
    if sys.platform == "win32":
        pytest.skip("the emulated device is not built on Windows yet")
    from comfy_kitchen_c.testing import emulated_device
    return emulated_device()


def assert_bitwise_equal(ours: torch.Tensor, ref: torch.Tensor, what: str):
    """Same dtype, shape and bits (NaN payloads included for float outputs)."""
    assert ours.dtype == ref.dtype, f"{what}: dtype {ours.dtype} != {ref.dtype}"
    assert ours.shape == ref.shape, f"{what}: shape {tuple(ours.shape)} != {tuple(ref.shape)}"
    if ours.dtype.is_floating_point:
        same = (ours == ref) | (torch.isnan(ours) & torch.isnan(ref))
        assert bool(same.all()), f"{what}: {int((~same).sum())} of {ours.numel()} elements differ"
    else:
        assert torch.equal(ours, ref), f"{what}: {int((ours != ref).sum())} of {ours.numel()} elements differ"



def tensors(value) -> list[torch.Tensor]:
    """The tensors of an op's result (one tensor, or a tuple that may hold other values)."""
    items = value if isinstance(value, tuple) else (value,)
    return [t for t in items if isinstance(t, torch.Tensor)]


def assert_same(cpu, gpu, what: str):
    """The CPU path's and a GPU path's results are the same, bit for bit (FP8 compared as bytes)."""
    cpu, gpu = tensors(cpu), tensors(gpu)
    assert len(cpu) == len(gpu), what
    for k, (a, b) in enumerate(zip(cpu, gpu)):
        if a.dtype == torch.float8_e4m3fn:
            a, b = a.view(torch.uint8), b.view(torch.uint8)
        assert_bitwise_equal(b, a, f"{what} output {k}")

# Rotated int8 codes: our fast Walsh-Hadamard transform sums in a different order
# than eager's matmul, so a rotated value can land on the other side of a rounding
# boundary (of the input dtype, then of the int8 grid).  The issue bounds this:
# codes off by at most 1 on at most 0.1% of elements, scales within 1e-5 relative.
ROTATED_CODE_MAX_DIFF = 1
ROTATED_CODE_MAX_FRACTION = 1e-3
ROTATED_SCALE_RTOL = 1e-5


def assert_rotated_quant_close(q, s, q_ref, s_ref, what: str):
    assert q.shape == q_ref.shape and s.shape == s_ref.shape, what
    finite = torch.isfinite(s_ref)
    torch.testing.assert_close(s[finite], s_ref[finite], rtol=ROTATED_SCALE_RTOL, atol=0, msg=what)
    assert torch.equal(torch.isfinite(s), finite), f"{what}: non-finite scales differ"
    rows = finite.reshape(-1)
    d = (q.reshape(-1, q.shape[-1])[rows].int() - q_ref.reshape(-1, q.shape[-1])[rows].int()).abs()
    if d.numel():
        assert int(d.max()) <= ROTATED_CODE_MAX_DIFF, f"{what}: code difference {int(d.max())}"
        frac = float((d > 0).float().mean())
        assert frac <= ROTATED_CODE_MAX_FRACTION, f"{what}: {frac:.4%} of codes differ"


def ulp(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps


def assert_rotation_close(ours: torch.Tensor, ref: torch.Tensor, what: str):
    """Rotations in fp32 summed in another order: within one unit of the output dtype's
    last place of the group's scale (each output sums G products of one row)."""
    assert ours.dtype == ref.dtype and ours.shape == ref.shape, what
    o, r = ours.float(), ref.float()
    row_max = r.abs().amax(dim=-1, keepdim=True)
    # float32 outputs: reordering G terms of size <= row_max/sqrt(G) moves the sum by a few ulps.
    tol = row_max * (ulp(ours.dtype) if ours.dtype != torch.float32 else 8 * ulp(torch.float32))
    bad = (o - r).abs() > tol
    assert not bool(bad.any()), f"{what}: {int(bad.sum())} elements beyond 1 ulp of the row's scale"


@contextlib.contextmanager
def sigkilled(proc):
    """Runs the block while proc lives, then kills proc with SIGKILL, as a user ends a hung
    process (also when the block fails), and reaps it."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)


# ---- under the stand-in CUDA driver (tests/cuda_standin/run.py) ----
# Every test holds the driver path to the CUDA driver's rules: a test after which the stand-in
# logged a refusal (a call a real driver refuses, or one that breaks on it) fails, naming it.
# Tests that provoke refusals on purpose read them (comfy_kitchen_c.standin.violations()).
if os.environ.get("CKC_TEST_DEVICE") == "standin":
    @pytest.fixture(autouse=True)
    def _no_driver_rule_broken():
        from comfy_kitchen_c import standin
        standin.violations()
        yield
        refused = standin.violations()
        assert not refused, "the stand-in CUDA driver refused: " + "; ".join(refused)
