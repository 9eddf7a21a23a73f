# SPDX-License-Identifier: Apache-2.0
"""No op keeps what it was given or made: run many times, on success and on every error path
its fuzz target knows (tests/fuzz), every op leaves the reference counts of its arguments,
the use counts of their storages (a DLPack capsule never handed back would hold one) and the
process's resident memory where they were.  LeakSanitizer covers the C heap (.ci/run)."""
import gc
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz"))

import comfy_kitchen_c as ckc  # noqa: E402
from comfy_kitchen_c.testing import emulated_device  # noqa: E402
from draw import Draw  # noqa: E402
from targets import TARGETS  # noqa: E402

REPEAT = 20  # a leak of a reference per call shows as a count 20 higher
TENSOR_OPS = sorted(op for op, t in TARGETS.items() if t.emulated_same_bits is not None)


def _storage_uses(t: torch.Tensor) -> int:
    return torch._C._storage_Use_Count(t.untyped_storage()._cdata)


def _counts(args: dict) -> dict:
    counts = {}
    for name, v in args.items():
        counts[name] = sys.getrefcount(v)
        if isinstance(v, torch.Tensor) and v.device.type != "meta":
            counts[name + " storage"] = _storage_uses(v)
    return counts


def _grown(args: dict, before: dict) -> dict:
    """The counts that grew over REPEAT calls.  A number, a flag, None or a string is shared by
    the whole process (CPython caches small ints; torch's code holds them too), so its count
    moves by one or two for reasons not ours: it counts as grown once it moved by REPEAT, as a
    reference an op kept per call moves it.  Tensors and their storages: any growth."""
    after = _counts(args)
    grown = {}
    for name, n in after.items():
        v = args.get(name)
        shared = name in args and (v is None or isinstance(v, (bool, int, float, str)))
        if n - before[name] >= (REPEAT if shared else 1) or n < before[name] - (REPEAT if shared else 0):
            grown[name] = (before[name], n)
    return grown


@pytest.fixture(autouse=True, scope="module")
def _frozen_heap():
    """gc.collect() here runs twice per error path; with the whole suite's objects in the heap
    each took about a quarter of a second.  Frozen, the objects made before this module are
    not traversed (they are older than any call here: a leak of ours is made after); counts are
    untouched."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


_VALID = {}


def _valid_args(target, seed: int) -> dict:
    """A call of the op that it answers (the first of a few drawn; the same each time)."""
    if (target.op, seed) in _VALID:
        return _VALID[(target.op, seed)]
    for i in range(200):
        args = target.make(Draw(seed, i))
        try:
            target.call()(**args)
        except ckc.KitchenError:
            continue
        _VALID[(target.op, seed)] = args
        return args
    raise AssertionError(f"no valid call of {target.op} drawn")


def _repeat(fn, args, expect_error):
    for _ in range(REPEAT):
        try:
            result = fn(**args)
        except (ckc.ArgumentError, ckc.ArgumentTypeError):
            assert expect_error
            continue
        assert not expect_error, "a bad argument was accepted"
        del result


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("op", TENSOR_OPS)
def test_success_keeps_no_reference(op, device):
    target = TARGETS[op]
    args = _valid_args(target, seed=3)
    fn = target.call()
    _repeat(fn, args, False)  # warm-up: caches (cuBLASLt stand-ins, Hadamard matrices, ...)
    gc.collect()
    before = _counts(args)
    if device == "emulated":
        with emulated_device():
            _repeat(fn, args, False)
    else:
        _repeat(fn, args, False)
    gc.collect()
    assert _grown(args, before) == {}
    result = fn(**args)
    items = result if isinstance(result, tuple) else (result,)
    fresh = tuple(torch.empty(1) for _ in items)  # held exactly as the results are, but made here
    for t, f in zip(items, fresh):
        if t is None or any(t is v for v in args.values()):
            # an optional result left out (the W4A8 quantizer's correction or codebook), or the op hands an
            # argument back (a float32 tensorwise scale, as eager's scale.to())
            continue
        assert sys.getrefcount(t) == sys.getrefcount(f) + (0 if isinstance(result, tuple) else 1), op


@pytest.mark.parametrize("op", sorted(TARGETS))
def test_error_paths_keep_no_reference(op):
    target = TARGETS[op]
    fn = target.call()
    paths = 0
    for name in target.params:
        bad = target.hostile.get(name)
        if bad is None:
            continue
        for k in range(2):
            d = Draw(17, k)
            args = dict(_valid_args(target, seed=5))
            args[name] = bad(d, args)
            try:
                fn(**args)
                continue  # that bad value is one the op serves after all (e.g. a flag it accepts)
            except (ckc.ArgumentError, ckc.ArgumentTypeError):
                pass
            except TypeError:
                continue  # Python's own signature error: nothing of ours ran
            gc.collect()
            before = _counts(args)
            _repeat(fn, args, True)
            gc.collect()
            assert _grown(args, before) == {}, (op, name, k)
            paths += 1
    assert paths > 0 or not target.hostile, f"{op}: no error path exercised"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
@pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                    reason="under AddressSanitizer freed memory stays resident in its quarantine (256 MiB), and "
                    "LeakSanitizer checks the leaks at exit instead")
def test_resident_memory_does_not_grow():
    """Every op many times with outputs of about 1 MiB: a leaked output (a capsule never handed
    back) would add gigabytes."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(512, 1024, generator=g).to(torch.bfloat16)
    w = torch.randint(-128, 128, (256, 1024), generator=g, dtype=torch.int8)
    pts = torch.tensor(0.01)

    def round_():
        q, s = ckc.ops.quantize_and_rotate_rowwise(x, None, 256)
        ckc.ops.dequantize_int8_convrot_weight_dtype(q, s, 256, 2)
        ckc.ops.quantize_int8_tensorwise(x)
        qx, sx = ckc.ops.quantize_nvfp4(x, pts)
        ckc.ops.dequantize_nvfp4(qx, pts, sx, torch.float32)
        ckc.ops.int8_linear(x, w, torch.ones(256), torch.ones(256), torch.float16)
        for bad in (lambda: ckc.ops.quantize_nvfp4(x, pts, pad_16x="no"),
                    lambda: ckc.ops.int8_linear(x, w[:, :7], torch.ones(256))):
            with pytest.raises(ckc.KitchenError):
                bad()

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    for _ in range(5):
        round_()
    gc.collect()
    before = rss()
    for _ in range(150):
        round_()
    gc.collect()
    grown = rss() - before
    # 150 rounds of ~10 MiB of outputs: a leak of any of them is >= 150 MiB
    assert grown < 64 * 2**20, f"resident memory grew by {grown / 2**20:.1f} MiB"
