# SPDX-License-Identifier: Apache-2.0
"""Parity of the rms_rope ops with comfy_kitchen's eager backend, bit for bit, on the CPU kernels
and on the GPU kernels (emulated device): WAN's and Flux's shapes, row lengths on each of the rms
sum's paths (below 8 values: one lane; 8 to 543: plain streams; 544 and more: the cascade), every
scale dtype beside every x dtype, rms_rope_split_half's rot_dim, the in-place forms (also through a
non-contiguous view), NaN/Inf and all-zero rows, empty tensors, and the refusals."""

import pytest
import torch
from comfy_kitchen.backends.eager import rope as E

import comfy_kitchen_c.ops as ops
from comfy_kitchen_c._C import ArgumentError, ArgumentTypeError
from conftest import DTYPE_IDS, FLOAT_DTYPES, assert_bitwise_equal, kernels_of

# (x shape, freqs_cis shape)
SHAPES = [
    ((1, 6, 3, 128), (1, 6, 1, 64, 2, 2)),     # WAN: [B, L, H, D], freqs per position
    ((2, 3, 5, 64), (2, 1, 5, 32, 2, 2)),      # Flux: [B, H, L, D], freqs per batch and position
    ((2, 3, 4, 64), (1, 1, 9, 32, 2, 2)),      # freqs longer than L: trimmed (interleaved)
    ((1, 2, 3, 6), (1, 1, 3, 3, 2, 2)),        # D < 8: the sum's one-lane path
    ((2, 1, 3, 8), (2, 1, 3, 4, 2, 2)),        # D = 8: no whole stream, all in the ending
    ((1, 1, 2, 40), (1, 1, 2, 20, 2, 2)),      # D = 40: streams and a vector past them
    ((1, 1, 2, 576), (1, 1, 1, 288, 2, 2)),    # D = 576: 18 terms per stream, the cascade's flush
    ((3, 2), (1, 1, 2, 2)),                    # one pair per row
]

_kernels = kernels_of  # conftest.py


def _inputs(xs, fs, dtype, scale_dtype=None, special=False, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(xs, generator=g) * 3).to(dtype)
    f = torch.randn(fs, generator=g)
    s = (torch.rand(xs[-1], generator=g) * 2).to(scale_dtype or dtype)
    if special:
        flat = x.view(-1, xs[-1])
        flat[0, 1] = float("nan")
        if flat.shape[0] > 1:
            flat[1, 0] = float("inf")
        if flat.shape[0] > 2:
            flat[2] = 0.0  # an all-zero row: 0 * rsqrt(eps)
        f.view(-1)[1:: 17] = float("inf")
    return x, f, s


