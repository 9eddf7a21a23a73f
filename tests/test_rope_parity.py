# SPDX-License-Identifier: Apache-2.0
"""Parity of the RoPE ops with comfy_kitchen's eager backend, bit for bit, on the CPU kernels and
on the GPU kernels (emulated device): the shapes ComfyUI's models pass (WAN x [B, L, H, D] with
freqs_cis [1, L, 1, D/2, 2, 2], Flux x [B, H, L, D] with freqs_cis [B, 1, L, D/2, 2, 2], longer
freqs_cis trimmed), both layouts, the in-place forms, row lengths that leave the GPU's 16-byte
units (scalar pairs), and NaN/Inf."""

import pytest
import torch
from comfy_kitchen.backends.eager import rope as E

import comfy_kitchen_c.ops as ops
from comfy_kitchen_c._C import ArgumentError, ArgumentTypeError
from conftest import DTYPE_IDS, FLOAT_DTYPES, assert_bitwise_equal, kernels_of

# (x shape, freqs_cis shape)
SHAPES = [
    ((1, 24, 4, 128), (1, 24, 1, 64, 2, 2)),   # WAN: [B, L, H, D], freqs per position
    ((2, 3, 17, 64), (2, 1, 17, 32, 2, 2)),    # Flux: [B, H, L, D], freqs per batch and position
    ((2, 3, 9, 64), (1, 1, 20, 32, 2, 2)),     # freqs longer than L: trimmed (interleaved)
    ((3, 5, 6), (5, 3, 2, 2)),                 # fewer freqs dims than x + 2: broadcast
    ((2, 4, 10), (2, 4, 5, 2, 2)),             # D/2 = 5: no 16-byte units on the GPU
    ((1, 7, 2, 12), (1, 7, 1, 6, 2, 2)),       # split half of 6: scalar pairs on the GPU
    ((4, 2), (1, 1, 2, 2)),                    # one pair per row
]


_kernels = kernels_of  # conftest.py


