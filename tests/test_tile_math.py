# SPDX-License-Identifier: Apache-2.0
"""The arithmetic forms the row-tile kernels use instead of the general kernels' (kernels/tile.cuh,
kernels/int8_tile.cu, kernels/nvfp4.cu), checked exhaustively or on targeted sets in float32
with numpy (IEEE float32 arithmetic, correctly rounded like the GPU's without contraction):

* the bfloat16 code from the reciprocal: min(round_bf16(v * inv), 127) + 1.5 * 2^23, low byte,
  equals ckc_int8_code(v, s) (division, rounding, clamp to [-128, 127]) for every bfloat16 v
  with |v| <= A, over a set of row absmaxes A (every binade, the scale floor, the largest);
* x * 2^-k (k = 2..5, the rotation's norm) is exact for every bfloat16 and float16 x, which
  makes the fused first butterfly stage (fma) round like the separate one;
* the dequantizer's int8-to-float (biased byte under the exponent of 2^23) for all 256 codes;
* the NVFP4 dequantizer's e2m1 values without a conversion, for all 16 codes.

The kernels themselves are compared bit for bit with the CPU path on the emulated device
(tests/test_emulated_device.py); this checks the arguments in their comments on far more values."""
import numpy as np
import pytest

F32 = np.float32


def bf16_values() -> np.ndarray:
    """Every finite bfloat16 value, as float32."""
    bits = np.arange(1 << 16, dtype=np.uint32)
    v = (bits << 16).view(np.float32)
    return v[np.isfinite(v)]


def round_bf16(x: np.ndarray) -> np.ndarray:
    """Round to nearest even to bfloat16, as float32 (finite inputs)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(np.float32)


def reference_codes(v: np.ndarray, divisor: F32) -> np.ndarray:
    """ckc_int8_code(v, divisor, bfloat16): round_bf16(v / s), round half to even, clamp."""
    t = round_bf16(v / divisor)
    return np.clip(np.rint(t), -128, 127).astype(np.int64)


def reciprocal_codes(v: np.ndarray, inv: F32) -> np.ndarray:
    """ckc_tile_code_bf16: the low byte of min(round_bf16(v * inv), 127) + 1.5 * 2^23."""
    r = round_bf16(v * inv)
    b = (np.minimum(r, F32(127.0)) + F32(12582912.0)).view(np.uint32) & 0xFF
    return b.astype(np.int8).astype(np.int64)


def row_scale(absmax: F32) -> tuple[F32, F32, bool]:
    """(divisor, inv, reciprocal exact) as ckc_tile_row_scale computes them for bfloat16."""
    scale = max(F32(absmax) / F32(127.0), F32(1e-30))
    divisor = round_bf16(np.array([scale], dtype=np.float32))[0]
    divisor = divisor if divisor != 0 else F32(2.0 ** -126)
    inv = F32(1.0) / divisor
    exact = F32(2.0 ** -126) <= divisor <= F32(2.0 ** 126) and inv >= F32(2.0 ** -126)
    return divisor, inv, bool(exact)


def top_rows() -> np.ndarray:
    """Every positive bfloat16 absmax A whose own code is clamped: round_bf16(A * inv) = 127.5."""
    a = bf16_values()
    a = a[a > 0]
    keep = []
    for x in a:
        divisor, inv, exact = row_scale(x)
        if exact and round_bf16(np.array([x * inv], dtype=np.float32))[0] > 127:
            keep.append(x)
    return np.array(keep, dtype=np.float32)


def absmaxes() -> list[F32]:
    """Row absmaxes: every power of two, 1.5x and the largest mantissa in each binade, the scale
    floor region, the largest bfloat16, and one in 64 of the rows whose absmax code is clamped."""
    out = list(top_rows()[::64])
    for e in range(-133, 128):
        for m in (1.0, 1.0078125, 1.5, 1.9921875, 127 / 64, 127 / 128 * 2):
            a = F32(m * 2.0 ** e)
            if np.isfinite(a) and a > 0:
                out.append(round_bf16(np.array([a], dtype=np.float32))[0])
    out += [F32(3.3895314e38), F32(1.27e-28), F32(1.26e-28), F32(127.0), F32(127.5), F32(128.0), F32(254.0)]
    return sorted(set(x for x in out if np.isfinite(x) and x > 0))


def test_bf16_codes_from_the_reciprocal_equal_the_division():
    values = bf16_values()
    checked = 0
    for a in absmaxes():
        divisor, inv, exact = row_scale(a)
        if not exact:
            continue  # such rows take the division (ckc_tile_code)
        v = values[np.abs(values) <= a]
        want = reference_codes(v, divisor)
        got = reciprocal_codes(v, inv)
        bad = np.nonzero(want != got)[0]
        assert bad.size == 0, f"absmax {a}: v={v[bad[:5]]} division {want[bad[:5]]} reciprocal {got[bad[:5]]}"
        checked += v.size
    assert checked > 10_000_000


def test_the_reciprocal_form_needs_its_clamp_and_nothing_more():
    """Over every bfloat16 absmax A (the largest |v * inv| of a row is A * inv): some rows reach
    round_bf16(A * inv) = 127.5, whose code 128 the clamp makes 127 (thousands of rows), and
    none goes past 127.5, so -A never needs a clamp (its code is at least -128)."""
    a = bf16_values()
    a = a[a > 0]
    worst = F32(0.0)
    for x in a:
        divisor, inv, exact = row_scale(x)
        if exact:
            worst = max(worst, round_bf16(np.array([x * inv], dtype=np.float32))[0])
    assert worst == F32(127.5)
    assert top_rows().size > 1000


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_scaling_a_16_bit_value_by_the_norm_is_exact(dtype):
    bits = np.arange(1 << 16, dtype=np.uint32)
    if dtype == "bfloat16":
        x = (bits << 16).view(np.float32)
    else:
        x = bits.astype(np.uint16).view(np.float16).astype(np.float32)
    x = x[np.isfinite(x)]
    for k in (2, 3, 4, 5):
        n = F32(2.0 ** -k)
        assert np.array_equal((x * n).astype(np.float64), x.astype(np.float64) * 2.0 ** -k)


def test_codes_to_floats():
    """ckc_tile_codes_to_floats: float(0x4B000000 | (b ^ 0x80)) - (2^23 + 128) == b."""
    b = np.arange(-128, 128, dtype=np.int64)
    biased = (b.astype(np.int8).view(np.uint8).astype(np.uint32) ^ 0x80)
    v = (np.uint32(0x4B000000) | biased).view(np.float32) - F32(8388736.0)
    assert np.array_equal(v, b.astype(np.float32))


def test_nvfp4_values_without_a_conversion():
    """ckc_nvfp4_value equals ckc_e2m1_to_f32 for all 16 codes (bits, signed zero included)."""
    table = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    for code in range(16):
        m = code & 7
        mag = (0x3F000000 + (m << 22)) if m >= 2 else (0x3F000000 if m else 0)
        got = np.array([mag | (code & 8) << 28], dtype=np.uint32).view(np.float32)[0]
        want = F32(-table[m] if code & 8 else table[m])
        assert got.view(np.uint32) == want.view(np.uint32), code