def _fits_split(xs, fs):
    """Split-half freqs are not trimmed: the longer ones do not broadcast in eager either."""
    return all(a in (1, b) for a, b in zip(fs[-4::-1], xs[-2::-1]))


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("special", [False, True], ids=["normal", "nan_inf_zero"])
@pytest.mark.parametrize("xs,fs", SHAPES)
def test_rms_rope_bit_exact(device, dtype, special, xs, fs):
    x, f, s = _inputs(xs, fs, dtype, special=special)
    k = x.flip(0).clone()
    ks = s.flip(0).clone()
    eps = 1e-6
    with _kernels(device):
        assert_bitwise_equal(ops.rms_rope1(x, f, s, eps), E.rms_rope1(x, f, s, eps), "rms_rope1")
        for ours, ref in zip(ops.rms_rope(x, k, f, s, ks, eps), E.rms_rope(x, k, f, s, ks, eps)):
            assert_bitwise_equal(ours, ref, "rms_rope")
        xi, ki = x.clone(), k.clone()
        assert ops.rms_rope_(xi, ki, f, s) == (xi, ki)
        assert_bitwise_equal(xi, E.rms_rope1(x, f, s), "rms_rope_ (q)")
        assert_bitwise_equal(ki, E.rms_rope1(k, f, s), "rms_rope_ (k, q's scale)")
        if _fits_split(xs, fs):
            ref = E.rms_rope_split_half1(x, f, s, eps)
            assert_bitwise_equal(ops.rms_rope_split_half1(x, f, s, eps), ref, "rms_rope_split_half1")
            xi = x.clone()
            assert ops.rms_rope_split_half1_(xi, f, s, eps) is xi
            assert_bitwise_equal(xi, ref, "rms_rope_split_half1_")
            for ours, ref in zip(ops.rms_rope_split_half(x, k, f, s, ks, eps),
                                 E.rms_rope_split_half(x, k, f, s, ks, eps)):
                assert_bitwise_equal(ours, ref, "rms_rope_split_half")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("scale_dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
def test_every_scale_dtype(device, dtype, scale_dtype):
    """aten rounds (x * r) * scale once to x's dtype whatever the scale's dtype."""
    x, f, s = _inputs((1, 4, 2, 64), (1, 4, 1, 32, 2, 2), dtype, scale_dtype)
    with _kernels(device):
        assert_bitwise_equal(ops.rms_rope1(x, f, s), E.rms_rope1(x, f, s), "rms_rope1")
        assert_bitwise_equal(ops.rms_rope_split_half1(x, f, s, 1e-5), E.rms_rope_split_half1(x, f, s, 1e-5),
                             "rms_rope_split_half1")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rot", [0, 2, 32, 62, 64, 80])
def test_partial_rotary(device, dtype, rot):
    """rot_dim: the norm spans D, the first rot_dim values are rotated (split half of rot_dim)."""
    d = 64
    x, _, s = _inputs((1, 3, 2, d), (1, 1, 1, 1, 2, 2), dtype)
    f = torch.randn(1, 3, 1, min(rot or d, d) // 2, 2, 2)
    k = x.flip(1).clone()
    with _kernels(device):
        refs = E.rms_rope_split_half(x, k, f, s, None, 1e-6, rot)
        for ours, ref in zip(ops.rms_rope_split_half(x, k, f, s, None, 1e-6, rot), refs):
            assert_bitwise_equal(ours, ref, f"rms_rope_split_half rot_dim={rot}")
        qi, ki = x.clone(), k.clone()
        ops.rms_rope_split_half_(qi, ki, f, s, None, 1e-6, rot)
        assert_bitwise_equal(qi, refs[0], "rms_rope_split_half_ (q)")
        assert_bitwise_equal(ki, refs[1], "rms_rope_split_half_ (k)")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("eps", [0.0, 1e-30, 1e-5, 1.0])
def test_eps_and_zero_rows(device, eps):
    """eps as a float32 (aten adds it so); with 0 an all-zero row is 0 * inf = NaN, as eager."""
    x, f, s = _inputs((2, 3, 2, 16), (1, 1, 2, 8, 2, 2), torch.bfloat16)
    x[0, 1] = 0.0
    with _kernels(device):
        assert_bitwise_equal(ops.rms_rope1(x, f, s, eps), E.rms_rope1(x, f, s, eps), f"rms_rope1 eps={eps}")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_in_place_on_a_non_contiguous_view(device):
    """Flux's q is a permuted view of the qkv projection: written through, as eager does."""
    qkv = torch.randn(2, 9, 3, 4, 64).bfloat16()
    f = torch.randn(2, 1, 9, 32, 2, 2)
    s = torch.rand(64).bfloat16()
    q = qkv[:, :, 0].transpose(1, 2)  # [B, H, L, D], not contiguous
    ref = E.rms_rope1(q.contiguous(), f, s)
    with _kernels(device):
        assert ops.rms_rope1_(q, f, s) is q
    assert_bitwise_equal(q, ref, "rms_rope1_ through a view")
    assert_bitwise_equal(qkv[:, :, 0].transpose(1, 2), ref, "the view's storage")


@pytest.mark.parametrize("device", ["cpu", "emulated"])
def test_empty(device):
    """Split half of no rows: empty, as eager; the interleaved ops refuse an empty x as eager's
    reshape does (apply_rope1's rule)."""
    x = torch.randn(1, 0, 3, 64)
    f = torch.randn(1, 1, 1, 32, 2, 2)
    s = torch.rand(64)
    with _kernels(device):
        assert_bitwise_equal(ops.rms_rope_split_half1(x, f, s), E.rms_rope_split_half1(x, f, s), "empty")
        with pytest.raises(ArgumentError, match="rms_rope1: argument 'x': empty"):
            ops.rms_rope1(x, f, s)
    with pytest.raises(RuntimeError):
        E.rms_rope1(x, f, s)


def test_multithreaded_rows_match_one_thread():
    x, f, s = _inputs((1, 64, 8, 128), (1, 64, 1, 64, 2, 2), torch.bfloat16)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = ops.rms_rope1(x, f, s)
        torch.set_num_threads(max(threads, 2))
        assert_bitwise_equal(ops.rms_rope1(x, f, s), one, "rows split among threads")
    finally:
        torch.set_num_threads(threads)


_X, _F, _S = (lambda: torch.randn(2, 3, 4, 8)), (lambda: torch.randn(1, 1, 4, 4, 2, 2)), (lambda: torch.rand(8))


@pytest.mark.parametrize("call,needle", [
    (lambda: ops.rms_rope1(torch.randn(2, 3, 4, 7), torch.randn(1, 1, 4, 3, 2, 2), torch.rand(7)),
     "rms_rope1: argument 'x': last dimension 7 is odd"),
    (lambda: ops.rms_rope1(_X(), _F(), torch.rand(9)), "rms_rope1: argument 'scale': 9 values"),
    (lambda: ops.rms_rope1(_X(), _F(), torch.rand(1, 8)), "rms_rope1: argument 'scale': expected 1 dimensions"),
    (lambda: ops.rms_rope1(_X(), _F(), torch.rand(8).double()), "rms_rope1: argument 'scale': expected dtype"),
    (lambda: ops.rms_rope1(_X(), _F(), torch.rand(8, requires_grad=True)), "argument 'scale': requires grad"),
    (lambda: ops.rms_rope1(_X(), _F(), _S(), "1e-6"), "rms_rope1: argument 'epsilon': expected a float"),
    (lambda: ops.rms_rope1(_X(), _F().double(), _S()), "rms_rope1: argument 'freqs_cis'"),
    (lambda: ops.rms_rope1(_X(), torch.randn(1, 2, 4, 4, 2, 2), _S()), "rms_rope1: argument 'freqs_cis'"),
    (lambda: ops.rms_rope(_X(), _X(), _F(), _S(), torch.rand(7)), "rms_rope: argument 'k_scale': 7 values"),
    (lambda: ops.rms_rope(_X(), torch.randn(2, 3, 4, 6), _F(), _S()), "rms_rope: argument 'freqs_cis'"),
    (lambda: ops.rms_rope_split_half(_X(), _X(), _F(), _S(), None, 1e-6, 3),
     "rms_rope_split_half: argument 'rot_dim': expected 0 or an even length, got 3"),
    (lambda: ops.rms_rope_split_half(_X(), _X(), _F(), _S(), None, 1e-6, -2), "argument 'rot_dim'"),
    (lambda: ops.rms_rope_split_half(_X(), _X(), _F(), _S(), None, 1e-6, 4), "argument 'freqs_cis'"),
    (lambda: ops.rms_rope_split_half(_X(), _X(), _F(), _S(), None, 1e-6, 2.0), "argument 'rot_dim': expected an int"),
    (lambda: ops.rms_rope1_(torch.randn(1, 1, 4, 8).expand(2, 3, 4, 8), _F(), _S()), "rms_rope1_: argument 'x'"),
])
def test_refusals_name_op_and_argument(call, needle):
    with pytest.raises((ArgumentError, ArgumentTypeError), match=needle.replace("(", r"\(")):
        call()


def test_paired_in_place_refuses_overlapping_tensors():
    x = torch.randn(2, 3, 4, 8)
    with pytest.raises(ArgumentError, match="rms_rope_: argument 'k'"):
        ops.rms_rope_(x, x[:1], _F(), _S())


def test_in_place_refuses_a_scale_it_would_overwrite():
    x = torch.randn(1, 1, 1, 8)
    with pytest.raises(ArgumentError, match="rms_rope1_: argument 'x'"):
        ops.rms_rope1_(x, torch.randn(1, 1, 1, 4, 2, 2), x.view(8))
