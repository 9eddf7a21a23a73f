# SPDX-License-Identifier: Apache-2.0
"""install_staging_guard(): comfy_kitchen's BaseLayoutParams.copy_from sends host-to-device
tensor fields through comfy_kitchen_c.stage and leaves every other copy to comfy_kitchen.

Without a GPU, a CUDA destination is a CPU tensor whose ``device`` says cuda:0 (FakeCuda):
the guard decides by ``device``, and the stand-in ``stage`` copies the values with
``Tensor.copy_``, so values, order and non-tensor fields are all checked."""
import dataclasses
import sys
import threading

import pytest
import torch

import comfy_kitchen_c

base = pytest.importorskip("comfy_kitchen.tensor.base")
from comfy_kitchen.tensor import TensorCoreNVFP4Layout, TensorWiseINT8Layout  # noqa: E402

BaseLayoutParams, QuantizedTensor = base.BaseLayoutParams, base.QuantizedTensor


class FakeCuda(torch.Tensor):
    """A CPU tensor that reports device cuda:0."""

    @property
    def device(self):
        return torch.device("cuda", 0)


def fake_cuda(t: torch.Tensor) -> torch.Tensor:
    return t.clone().as_subclass(FakeCuda)


@pytest.fixture
def staged(monkeypatch):
    """Installs the guard with a recording stand-in for comfy_kitchen_c.stage (faults.stage); yields the calls."""
    calls = []

    def stage(dst, src, non_blocking=True):
        calls.append((dst, src, non_blocking))
        dst.copy_(src)
        return "pageable"

    monkeypatch.setattr(comfy_kitchen_c.faults, "stage", stage)
    original = BaseLayoutParams.__dict__["copy_from"]
    assert comfy_kitchen_c.install_staging_guard()
    try:
        yield calls
    finally:
        comfy_kitchen_c.uninstall_staging_guard()
        assert BaseLayoutParams.__dict__["copy_from"] is original


@pytest.fixture
def original_spy(monkeypatch):
    """Replaces comfy_kitchen's copy_from (before the guard wraps it) by a spy that records and
    delegates; yields the calls."""
    calls = []
    real = BaseLayoutParams.__dict__["copy_from"]

    def spy(self, src, non_blocking=False):
        calls.append((self, src, non_blocking))
        return real(self, src, non_blocking)

    monkeypatch.setattr(BaseLayoutParams, "copy_from", spy)
    return calls


def int8_params(scale: torch.Tensor, **kw):
    fields = dict(orig_dtype=torch.bfloat16, orig_shape=(64, 256), is_weight=True, convrot=True,
                  convrot_groupsize=64, transposed=False)
    fields.update(kw)
    return TensorWiseINT8Layout.Params(scale=scale, **fields)


def nvfp4_params(scale: torch.Tensor, block_scale: torch.Tensor, transposed=False):
    return TensorCoreNVFP4Layout.Params(scale=scale, orig_dtype=torch.float16, orig_shape=(32, 64),
                                        block_scale=block_scale, transposed=transposed)


def test_install_uninstall_restore_exactly_and_install_is_idempotent():
    original = BaseLayoutParams.__dict__["copy_from"]
    assert comfy_kitchen_c.install_staging_guard() is True
    try:
        wrapper = BaseLayoutParams.__dict__["copy_from"]
        assert wrapper is not original and wrapper.__wrapped__ is original
        assert comfy_kitchen_c.install_staging_guard() is False
        assert BaseLayoutParams.__dict__["copy_from"] is wrapper  # not wrapped twice
    finally:
        assert comfy_kitchen_c.uninstall_staging_guard() is True
    assert BaseLayoutParams.__dict__["copy_from"] is original
    assert comfy_kitchen_c.uninstall_staging_guard() is False


