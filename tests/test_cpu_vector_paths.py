# SPDX-License-Identifier: Apache-2.0
"""The vector builds' special paths for bfloat16 (AVX2, AVX-512) give the baseline build's bits.

They quantize bfloat16 rows with vector code that skips the NaN mask and the clamp when a row's
scale comes from its own finite absmax, and rotate whole groups in registers (AVX2: a permuted
layout with strides 16 and 64 fused for 256-groups; AVX-512: a whole 256-group in registers, two
16-groups per load with a half load for an odd one); rows with inf or NaN fall back to the general
path. test_cpu_isa covers the common shapes; this covers every group size, lengths that leave a
16-value tail, rows on either side of the fallback, and a caller-given tensor-wise scale (no bound
on the quotients).
"""
import contextlib

import pytest
import torch

from comfy_kitchen_c import _C, ops

VECTOR_ISAS = [isa for isa in _C.cpu_isas() if isa != "baseline"]
pytestmark = pytest.mark.skipif(not VECTOR_ISAS, reason="needs a CPU and build with AVX2 or AVX-512")


@contextlib.contextmanager
def _cpu_isa(name):
    """The CPU kernels of build `name` inside the block, the previous ones after it."""
    saved = _C.cpu_isa()
    _C.set_cpu_isa(name)
    try:
        yield
    finally:
        _C.set_cpu_isa(saved)


def _rows(m, k, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g) * torch.exp2(torch.randint(-120, 120, (m, 1), generator=g).float())
    x[0] = 0.0                                                  # all-zero row
    x[1, :: max(k // 7, 1)] *= 300.0                            # outliers
    if m > 3:
        x[2, 1] = float("inf")                                  # falls back
        x[3, k // 2] = float("nan")                             # falls back
    if m > 4:
        x[4] = torch.round(x[4] * 8) / 8                        # exact ties after scaling
    return x.to(torch.bfloat16)


def _results(x, group, scale):
    out = {"rowwise": ops.quantize_int8_rowwise(x),
           "tensorwise": ops.quantize_int8_tensorwise(x),
           "tensorwise_given": ops.quantize_int8_tensorwise(x, scale)}
    if group:
        out["convrot"] = ops.quantize_int8_convrot_weight(x, group)
        out["rotate_quantize"] = ops.quantize_and_rotate_rowwise(x, None, group)
        out["rotate"] = (ops.rotate_int8_convrot_weight(x, group),)
    return out


def _same_bits(a, b):
    if a.dtype.is_floating_point:
        if not torch.equal(a.isnan(), b.isnan()):
            return False
        a, b = a.nan_to_num(0.0), b.nan_to_num(0.0)
        bits = torch.int16 if a.element_size() == 2 else torch.int32
        return torch.equal(a.view(bits), b.view(bits))
    return torch.equal(a, b)


@pytest.mark.parametrize("group,k", [(16, 16), (16, 48), (16, 1040), (64, 320), (256, 768), (256, 5376),
                                     (1024, 1024), (1024, 2048), (0, 37), (0, 1000)])
@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("isa", VECTOR_ISAS)
def test_vector_bfloat16_paths_match_baseline(isa, group, k, seed):
    x = _rows(6, k, seed)
    # A given scale small enough that many quotients pass 127 (and some would overflow int32).
    scale = torch.tensor(float(x.float().abs().nan_to_num(0.0, 0.0, 0.0).amax()) / 127 / 1e9)
    with _cpu_isa("baseline"):
        reference = _results(x, group, scale)
    with _cpu_isa(isa):
        mine = _results(x, group, scale)
    for name, values in mine.items():
        for a, b in zip(values, reference[name]):
            assert _same_bits(a, b), name


@pytest.mark.parametrize("isa", VECTOR_ISAS)
def test_vector_bfloat16_codes_of_every_value_match_baseline(isa):
    """The vector quantizers round x * fl(1/s) to bfloat16 without a ties-to-even term, which is
    exact only because such a quotient is never a bfloat16 tie (int8_avx2.h). Every bfloat16
    value, against scales from the smallest to the largest exponents the reciprocal path takes
    and scales that put quotients around the int8 limits, gives the baseline build's codes."""
    x = torch.arange(-(2 ** 15), 2 ** 15, dtype=torch.int32).to(torch.int16).view(torch.bfloat16).reshape(256, 256)
    g = torch.Generator().manual_seed(7)
    mantissas = 1.0 + torch.rand(24, generator=g)
    exponents = torch.randint(-120, 120, (24,), generator=g).float()
    scales = [float(s) for s in (mantissas * torch.exp2(exponents)).to(torch.bfloat16).float()]
    scales += [float(m) / 127 for m in (1.0, 3.0, 1e-30, 3e38)]
    for s in scales:
        scale = torch.tensor(s)
        with _cpu_isa("baseline"):
            reference = ops.quantize_int8_tensorwise(x, scale)[0]
        with _cpu_isa(isa):
            mine = ops.quantize_int8_tensorwise(x, scale)[0]
        assert torch.equal(mine, reference), f"scale {s!r}"
