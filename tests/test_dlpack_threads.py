# SPDX-License-Identifier: Apache-2.0
"""Tensors cross into C through DLPack without leaks or double frees; the GIL is
released while kernels run and ops are safe to call from several threads."""
import sys
import threading
import time

import pytest
import torch

from comfy_kitchen_c import ops


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        import os
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_repeated_calls_do_not_leak_tensors():
    """Every capsule's deleter must run: otherwise each call would keep its 8 MiB
    input and outputs alive and resident memory would grow by gigabytes."""
    x = torch.randn(2048, 2048, dtype=torch.bfloat16)
    pts = torch.tensor(0.01)
    for _ in range(3):  # warm the allocator
        ops.quantize_int8_rowwise(x.clone())
        ops.quantize_nvfp4(x.clone(), pts)
    before = _rss_bytes()
    for _ in range(100):
        q, s = ops.quantize_int8_rowwise(x.clone())
        ops.dequantize_int8_simple_dtype(q, s, 2)
        ops.quantize_nvfp4(x.clone(), pts)
    grown = _rss_bytes() - before
    assert grown < 200 * 2**20, f"resident memory grew by {grown / 2**20:.0f} MiB"


def test_inputs_survive_and_are_not_modified():
    x = torch.randn(64, 256)
    copy = x.clone()
    q, s = ops.quantize_and_rotate_rowwise(x, None, 256)
    del q, s
    assert torch.equal(x, copy)


def test_gil_is_released_during_kernels():
    """A Python thread keeps running while a long kernel runs on another thread."""
    x = torch.randn(4096, 4096, dtype=torch.bfloat16)
    ticks = []
    done = threading.Event()

    def ticker():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.001)

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    t = threading.Thread(target=ticker)
    t.start()
    try:
        start = time.perf_counter()
        for _ in range(3):
            ops.quantize_and_rotate_rowwise(x, None, 256)
        elapsed = time.perf_counter() - start
    finally:
        done.set()
        t.join()
        torch.set_num_threads(saved)
    during = [v for v in ticks if start <= v <= start + elapsed]
    # with the GIL held the ticker could not run at all while the kernel ran
    assert len(during) >= max(3, int(elapsed / 0.001 / 10)), (len(during), elapsed)


def test_concurrent_calls_from_threads_are_correct():
    inputs = [torch.randn(300, 1024, dtype=torch.bfloat16) * (i + 1) for i in range(6)]
    expected = [ops.quantize_int8_convrot_weight(x, 256) for x in inputs]
    results = [None] * len(inputs)
    errors = []

    def work(i):
        try:
            for _ in range(5):
                results[i] = ops.quantize_int8_convrot_weight(inputs[i], 256)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(inputs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for (q, s), (qe, se) in zip(results, expected):
        assert torch.equal(q, qe) and torch.equal(s, se)


def test_requires_grad_inputs_are_accepted():
    x = torch.randn(8, 64, requires_grad=True)
    q, s = ops.quantize_int8_rowwise(x)
    assert q.dtype == torch.int8 and not s.requires_grad


def test_capsules_of_tensors_on_another_gpu_than_the_current_one():
    """torch's Tensor.__dlpack__ refuses a CUDA tensor that is not on the current device
    (BufferError), which broke every op on a second GPU; ops export through
    torch.utils.dlpack.to_dlpack, and the C side sets the device from the capsule.  Here a
    CPU tensor claims cuda:1 (no GPU needed): __dlpack__ fails on it before exporting, ours
    exports the tensor's data."""
    from inputs import FakeCudaTensor

    class OnCuda1(FakeCudaTensor):
        fake_device_index = 1

    x = torch.arange(6, dtype=torch.float32).view(2, 3).as_subclass(OnCuda1)
    with pytest.raises((BufferError, RuntimeError, AssertionError)):
        x.__dlpack__(stream=-1)
    assert torch.equal(torch.utils.dlpack.from_dlpack(ops._capsule(x)), torch.arange(6.0).view(2, 3))