def test_uninstall_refuses_to_drop_a_later_patch():
    original = BaseLayoutParams.__dict__["copy_from"]
    comfy_kitchen_c.install_staging_guard()
    wrapper = BaseLayoutParams.__dict__["copy_from"]
    BaseLayoutParams.copy_from = lambda self, src, non_blocking=False: None
    try:
        with pytest.raises(RuntimeError, match="replaced after install_staging_guard"):
            comfy_kitchen_c.uninstall_staging_guard()
    finally:
        BaseLayoutParams.copy_from = wrapper
        comfy_kitchen_c.uninstall_staging_guard()
    assert BaseLayoutParams.__dict__["copy_from"] is original


def test_concurrent_installs_install_once():
    original = BaseLayoutParams.__dict__["copy_from"]
    results, barrier = [], threading.Barrier(8)

    def install():
        barrier.wait()
        results.append(comfy_kitchen_c.install_staging_guard())

    threads = [threading.Thread(target=install) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert sorted(results) == [False] * 7 + [True]
        assert BaseLayoutParams.__dict__["copy_from"].__wrapped__ is original
    finally:
        comfy_kitchen_c.uninstall_staging_guard()
    assert BaseLayoutParams.__dict__["copy_from"] is original


@pytest.mark.parametrize("non_blocking", [True, False])
def test_int8_scale_to_cuda_is_staged_and_other_fields_assigned(staged, non_blocking):
    dst = int8_params(fake_cuda(torch.zeros(())))
    src = int8_params(torch.tensor(0.125), orig_dtype=torch.float16, orig_shape=(128, 512), convrot=False,
                      convrot_groupsize=256, transposed=True)
    dst.copy_from(src, non_blocking=non_blocking)
    assert len(staged) == 1
    stage_dst, stage_src, stage_nb = staged[0]
    assert stage_dst is dst.scale and stage_src is src.scale and stage_nb is non_blocking
    assert float(dst.scale) == 0.125
    for f in dataclasses.fields(src):
        if f.name != "scale":
            assert getattr(dst, f.name) == getattr(src, f.name), f.name


def test_nvfp4_both_tensor_fields_staged_in_field_order(staged):
    dst = nvfp4_params(fake_cuda(torch.zeros(())), fake_cuda(torch.zeros(32, 4, dtype=torch.float8_e4m3fn)))
    block = torch.rand(32, 4).to(torch.float8_e4m3fn)
    src = nvfp4_params(torch.tensor(3.0), block, transposed=True)
    dst.copy_from(src, non_blocking=True)
    assert [(d is dst.scale, s is src.scale) for d, s, _ in staged[:1]] == [(True, True)]
    assert staged[1][0] is dst.block_scale and staged[1][1] is src.block_scale and len(staged) == 2
    assert float(dst.scale) == 3.0
    assert torch.equal(dst.block_scale.view(torch.uint8), block.view(torch.uint8))
    assert dst.transposed is True and dst.orig_dtype == torch.float16


def test_mixed_call_stages_only_the_host_to_device_field(staged):
    dst = nvfp4_params(fake_cuda(torch.zeros(())), torch.zeros(32, 4, dtype=torch.float8_e4m3fn))
    block = torch.rand(32, 4).to(torch.float8_e4m3fn)
    dst.copy_from(nvfp4_params(torch.tensor(2.0), block), non_blocking=True)
    assert len(staged) == 1 and staged[0][0] is dst.scale
    assert float(dst.scale) == 2.0
    assert torch.equal(dst.block_scale.view(torch.uint8), block.view(torch.uint8))  # copied by copy_


@pytest.mark.parametrize("case", ["cpu_to_cpu", "cuda_to_cuda", "cuda_to_cpu", "dtype_change", "broadcast"])
def test_everything_else_goes_to_comfy_kitchens_copy_from(original_spy, staged, case):
    dst_scale, src_scale = {
        "cpu_to_cpu": (torch.zeros(()), torch.tensor(0.5)),
        "cuda_to_cuda": (fake_cuda(torch.zeros(())), fake_cuda(torch.tensor(0.5))),
        "cuda_to_cpu": (torch.zeros(()), fake_cuda(torch.tensor(0.5))),
        "dtype_change": (fake_cuda(torch.zeros((), dtype=torch.float16)), torch.tensor(0.5)),
        "broadcast": (fake_cuda(torch.zeros(4)), torch.tensor(0.5)),
    }[case]
    dst, src = int8_params(dst_scale), int8_params(src_scale, transposed=True)
    dst.copy_from(src, non_blocking=True)
    assert staged == []
    assert original_spy == [(dst, src, True)]
    assert bool((dst.scale == 0.5).all()) and dst.transposed is True


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_errors_are_comfy_kitchens(staged, device):
    """Params of another layout as the source: comfy_kitchen fails on the first field the
    source lacks; so does the guard, after the same copies."""
    src = nvfp4_params(torch.tensor(0.5), torch.zeros(32, 4, dtype=torch.float8_e4m3fn))
    errors = []
    for guarded in (False, True):
        scale = torch.zeros(())
        dst = int8_params(fake_cuda(scale) if device == "cuda" else scale)
        if not guarded:
            comfy_kitchen_c.uninstall_staging_guard()
        try:
            with pytest.raises(AttributeError) as info:
                dst.copy_from(src)
        finally:
            comfy_kitchen_c.install_staging_guard()
        errors.append((str(info.value), float(dst.scale)))
    assert errors[0] == errors[1]
    assert errors[1][1] == 0.5  # the scale, the first field, was copied before the failure
    assert len(staged) == (1 if device == "cuda" else 0)


def _quantized_pair():
    g = torch.Generator().manual_seed(0)
    src = QuantizedTensor.from_float(torch.randn(64, 256, generator=g), "TensorWiseINT8Layout")
    dst = QuantizedTensor.from_float(torch.randn(64, 256, generator=g), "TensorWiseINT8Layout")
    return src, dst


def test_real_quantized_tensor_copy_on_cpu_is_unchanged(staged):
    src, dst = _quantized_pair()
    ref_src, ref_dst = _quantized_pair()
    comfy_kitchen_c.uninstall_staging_guard()
    ref_dst.copy_(ref_src)  # comfy_kitchen alone
    comfy_kitchen_c.install_staging_guard()
    dst.copy_(src)  # QuantizedTensor.copy_ -> _params.copy_from, through the guard
    assert staged == []
    assert torch.equal(dst._qdata, ref_dst._qdata) and torch.equal(dst._params.scale, ref_dst._params.scale)
    assert dst._params == dataclasses.replace(ref_dst._params, scale=dst._params.scale)
    assert torch.equal(dst._qdata, src._qdata) and torch.equal(dst._params.scale, src._params.scale)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_real_cuda_destination_is_staged(staged):
    src, _ = _quantized_pair()
    dst = QuantizedTensor.from_float(torch.randn(64, 256, device="cuda"), "TensorWiseINT8Layout")
    dst._params.copy_from(src._params.to_device(torch.device("cpu")), non_blocking=True)
    torch.cuda.synchronize()
    assert len(staged) == 1 and staged[0][0].is_cuda
    assert torch.equal(dst._params.scale.cpu(), src._params.scale)


@pytest.mark.skipif(not torch.cuda.is_available() or "stage" not in comfy_kitchen_c.__dict__,
                    reason="needs a CUDA GPU and comfy_kitchen_c.stage")
def test_real_stage_copies_pinned_scale():
    src, _ = _quantized_pair()
    pinned = dataclasses.replace(src._params, scale=src._params.scale.pin_memory())
    dst = QuantizedTensor.from_float(torch.randn(64, 256, device="cuda"), "TensorWiseINT8Layout")
    comfy_kitchen_c.install_staging_guard()
    try:
        dst._params.copy_from(pinned, non_blocking=True)
        comfy_kitchen_c.fence(pinned.scale)
    finally:
        comfy_kitchen_c.uninstall_staging_guard()
    assert torch.equal(dst._params.scale.cpu(), src._params.scale)


def test_install_without_comfy_kitchen_says_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "comfy_kitchen.tensor.base", None)
    with pytest.raises(ImportError, match="comfy_kitchen cannot be imported"):
        comfy_kitchen_c.install_staging_guard()
