# SPDX-License-Identifier: Apache-2.0
"""`_C`'s real driver path (gpu/cuda_driver.c, runtime_cuda.c, the launchers, blas_cublaslt.c,
the fault checks above them) held to the CUDA driver's rules by the stand-in driver
(tests/cuda_standin): the problems a reading of that path against the driver API found, each
shown by a scenario (tests/standin_scenarios.py) run in a process of its own; and the stand-in's
own rules, each refusing what a real driver refuses.

The parity suites run through the stand-in too: tests/cuda_standin/run.py (CI's step standin)."""
from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from comfy_kitchen_c import _C

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("standin_run", ROOT / "tests" / "cuda_standin" / "run.py")
run_py = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run_py)

pytestmark = [
    pytest.mark.skipif(not _C.HAS_CUDA, reason="the stand-in runs the CUDA build's driver path"),
    pytest.mark.skipif(sys.platform != "linux" or shutil.which("gcc") is None, reason="builds a Linux library with gcc"),
    pytest.mark.skipif(importlib.util.find_spec("comfy_kitchen_c._C_emu") is None,
                       reason="the stand-in runs kernels on the emulated device (_C_emu)"),
]


@pytest.fixture(scope="module")
def library():
    return run_py.build()


def scenario(library, name: str, gpus: str = "12.0,12.0", driver: int = 13000) -> dict:
    env = run_py.environment(library, gpus, driver)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))  # this checkout's package
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "standin_scenarios.py"), name], cwd=ROOT / "tests",
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


# ---- what the reading found, each held by a scenario ----

def test_a_sticky_fault_is_reported_as_the_fault_not_as_a_capture(library):
    r = scenario(library, "sticky_fault_then_checked_op")
    assert r["type"] in ("KernelFault", "StagingFault"), r
    assert r["op"] == "quantize_int8_rowwise" and r["detected_by"] == "dequantize_int8_simple", r
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in r["message"], r
    assert r["refused"] == [], r


def test_a_destroyed_stream_is_named_not_taken_for_a_capture(library):
    r = scenario(library, "destroyed_stream")
    assert r["type"] not in (None, "CaptureError"), r
    # found by the capture question itself, not by a replay-begin kernel queued as if captured
    assert "cannot be used" in r["message"] and "cuStreamGetCaptureInfo: CUDA_ERROR_INVALID_HANDLE" in r["message"], r
    assert any("destroyed" in line for line in r["refused"]), r


def test_the_gemm_workspace_comes_from_torch_not_the_driver(library):
    r = scenario(library, "gemm_with_the_driver_out_of_memory")
    assert r["type"] is None and r["equal"], r
    assert r["refused"] == [], r


def test_the_gemm_workspace_does_not_grow_with_streams(library):
    r = scenario(library, "gemm_on_many_streams")
    assert r["grew"] == 0 and r["refused"] == [], r


def test_the_first_op_never_blocks_on_torchs_default_stream(library):
    r = scenario(library, "first_op_behind_a_hung_default_stream")
    assert r["type"] is None and r["refused"] == [], r


def test_the_first_op_leaves_another_threads_capture_intact(library):
    r = scenario(library, "first_op_beside_a_global_capture")
    assert r["type"] is None and r["capture_end"] == 0 and r["refused"] == [], r


def test_fence_on_a_thread_without_a_context_sees_the_hang(library):
    r = scenario(library, "fence_on_a_thread_without_a_context")
    assert r["type"] == "HangSuspected", r
    assert r["refused"] == [], r


def test_a_fault_met_inside_cublaslt_is_the_device_fault(library):
    r = scenario(library, "gemm_after_a_kernel_fault")
    assert r["type"] == "KernelFault" and r["op"] == "int8_linear", r
    assert "CUDA_ERROR_ILLEGAL_ADDRESS" in r["message"], r


def test_cublaslts_own_failure_stays_cublaslts(library):
    r = scenario(library, "gemm_failing_on_its_own")
    assert r["type"] == "KitchenError" or r["type"] == "RuntimeError", r
    assert "CUBLAS_STATUS_EXECUTION_FAILED" in r["message"], r


def test_the_first_gemm_inside_a_capture_keeps_the_capture(library):
    r = scenario(library, "first_gemm_inside_a_capture")
    assert r["type"] is None and r["capture_end"] == 0 and r["refused"] == [], r


