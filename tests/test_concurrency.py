# SPDX-License-Identifier: Apache-2.0
"""Calls from several Python threads at once: they run in parallel (the CPU thread pool
serves concurrent calls, csrc/cpu/parallel.c), give the bits the same calls give one after
another, keep the flight record consistent, and may switch the CPU kernels' instruction set
while others run (csrc/cpu/dispatch.c)."""
import threading

import pytest
import torch

from comfy_kitchen_c import _C, faults, flight, ops
from comfy_kitchen_c.testing import emulated_device

PTS = torch.tensor(0.05)


def _jobs():
    """Mixed ops, shapes and dtypes: (name, thunk)."""
    g = torch.Generator().manual_seed(11)
    jobs = []
    for i, dtype in enumerate((torch.float32, torch.float16, torch.bfloat16) * 3):
        rows, cols = 33 + 17 * i, 256 * (1 + i % 3)
        x = (torch.randn(rows, cols, generator=g) * 3).to(dtype)
        q, s = ops.quantize_int8_rowwise(x)
        w = torch.randint(-128, 128, (48, cols), generator=g, dtype=torch.int8)
        ws = torch.rand(48, generator=g) + 0.1
        jobs += [
            (f"rowwise {i}", lambda x=x: ops.quantize_int8_rowwise(x)),
            (f"rowwise seeded {i}", lambda x=x, i=i: ops.quantize_int8_rowwise(x, 5 + i)),
            (f"rotate {i}", lambda x=x: ops.quantize_and_rotate_rowwise(x, None, 64)),
            (f"tensorwise {i}", lambda x=x: ops.quantize_int8_tensorwise(x)),
            (f"dequant {i}", lambda q=q, s=s: ops.dequantize_int8_convrot_weight_dtype(q, s, 16, 2)),
            (f"nvfp4 {i}", lambda x=x: ops.quantize_nvfp4(x, PTS, pad_16x=True)),
            (f"linear {i}", lambda x=x, w=w, ws=ws: ops.int8_linear(x, w, ws, None, torch.float16)),
        ]
    return jobs


def _bits(result):
    items = result if isinstance(result, tuple) else (result,)
    return [t.view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t for t in items]


def _run_threads(n, target):
    errors = []

    def wrapped(k):
        try:
            target(k)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=wrapped, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


@pytest.fixture
def two_threads_per_call():
    saved = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(saved)


def test_eight_threads_of_mixed_ops_give_the_serial_bits(two_threads_per_call):
    jobs = _jobs()
    serial = [_bits(fn()) for _, fn in jobs]
    results = {}

    def work(k):
        for rep in range(3):
            for j in range(k, len(jobs), 8):  # each thread its share, in a different order per thread
                jj = j if rep % 2 == 0 else len(jobs) - 1 - j
                results[(k, rep, jj)] = _bits(jobs[jj][1]())

    _run_threads(8, work)
    assert len(results) == 3 * len(jobs)
    for (k, rep, j), got in results.items():
        for a, b in zip(got, serial[j]):
            assert torch.equal(a, b), f"{jobs[j][0]} (thread {k}, round {rep})"


def test_concurrent_calls_run_at_once(two_threads_per_call):
    """A short call made while a long one runs returns first.  The pool used to take one call at
    a time (a lock around every parallel call): the short call then waited for the long one."""
    big = torch.randn(4096, 4096, dtype=torch.bfloat16)
    small = torch.randn(256, 256, dtype=torch.bfloat16)  # 4 tasks of 64 rows: a parallel call too
    started, order = threading.Event(), []

    def long_call(_):
        started.set()
        ops.quantize_and_rotate_rowwise(big, None, 256)
        ops.quantize_and_rotate_rowwise(big, None, 256)
        order.append("long")

    def short_calls(_):
        started.wait()
        for _ in range(3):
            ops.quantize_int8_rowwise(small)
        order.append("short")

    threads = [threading.Thread(target=long_call, args=(0,)), threading.Thread(target=short_calls, args=(0,))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert order == ["short", "long"], order
    assert _C.cpu_isa() in _C.cpu_isas()


def test_switching_the_instruction_set_while_calls_run(two_threads_per_call):
    """Every build gives the same bits, so calls stay right while the selection changes."""
    jobs = _jobs()[:21]
    serial = [_bits(fn()) for _, fn in jobs]
    saved = _C.cpu_isa()
    stop = threading.Event()

    def switcher():
        k = 0
        while not stop.is_set():
            _C.set_cpu_isa(_C.cpu_isas()[k % len(_C.cpu_isas())])
            k += 1

    t = threading.Thread(target=switcher)
    t.start()
    try:
        def work(k):
            for j in range(len(jobs)):
                for a, b in zip(_bits(jobs[j][1]()), serial[j]):
                    assert torch.equal(a, b), (jobs[j][0], k)

        _run_threads(4, work)
    finally:
        stop.set()
        t.join()
        _C.set_cpu_isa(saved)


def test_the_flight_record_stays_consistent_under_concurrent_gpu_ops():
    """8 threads of ops on the emulated device: one record each, unique increasing seqs, every
    one completed, with its own op's tensors."""
    x = torch.randn(16, 256)
    before = flight.load(faults.record_path())["records"] if faults.record_path() else []
    first_new = max((r["seq"] for r in before), default=0)

    def work(k):
        with emulated_device():
            for i in range(6):
                if (k + i) % 2:
                    ops.quantize_int8_rowwise(x[: k + 1])
                else:
                    ops.dequantize_int8_simple(torch.ones(k + 1, 256, dtype=torch.int8), torch.ones(k + 1, 1))

    _run_threads(8, work)
    records = [r for r in flight.load(faults.record_path())["records"] if r["seq"] > first_new]
    assert len(records) == 48
    seqs = [r["seq"] for r in records]
    assert seqs == sorted(seqs) and len(set(seqs)) == 48 and seqs[-1] - seqs[0] == 47
    assert all(r["state"] == "completed" for r in records), [r for r in records if r["state"] != "completed"]
    for r in records:
        assert r["op"] in ("quantize_int8_rowwise", "dequantize_int8_simple")
        rows = r["tensors"].split("[")[1].split(",")[0]
        assert 1 <= int(rows) <= 8, r["tensors"]
