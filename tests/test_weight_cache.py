# SPDX-License-Identifier: Apache-2.0
"""int8_linear's copies derived from a weight, made once per weight (comfy_kitchen_c/weight_cache.py):
the zero-padded weight the GPU GEMM takes when K or N is not a multiple of 16, and a weight scale
converted to float32.  On the emulated device (the GPU path): the results stay eager's bits on the
first call, on later calls (the cached copy) and after the weight or its scale is changed in place
(a fresh copy); the copy is freed with its weight; inference tensors and calls inside a capture
are never cached; the cache keeps to its byte budget."""
import gc
import sys

import pytest
import torch
from comfy_kitchen.backends.eager import quantization as E

from comfy_kitchen_c import linear, ops, weight_cache

from conftest import assert_same

if sys.platform == "win32":
    pytest.skip("the emulated device is not built on Windows yet", allow_module_level=True)
from comfy_kitchen_c.testing import emulated_capture, emulated_device  # noqa: E402

# K and N not multiples of 16 (the GPU GEMM's alignment): the GEMM takes a padded weight.
N, K = 40, 250
# More rows than the GEMV takes (csrc/contract/linear_plan.h: up to 8, reading the weight as it is).
ROWS = 12


def eager(x, w, ws):
    return E.int8_linear(x, w, ws, out_dtype=torch.bfloat16)


def g(seed):
    return torch.Generator().manual_seed(seed)


def odd_weight(seed=1, n=N, k=K):
    return ops.quantize_int8_rowwise(torch.randn(n, k, generator=g(seed)).to(torch.bfloat16))


@pytest.fixture(autouse=True)
def fresh_cache():
    weight_cache.clear()
    before = dict(weight_cache.stats)
    yield lambda: {k: weight_cache.stats[k] - before[k] for k in before}
    weight_cache.clear()


def test_padded_weight_made_once_and_exact(fresh_cache):
    x = torch.randn(1, ROWS, K, generator=g(2)).to(torch.bfloat16)
    w, ws = odd_weight()
    with emulated_device():
        first = ops.int8_linear(x, w, ws)
        second = ops.int8_linear(x, w, ws)
    assert_same(first, eager(x, w, ws), "int8_linear")
    assert_same(second, first, "int8_linear")
    assert fresh_cache() == {"made": 1, "reused": 1, "uncached": 0}
    assert weight_cache.cached_bytes() == 48 * 256  # N and K padded to 48 and 256


def test_in_place_change_makes_a_fresh_copy(fresh_cache):
    x = torch.randn(1, ROWS, K, generator=g(3)).to(torch.bfloat16)
    w, ws = odd_weight()
    with emulated_device():
        before = ops.int8_linear(x, w, ws)
        w[3].neg_()  # bumps w's version counter
        after = ops.int8_linear(x, w, ws)
    assert_same(after, eager(x, w, ws), "int8_linear")
    assert not torch.equal(after, before)  # the stale copy would have given `before` again
    assert fresh_cache()["made"] == 2


def test_scale_converted_once_and_followed(fresh_cache):
    x = torch.randn(1, ROWS, 256, generator=g(4)).to(torch.bfloat16)
    w, ws = odd_weight(5, n=32, k=256)  # aligned: no padded copy
    ws16 = ws.to(torch.bfloat16)
    with emulated_device():
        first = ops.int8_linear(x, w, ws16)
        second = ops.int8_linear(x, w, ws16)
        assert fresh_cache() == {"made": 1, "reused": 1, "uncached": 0}
        ws16.mul_(2)
        changed = ops.int8_linear(x, w, ws16)
    assert_same(first, eager(x, w, ws.to(torch.bfloat16)), "int8_linear")
    assert_same(second, first, "int8_linear")
    assert_same(changed, eager(x, w, ws16), "int8_linear")
    assert fresh_cache()["made"] == 2


def test_copy_freed_with_its_weight(fresh_cache):
    x = torch.randn(1, ROWS, K, generator=g(6)).to(torch.bfloat16)
    w, ws = odd_weight()
    with emulated_device():
        ops.int8_linear(x, w, ws)
    assert weight_cache.cached_bytes() > 0
    del w
    gc.collect()
    assert weight_cache.cached_bytes() == 0


def test_inference_tensors_not_cached(fresh_cache):
    x = torch.randn(1, ROWS, K, generator=g(7)).to(torch.bfloat16)
    with torch.inference_mode():
        w, ws = odd_weight()
    with emulated_device():
        y = ops.int8_linear(x, w, ws)
        ops.int8_linear(x, w, ws)
    assert_same(y, eager(x, w, ws), "int8_linear")
    assert fresh_cache() == {"made": 0, "reused": 0, "uncached": 2}
    assert weight_cache.cached_bytes() == 0


def test_capture_neither_caches_nor_reads_the_cache(fresh_cache):
    x = torch.randn(1, ROWS, K, generator=g(8)).to(torch.bfloat16)
    w, ws = odd_weight()
    with emulated_device():
        with emulated_capture() as graph:
            y = ops.int8_linear(x, w, ws)
        graph.replay()
    assert_same(y, eager(x, w, ws), "int8_linear")
    assert fresh_cache() == {"made": 0, "reused": 0, "uncached": 1}


def test_budget(fresh_cache):
    x = torch.randn(1, ROWS, K, generator=g(9)).to(torch.bfloat16)
    weights = [odd_weight(10 + i) for i in range(3)]
    limit = linear.linear_memory_limit()
    try:
        linear.set_linear_memory_limit(2 * 48 * 256)  # two padded copies fit
        with emulated_device():
            for w, ws in weights:
                assert_same(ops.int8_linear(x, w, ws), eager(x, w, ws), "int8_linear")
            assert weight_cache.cached_bytes() == 2 * 48 * 256
            ops.int8_linear(x, *weights[0])  # the least recently used was evicted: made again
            assert fresh_cache()["made"] == 4
            linear.set_linear_memory_limit(48 * 256 - 1)  # one copy no longer fits: none is kept
            w, ws = odd_weight(20)
            assert_same(ops.int8_linear(x, w, ws), eager(x, w, ws), "int8_linear")
            assert fresh_cache()["made"] == 5
            assert weight_cache.cached_bytes() <= 2 * 48 * 256
    finally:
        linear.set_linear_memory_limit(limit)


def test_derived_by_tensor_not_by_value():
    """Two tensors with the same values and shape each get their own copy (keyed by the object,
    valid while its pointer, shape, strides and version are unchanged)."""
    a = torch.zeros(4)
    b = torch.zeros(4)
    made = []

    def make(t):
        made.append(t)
        return t + 1

    ca = weight_cache.derived(a, "plus one", lambda: make(a), 1 << 20)
    cb = weight_cache.derived(b, "plus one", lambda: make(b), 1 << 20)
    assert ca is not cb and len(made) == 2
    assert weight_cache.derived(a, "plus one", lambda: make(a), 1 << 20) is ca
    a.resize_(8)  # shape changed (and version): a fresh copy
    assert weight_cache.derived(a, "plus one", lambda: make(a), 1 << 20).shape == (8,)