def test_an_op_leaves_the_threads_current_context_as_it_found_it(library):
    r = scenario(library, "an_op_leaves_the_threads_context_as_it_found_it")
    assert r["type"] is None and r["before"] == 0 and r["after"] == 0 and r["refused"] == [], r


# ---- drivers and architectures ----

def images() -> list:
    return _C.kernel_images()


def built_archs() -> set:
    return {arch for _, kind, arch, *_ in images() if kind == "sass"}


@pytest.mark.parametrize("cc,driver", [(120, 12080), (120, 13000)])
def test_a_gpu_this_build_serves_runs_on_the_drivers_it_needs(library, cc, driver):
    """The oldest driver the build needs on a GPU (from its fatbins) runs an op there."""
    if cc not in built_archs():
        pytest.skip(f"this build has no SASS for {cc / 10}")
    need = _C.kernels_driver(cc)
    assert need and need <= driver, (cc, need)
    r = scenario(library, "an_op_on_this_driver", gpus=f"{cc // 10}.{cc % 10}", driver=driver)
    assert r["type"] is None and r["refused"] == [], r


def test_an_older_driver_than_the_build_needs_is_refused_with_the_need_named(library):
    cc = max(built_archs())
    need = _C.kernels_driver(cc)
    old = need - 10 if need % 1000 else need - 920
    r = scenario(library, "an_op_on_this_driver", gpus=f"{cc // 10}.{cc % 10}", driver=old)
    assert r["type"] is not None, r
    assert f"CUDA {need // 1000}.{need % 1000 // 10}" in r["message"], r


def test_a_gpu_without_code_is_refused_naming_what_the_build_serves(library):
    r = scenario(library, "an_op_on_this_driver", gpus="5.0", driver=13000)
    assert r["type"] is not None and "no code for compute capability 5.0" in r["message"], r


# ---- the stand-in's verdict on the real fatbins against the build's own prediction ----

CCS = [75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121]
DRIVERS = [12000, 12020, 12040, 12080, 12090, 13000]


