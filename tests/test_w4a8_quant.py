# SPDX-License-Identifier: Apache-2.0
"""Parity of quantize_w4a8_int8_weight with comfy_kitchen's eager backend (docs/parity.md).

* On eager's own rotated weight, our quantizer (the C op, csrc/math/w4a8_quant.h, on the CPU and
  on the emulated device, which runs the CUDA kernels) gives eager's
  _quantize_rotated_w4a8_int8_weight bit for bit: codes, s_rel, s_channel, correction, in every
  form (the 4-bit codebook, a user's and an unsorted table, uniform, asymmetric, 6-bit with and
  without the scale search), both scale dtypes, group sizes 4 to 2048 (aten's summation cascade
  flushes past 16 terms a stream: groups above 512 values), every weight dtype, nearest and stochastic rounding.
* The whole op: where the rotation is exact in both orders (weights of few significant bits),
  eager's bit for bit, the codebook's choice (frozen or fitted) and the chunks' seeds included;
  on random weights within the rotation's bound: a code differs only where eager's rotated value
  lies within that bound of a decision, which the test counts.
* The emulated device gives the CPU's bits; bad inputs name the op and the argument."""
import pytest
import torch
from comfy_kitchen.backends.eager import w4a8_int8 as EW
from comfy_kitchen.backends.eager.quantization import rotate_int8_convrot_weight as eager_rotate

import comfy_kitchen_c.ops as ops
from comfy_kitchen_c import w4a8_quant as Q
from comfy_kitchen_c._C import ArgumentError, KitchenError
from conftest import kernels_of

DEVICES = ["cpu", "emulated"]
# (bits, symmetric, codebook): the forms
FORMS = [(4, True, True), (4, True, False), (4, False, False), (6, True, False)]
FORM_IDS = ["codebook", "uniform", "asymmetric", "6bit"]


def as_bits(t):
    """A tensor's bits, to compare NaN-free results exactly (float8 as bytes, floats as ints)."""
    if t is None:
        return None
    if t.dtype == torch.float8_e4m3fn:
        return t.view(torch.uint8)
    if t.dtype == torch.float32:
        return t.view(torch.int32)
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16)
    return t


def assert_same(ours, ref, what):
    names = ("qdata", "s_rel", "s_channel", "correction", "codebook")
    for name, a, b in zip(names, ours, ref):
        if a is None or b is None:
            assert a is None and b is None, f"{what}: {name} {a is None} against {b is None}"
            continue
        assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {name} {a.dtype}{list(a.shape)}"
        bad = (as_bits(a) != as_bits(b)).sum().item()
        assert bad == 0, f"{what}: {name} differs in {bad} of {a.numel()}"