def _inputs(xs, fs, dtype, special=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(xs, generator=g).to(dtype)
    f = torch.randn(fs, generator=g)
    if special:
        flat = x.view(-1)
        flat[:: 7] = float("nan")
        flat[3:: 11] = float("inf")
        flat[5:: 13] = -float("inf")
        f.view(-1)[1:: 17] = float("inf")
    return x, f


def _fits_split(xs, fs):
    """Split-half freqs are not trimmed: the longer ones do not broadcast in eager either."""
    return all(a in (1, b) for a, b in zip(fs[-4::-1], xs[-2::-1]))


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("special", [False, True], ids=["normal", "nan_inf"])
@pytest.mark.parametrize("xs,fs", SHAPES)
def test_rope_bit_exact(device, dtype, special, xs, fs):
    x, f = _inputs(xs, fs, dtype, special)
    k = x.flip(0).clone()
    with _kernels(device):
        assert_bitwise_equal(ops.apply_rope1(x, f), E.apply_rope1(x, f), "apply_rope1")
        for ours, ref in zip(ops.apply_rope(x, k, f), E.apply_rope(x, k, f)):
            assert_bitwise_equal(ours, ref, "apply_rope")
        xi, ki = x.clone(), k.clone()
        ops.apply_rope_(xi, ki, f)
        assert_bitwise_equal(xi, E.apply_rope1(x, f), "apply_rope_ (xq)")
        assert_bitwise_equal(ki, E.apply_rope1(k, f), "apply_rope_ (xk)")
        if _fits_split(xs, fs):
            ref = E.apply_rope_split_half1(x, f)
            assert_bitwise_equal(ops.apply_rope_split_half1(x, f), ref, "apply_rope_split_half1")
            xi = x.clone()
            assert ops.apply_rope_split_half1_(xi, f) is xi
            assert_bitwise_equal(xi, ref, "apply_rope_split_half1_")
            for ours, ref in zip(ops.apply_rope_split_half(x, k, f), E.apply_rope_split_half(x, k, f)):
                assert_bitwise_equal(ours, ref, "apply_rope_split_half")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_in_place_on_a_non_contiguous_view(device):
    """Flux's q is a permuted view of the qkv projection: written through, as eager does."""
    qkv = torch.randn(2, 9, 3, 4, 64).bfloat16()
    f = torch.randn(2, 1, 9, 32, 2, 2)
    q = qkv[:, :, 0].transpose(1, 2)  # [B, H, L, D], not contiguous
    ref = E.apply_rope1(q, f)
    with _kernels(device):
        assert ops.apply_rope1_(q, f) is q
    assert_bitwise_equal(q, ref, "apply_rope1_ through a view")
    assert_bitwise_equal(qkv[:, :, 0].transpose(1, 2), ref, "the view's storage")


def test_multithreaded_rows_match_one_thread():
    x, f = _inputs((1, 64, 8, 128), (1, 64, 1, 64, 2, 2), torch.bfloat16)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = ops.apply_rope1(x, f)
        torch.set_num_threads(max(threads, 2))
        assert_bitwise_equal(ops.apply_rope1(x, f), one, "rows split among threads")
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("call,needle", [
    (lambda: ops.apply_rope1(torch.randn(2, 3, 4, 7), torch.randn(1, 1, 4, 3, 2, 2)), "argument 'x': last dimension 7 is odd"),
    (lambda: ops.apply_rope1(torch.randn(2, 3, 4, 8), torch.randn(1, 1, 4, 4, 2, 2).double()), "argument 'freqs_cis'"),
    (lambda: ops.apply_rope1(torch.randn(2, 3, 4, 8), torch.randn(1, 2, 4, 4, 2, 2)), "argument 'freqs_cis'"),
    (lambda: ops.apply_rope1(torch.randn(2, 3, 4, 8), torch.randn(1, 1, 4, 4, 2, 1)), "argument 'freqs_cis'"),
    (lambda: ops.apply_rope1(torch.randn(2, 3, 4, 8).double(), torch.randn(1, 1, 4, 4, 2, 2)), "argument 'x'"),
    (lambda: ops.apply_rope1(torch.randn(2, 3, 4, 8, requires_grad=True), torch.randn(1, 1, 4, 4, 2, 2)),
     "argument 'x': requires grad"),
    (lambda: ops.apply_rope1_(torch.randn(1, 1, 4, 8).expand(2, 3, 4, 8), torch.randn(1, 1, 4, 4, 2, 2)),
     "apply_rope1_: argument 'x'"),
])
def test_refusals_name_op_and_argument(call, needle):
    with pytest.raises((ArgumentError, ArgumentTypeError), match=needle.replace("(", r"\(")):
        call()


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("ks,fs", [
    ((1, 2, 17, 64), (1, 1, 17, 32, 2, 2)),   # fewer k heads than q's (grouped-query attention)
    ((1, 4, 9, 64), (1, 1, 20, 32, 2, 2)),    # a shorter k: freqs trimmed to its own length
])
def test_paired_ops_take_each_tensors_own_freqs(device, ks, fs):
    """The pair's check reuses xq's freqs_cis for xk only where the shapes agree (rope._check_pair):
    an xk of another shape gets its own trim and broadcast, as eager's."""
    q, f = _inputs((1, 4, 17, 64) if fs[2] == 17 else (1, 4, 20, 64), fs, torch.bfloat16)
    k = torch.randn(ks, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    with _kernels(device):
        for ours, ref in zip(ops.apply_rope(q, k, f), E.apply_rope(q, k, f)):
            assert_bitwise_equal(ours, ref, "apply_rope")
        if fs[2] == 17:
            for ours, ref in zip(ops.apply_rope_split_half(q, k, f), E.apply_rope_split_half(q, k, f)):
                assert_bitwise_equal(ours, ref, "apply_rope_split_half")


def test_paired_ops_name_xk_when_only_its_shape_does_not_fit():
    f = torch.randn(1, 1, 4, 4, 2, 2)
    with pytest.raises(ArgumentError, match="argument 'freqs_cis': .* does not broadcast to 'xk'"):
        ops.apply_rope(torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), f)
    with pytest.raises(ArgumentError, match="argument 'freqs_cis': .* does not fit 'xk'"):
        ops.apply_rope_split_half(torch.randn(2, 3, 4, 8), torch.randn(2, 3, 4, 6), f)


def test_paired_in_place_names_the_tensor_that_cannot_be_written():
    """One call of eager's check over the pair comes first (rope._check_inplace); a refusal still
    names the tensor: xq when xq alone overlaps itself, xk when xk does."""
    f = torch.randn(1, 1, 4, 4, 2, 2)
    for name in ("xq", "xk"):
        good, bad = torch.randn(2, 3, 4, 8), torch.randn(1, 1, 4, 8).expand(2, 3, 4, 8)
        xq, xk = (bad, good) if name == "xq" else (good, bad)
        with pytest.raises(ArgumentError, match=f"apply_rope_: argument '{name}': .*internal overlap"):
            ops.apply_rope_(xq, xk, f)


def test_paired_in_place_refuses_overlapping_tensors():
    x = torch.randn(2, 3, 4, 8)
    with pytest.raises(ArgumentError, match="apply_rope_: argument 'xk'"):
        ops.apply_rope_(x, x[:1], torch.randn(1, 1, 4, 4, 2, 2))


def test_comfyui_attention_blocks_run_rope_in_c(activated):
    """WAN's and Flux's attention call comfy_kitchen.apply_rope1(x, freqs_cis) on q and k: through
    the registry those calls must reach "c" (counted per backend), with eager's bits."""
    import comfy_kitchen
    from collections import Counter

    from comfy_kitchen.registry import registry

    calls = Counter()
    real = registry.get_implementation

    def counting(func_name, backend=None, kwargs=None):
        impl = real(func_name, backend, kwargs)
        calls[(func_name, "c" if impl.__module__.startswith("comfy_kitchen_c") else "other")] += 1
        return impl

    def wan_block(x, freqs):  # x [B, L, H*D] -> q, k [B, L, H, D]
        q = x.view(1, 9, 4, 64)
        k = (x * 0.5).view(1, 9, 4, 64)
        return comfy_kitchen.apply_rope1(q, freqs), comfy_kitchen.apply_rope1(k, freqs)

    x = torch.randn(1, 9, 256).bfloat16()
    freqs = torch.randn(1, 9, 1, 32, 2, 2)
    registry.get_implementation = counting
    try:
        with torch.inference_mode():
            q, k = wan_block(x, freqs)
            flux_q = comfy_kitchen.apply_rope1(x.view(1, 9, 4, 64).transpose(1, 2), torch.randn(1, 1, 9, 32, 2, 2))
    finally:
        registry.get_implementation = real
    assert calls[("apply_rope1", "c")] == 3 and calls[("apply_rope1", "other")] == 0, calls
    assert_bitwise_equal(q, E.apply_rope1(x.view(1, 9, 4, 64), freqs), "WAN q")
    assert flux_q.shape == (1, 4, 9, 64)