@pytest.fixture(scope="module")
def verdict(library):
    """verdict(module, cc, driver): the CUresult the stand-in's image reader gives when loading
    fatbin `module` for a GPU of cc under the driver (0: it loads)."""
    lib = ctypes.CDLL(str(library))
    lib.ckcsi_image_verdict.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int]

    def check(module: str, cc: int, driver: int) -> int:
        image = _C.kernel_image(module)
        return lib.ckcsi_image_verdict(image, len(image), cc // 10, cc % 10, driver)
    return check


def test_the_builds_driver_needs_agree_with_what_a_driver_loads(verdict):
    """For every GPU and driver: the build's own answer (which driver it needs, fatbin_info.c) is
    the stand-in's reading of the same fatbins (standin_image.c, the driver's rules)."""
    modules = sorted({m for m, *_ in images()})
    for cc in CCS:
        need = _C.kernels_driver(cc)
        for driver in DRIVERS:
            loads = all(verdict(m, cc, driver) == 0 for m in modules)
            assert loads == (need != 0 and driver >= need), (cc, driver, need)


def test_the_release_serves_the_data_center_drivers(verdict):
    """docs/install.md's table: with every architecture built (CI, wheels), Turing to Hopper load on
    CUDA 12.0 drivers and newer (R535, R550, R570 among them), Blackwell on 12.8 (R570, the first
    that runs it), Thor (11.0) on 13.0 (R580)."""
    if not {75, 80, 86, 89, 90, 100, 110, 120} <= built_archs():
        pytest.skip("a development build holds one architecture; CI's and the wheels' hold all")
    for cc in (75, 80, 86, 87, 89, 90):
        assert _C.kernels_driver(cc) == 12000, cc
    for cc in (100, 103, 120, 121):
        assert _C.kernels_driver(cc) <= 12080, cc
    assert _C.kernels_driver(110) == 13000


# ---- the stand-in refuses what a driver refuses (its control API and entry points, by ctypes) ----

@pytest.fixture(scope="module")
def driver(library):
    """The stand-in in this process, two devices (12.0 and 9.0), device 0's context current; the
    real flight fatbin loaded (its flight_mark_kernel takes one ckc_done_mark)."""
    saved = {k: os.environ.get(k) for k in ("CKC_STANDIN_GPUS", "CKC_STANDIN_DRIVER")}
    os.environ.update(CKC_STANDIN_GPUS="12.0,9.0", CKC_STANDIN_DRIVER="13000")
    lib = ctypes.CDLL(str(library))
    try:
        lib.cuInit(0)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    lib.ckcsi_stream_new.restype = ctypes.c_void_p
    lib.ckcsi_violations.restype = ctypes.c_size_t
    lib.ckcsi_set_context(0)
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    image = _C.kernel_image("flight")
    assert lib.cuModuleLoadData(ctypes.byref(module), image) == 0
    assert lib.cuModuleGetFunction(ctypes.byref(function), module, b"flight_mark_kernel") == 0
    lib.module, lib.function = module, function
    return lib


def refusals(lib) -> str:
    buf = ctypes.create_string_buffer(8192)
    lib.ckcsi_violations(buf, 8192)
    return buf.value.decode()


def launch(lib, grid=(1, 1, 1), block=(1, 1, 1), smem=0, stream=None, bytes_=None):
    """flight_mark_kernel launched with a parameter buffer of bytes_ (default: its own size, a 32-byte ckc_done_mark)."""
    buffer = (ctypes.c_ubyte * 64)()
    size = ctypes.c_size_t(32 if bytes_ is None else bytes_)
    extra = (ctypes.c_void_p * 5)(1, ctypes.cast(buffer, ctypes.c_void_p), 2,
                                  ctypes.cast(ctypes.pointer(size), ctypes.c_void_p), None)
    return lib.cuLaunchKernel(lib.function, *map(ctypes.c_uint, (*grid, *block, smem)), ctypes.c_void_p(stream),
                              None, extra)


def test_a_call_without_a_current_context_is_refused(driver):
    refusals(driver)
    driver.ckcsi_set_context(-1)
    try:
        p = ctypes.c_ulonglong()
        assert driver.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(64)) == 201  # CUDA_ERROR_INVALID_CONTEXT
    finally:
        driver.ckcsi_set_context(0)
    assert "cuMemAlloc: needs a current context" in refusals(driver)


def test_a_function_the_image_lacks_is_not_found(driver):
    f = ctypes.c_void_p()
    assert driver.cuModuleGetFunction(ctypes.byref(f), driver.module, b"no_such_kernel") == 500
    assert "no function 'no_such_kernel'" in refusals(driver)


def test_a_parameter_buffer_of_another_size_than_the_kernels_is_refused(driver):
    assert launch(driver, bytes_=8) == 1  # CUDA_ERROR_INVALID_VALUE
    assert "a parameter buffer of 8 bytes; the kernel's parameters take 32" in refusals(driver)


@pytest.mark.parametrize("grid,block,smem,rule", [
    ((1, 70000, 1), (1, 1, 1), 0, "grid (1,70000,1) beyond the limits"),
    ((1, 1, 1), (2048, 1, 1), 0, "block (2048,1,1) beyond the limits"),
    ((1, 1, 1), (1, 1, 1), 64 * 1024, "exceed 48 KB without cuFuncSetAttribute"),
])
def test_launches_beyond_the_limits_are_refused(driver, grid, block, smem, rule):
    assert launch(driver, grid, block, smem) == 1
    assert rule in refusals(driver)


def test_a_stream_of_another_device_is_refused(driver):
    other = driver.ckcsi_stream_new(1, 1)
    assert launch(driver, stream=other) == 400  # CUDA_ERROR_INVALID_HANDLE
    assert "a stream of device 1 used while device 0's context is current" in refusals(driver)


def test_a_legacy_stream_sync_during_a_capture_is_refused_and_breaks_it(driver):
    stream = driver.ckcsi_stream_new(0, 0)
    graph = ctypes.c_uint64()
    assert driver.ckcsi_capture_begin(ctypes.c_void_p(stream), 0) == 0
    assert driver.cuStreamSynchronize(None) == 900  # CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
    assert driver.ckcsi_capture_end(ctypes.c_void_p(stream), ctypes.byref(graph)) == 901  # invalidated
    assert "cuStreamSynchronize(legacy stream): not permitted while a stream capture is active" in refusals(driver)