def ours_on_rotated(rot, group, symmetric, scale_dtype, codebook, table, seed, bits, search, device):
    """Our quantizer (the C op) on a given rotated weight, as eager's _quantize_rotated_w4a8_int8_weight."""
    n, k = rot.shape
    mode = Q._mode("test", symmetric, codebook, bits)
    out = (torch.empty((n, k * bits // 8), dtype=torch.int8), torch.empty((n, k // group), dtype=scale_dtype),
           torch.empty(n), torch.empty((k // group, n), dtype=rot.dtype) if mode == Q.MODE_ASYM else None)
    use = table if mode == Q.MODE_ALS and bits == 4 else None
    with kernels_of(device):
        Q._quantize_chunk("test", rot.contiguous(), use, out, 0, group, bits, mode, search, seed)
    return out + (use,)


def weight(n, k, dtype, seed, scale=0.05):
    return (torch.randn(n, k, generator=torch.Generator().manual_seed(seed)) * scale).to(dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("bits,symmetric,codebook", FORMS, ids=FORM_IDS)
@pytest.mark.parametrize("group", [4, 8, 16, 32, 64])
@pytest.mark.parametrize("scale_dtype", [torch.float8_e4m3fn, torch.float32], ids=["e4m3", "f32"])
@pytest.mark.parametrize("seed", [0, 7], ids=["nearest", "stochastic"])
def test_on_eagers_rotated_weight(device, bits, symmetric, codebook, group, scale_dtype, seed):
    if bits == 6 and group % 16:
        pytest.skip("6-bit groups are multiples of 16")
    w = weight(40, 256, torch.bfloat16, group + bits)
    rot = eager_rotate(w, 64)
    table = Q._frozen_table("cpu")
    for search in ((True, False) if bits == 6 else (True,)):
        ref = EW._quantize_rotated_w4a8_int8_weight(rot, group, symmetric, scale_dtype, codebook, table, seed,
                                                     bits, search)
        ours = ours_on_rotated(rot, group, symmetric, scale_dtype, codebook, table, seed, bits, search, device)
        assert_same(ours, ref, f"{device} search={search}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("bits,symmetric,codebook", FORMS, ids=FORM_IDS)
def test_every_weight_dtype(device, dtype, bits, symmetric, codebook):
    rot = eager_rotate(weight(24, 512, dtype, 3), 256)
    for seed in (0, 11):
        ref = EW._quantize_rotated_w4a8_int8_weight(rot, 16, symmetric, torch.float8_e4m3fn, codebook,
                                                     Q._frozen_table("cpu"), seed, bits, True)
        ours = ours_on_rotated(rot, 16, symmetric, torch.float8_e4m3fn, codebook, Q._frozen_table("cpu"), seed,
                               bits, True, device)
        assert_same(ours, ref, f"{device} {dtype} seed {seed}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("group", [128, 512, 2048])
@pytest.mark.parametrize("bits", [4, 6])
def test_large_groups_sum_in_atens_cascade(device, group, bits):
    """Groups of 128 to 2048 values: each of aten's 32 summation streams takes 4 to 64 terms;
    past 16 its cascade flushes a level and sums on (math/aten_sum.h): a build without the flush
    failed the 2048 case."""
    rot = eager_rotate(weight(4, 4096, torch.bfloat16, group), 256)
    ref = EW._quantize_rotated_w4a8_int8_weight(rot, group, True, torch.float32, True, Q._frozen_table("cpu"), 0,
                                                 bits, True)
    ours = ours_on_rotated(rot, group, True, torch.float32, True, Q._frozen_table("cpu"), 0, bits, True, device)
    assert_same(ours, ref, f"{device} group {group}")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("table", ["user", "unsorted", "ties"])
def test_other_tables(device, table):
    """A user's table (codebook_tensor), an unsorted one (aten's binary search, not the sorted
    one's shortcut) and one with equal levels (ties go to the lower index)."""
    g = torch.Generator().manual_seed(5)
    t = {"user": torch.randn(16, generator=g).sort().values,
         "unsorted": torch.randn(16, generator=g),
         "ties": torch.tensor([-1.0, -0.5, -0.5, -0.5, -0.2, -0.1, 0.0, 0.0, 0.1, 0.2, 0.3, 0.3, 0.5, 0.7, 0.9,
                               1.0])}[table]
    rot = eager_rotate(weight(32, 256, torch.bfloat16, 9), 256)
    for seed in (0, 4):
        ref = EW._quantize_rotated_w4a8_int8_weight(rot, 16, True, torch.float8_e4m3fn, True, t, seed, 4, True)
        ours = ours_on_rotated(rot, 16, True, torch.float8_e4m3fn, True, t, seed, 4, True, device)
        assert_same(ours, ref, f"{device} {table} seed {seed}")


def few_bit_weight(n, k, dtype, seed, spikes=False):
    """Weights whose rotation is exact in any summation order: multiples of 2^-6 of at most
    3 units (and, with spikes, 6% of them 48 units), so every partial sum of a rotated value (a
    signed sum of at most 256 of them, times 2^-4 for G = 256) is exact in float32: eager's
    matmul and our butterflies give the same value, rounded once to the dtype."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randint(-3, 4, (n, k), generator=g).float()
    if spikes:
        w = torch.where(torch.rand(n, k, generator=g) < 0.06, torch.full_like(w, 48.0), w)
    return (w * 2.0 ** -6).to(dtype)


@pytest.mark.parametrize("bits,symmetric,codebook", FORMS, ids=FORM_IDS)
@pytest.mark.parametrize("seed", [0, 3], ids=["nearest", "stochastic"])
def test_whole_op_where_the_rotation_is_exact(bits, symmetric, codebook, seed):
    for dtype in (torch.bfloat16, torch.float32):
        w = few_bit_weight(64, 512, dtype, bits + seed)
        kw = dict(group_size=16, convrot_groupsize=256, symmetric=symmetric, codebook=codebook,
                  stochastic_rounding=seed, bits=bits)
        assert_same(ops.quantize_w4a8_int8_weight(w, **kw), EW.quantize_w4a8_int8_weight(w, **kw), f"{dtype}")


def test_fitted_codebook_and_chunks(monkeypatch):
    """A heavy-tailed rotated weight makes eager fit its codebook (the kurtosis gate) from seeded samples;
    ours fits the same one on the same (exactly rotated) sample.  With chunks of 32 rows (both
    sides' budget lowered) each chunk's stochastic seed is eager's (seed + first row); with the
    samples' limits lowered too, every seeded draw of the choice runs on both sides."""
    monkeypatch.setattr(EW, "_QUANT_ROW_ELEM_BUDGET", 32 * 256)
    monkeypatch.setattr(Q, "CHUNK_VALUES", 32 * 256)
    # the samples' limits lowered on both sides, so that each seeded draw runs: the row sample of the
    # codebook's choice (40 of the 100 rows), the kurtosis gate's (4,096 values), the fit's (5,000)
    monkeypatch.setattr(EW, "_CODEBOOK_SAMPLE_ELEMS", 40 * 256)
    monkeypatch.setattr(Q, "CODEBOOK_SAMPLE_VALUES", 40 * 256)
    monkeypatch.setattr(EW, "_KURTOSIS_SAMPLE", 4096)
    monkeypatch.setattr(Q, "KURTOSIS_SAMPLE", 4096)
    fit = EW._fit_codebook
    monkeypatch.setattr(EW, "_fit_codebook", lambda values, levels=16, iterations=25, sample_size=5000:
                        fit(values, levels, iterations, sample_size))
    monkeypatch.setattr(Q, "FIT_SAMPLE", 5000)
    # heavy tails in the rotated domain: the weight is the rotation of spiky few-bit values (the
    # rotation is its own inverse, and both rotations are exact in float32 here)
    w = eager_rotate(few_bit_weight(100, 256, torch.float32, 1, spikes=True), 256)
    for seed in (0, 9):
        ours = ops.quantize_w4a8_int8_weight(w, stochastic_rounding=seed)
        assert not torch.equal(ours[4], Q._frozen_table("cpu")), "the gate did not fit a codebook"
        assert_same(ours, EW.quantize_w4a8_int8_weight(w, stochastic_rounding=seed), f"seed {seed}")


@pytest.mark.parametrize("bits,symmetric,codebook", FORMS, ids=FORM_IDS)
def test_emulated_device_gives_the_cpus_bits(bits, symmetric, codebook):
    w = weight(48, 512, torch.bfloat16, 2)
    kw = dict(symmetric=symmetric, codebook=codebook, bits=bits)
    for seed in (0, 5):
        cpu = ops.quantize_w4a8_int8_weight(w, stochastic_rounding=seed, **kw)
        with kernels_of("emulated"):
            emu = ops.quantize_w4a8_int8_weight(w, stochastic_rounding=seed, **kw)
        assert_same(emu, cpu, f"seed {seed}")


@pytest.mark.parametrize("bits,symmetric,codebook", FORMS, ids=FORM_IDS)
def test_random_weights_differ_only_near_decisions(bits, symmetric, codebook):
    """Random bfloat16 weights: our rotation is within the rotated ops' bound of eager's, so the
    rotated weights may differ in a last place (conftest.assert_rotation_close checks them); on
    the rotated weights that agree exactly nothing may differ, and where they differ a code may
    move to its neighbour.  Counted: codes differing in a row whose rotated values all agree."""
    w = weight(128, 512, torch.bfloat16, 13, scale=0.02)
    ours = ops.quantize_w4a8_int8_weight(w, symmetric=symmetric, codebook=codebook, bits=bits)
    ref = EW.quantize_w4a8_int8_weight(w, symmetric=symmetric, codebook=codebook, bits=bits)
    same_rows = (as_bits(Q._rotated("test", w, 256)) == as_bits(eager_rotate(w, 256))).all(dim=1)
    assert bool(same_rows.any()), "no row rotated alike: the test compares nothing"
    for name, a, b in zip(("qdata", "s_rel", "s_channel"), ours, ref):
        bad = (as_bits(a) != as_bits(b))[same_rows].sum().item()
        assert bad == 0, f"{name}: {bad} values differ in rows rotated alike"
    codes_moved = (ours[0] != ref[0]).float().mean().item()
    assert codes_moved < 0.01, f"{codes_moved:.2%} of the code bytes differ"


def test_codebook_tensor_is_used_and_returned():
    w = few_bit_weight(32, 256, torch.float32, 4)
    t = torch.linspace(-1, 1, 16)
    ours = ops.quantize_w4a8_int8_weight(w, codebook_tensor=t)
    assert torch.equal(ours[4], t)
    rot = eager_rotate(w, 256)
    assert_same(ours, EW._quantize_rotated_w4a8_int8_weight(rot, 16, True, torch.float8_e4m3fn, True, t),
                "codebook_tensor")


def test_empty_weight():
    w = torch.empty(0, 256)
    ours = ops.quantize_w4a8_int8_weight(w, codebook=False)
    assert_same(ours, EW.quantize_w4a8_int8_weight(w, codebook=False), "empty")
    with pytest.raises(ArgumentError, match="quantize_w4a8_int8_weight: argument 'weight': an empty weight"):
        ops.quantize_w4a8_int8_weight(w)


@pytest.mark.parametrize("call,match", [
    (lambda w: ops.quantize_w4a8_int8_weight(w.int()), "argument 'weight'"),
    (lambda w: ops.quantize_w4a8_int8_weight(w[0]), "argument 'weight'"),
    (lambda w: ops.quantize_w4a8_int8_weight(w[:, :200]), "argument 'weight': K=200"),
    (lambda w: ops.quantize_w4a8_int8_weight(w, group_size=2), "group_size=2"),
    (lambda w: ops.quantize_w4a8_int8_weight(w, group_size=24), "group_size=24"),
    (lambda w: ops.quantize_w4a8_int8_weight(w, convrot_groupsize=48), "convrot_groupsize"),
    (lambda w: ops.quantize_w4a8_int8_weight(w, bits=5), "argument 'bits'"),
    (lambda w: ops.quantize_w4a8_int8_weight(w, bits=6, group_size=8), "group_size=8"),
    (lambda w: ops.quantize_w4a8_int8_weight(w, bits=6, symmetric=False), "argument 'symmetric'"),
    (lambda w: ops.quantize_w4a8_int8_weight(w, scale_dtype=torch.float16), "argument 'scale_dtype'"),
    (lambda w: ops.quantize_w4a8_int8_weight(w, codebook_tensor=torch.zeros(8)), "argument 'codebook_tensor'"),
    (lambda w: ops.quantize_w4a8_int8_weight(w, stochastic_rounding=1.5), "argument 'stochastic_rounding'"),
    (lambda w: ops.quantize_w4a8_int8_weight(w, symmetric="yes"), "argument 'symmetric'"),
    (lambda w: ops.quantize_w4a8_int8_weight(torch.where(w > 0.1, float("nan"), w)), "NaN or infinite"),
    (lambda w: ops.quantize_w4a8_int8_weight(torch.where(w > 0.1, float("inf"), w)), "NaN or infinite"),
])
def test_bad_inputs_name_op_and_argument(call, match):
    with pytest.raises(KitchenError, match=f"quantize_w4a8_int8_weight: .*{match}"):
        call(weight(8, 256, torch.float32, 0))


def test_the_c_op_checks_its_own_arguments():
    """The C op refuses a form and a table that do not go together, by name (the wrapper is not
    its only guard)."""
    rot = weight(4, 256, torch.float32, 0)
    out = (torch.empty((4, 128), dtype=torch.int8), torch.empty((4, 16)), torch.empty(4), None)
    with pytest.raises(ArgumentError, match="argument 'table'"):
        Q._quantize_chunk("test", rot, None, out, 0, 16, 4, Q.MODE_ALS, True, 0)
    with pytest.raises(ArgumentError, match="argument 'mode'"):
        Q._quantize_chunk("test", rot, None, out, 0, 16, 6, Q.MODE_UNIFORM, True, 0)
    with pytest.raises(ArgumentError, match="argument 'correction'"):
        Q._quantize_chunk("test", rot, None, out, 0, 16, 4, Q.MODE_ASYM, True, 0)
