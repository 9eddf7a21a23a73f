# SPDX-License-Identifier: Apache-2.0
"""The fuzzer in the test suite: a short pass with a fixed seed (the longer runs and their
findings: tests/fuzz/README.md), and every finding kept as a regression case, written out as
a plain call so that it survives changes to the drawing code."""
import pytest
import torch

import comfy_kitchen_c as ckc
from comfy_kitchen_c import op_list, ops
import oracle
import run
from targets import TARGETS
from conftest import MODULATED, RESIDUAL, RMS_NORM_ACT, ck_lacks, ck_lacks_reason, requires_ck, skip_unless_ck

SHORT_PASS = 600  # about 15 s here; tests/fuzz/README.md has the long runs


# What a target's draws and eager reference need beyond comfy_kitchen 0.2.31: the newest has all of
# it, and the pass then fuzzes every target with the same inputs as before; an older one's pass
# leaves out the targets it cannot be a reference for (and says so, as a skip, after passing).
FUZZ_NEEDS = {
    "int8_linear": (*RMS_NORM_ACT, *RESIDUAL, "input_act='situ'"),
    "int8_linear_modulated": MODULATED[:1],
    "int8_linear_rms_modulated": MODULATED[1:],
    # the draws include negative per-tensor scales: 0.2.31's eager made their block scales NaN
    "quantize_nvfp4": ("saturating nvfp4 block scales",),
    **{op: ("fused split-half rope",) for op in ("apply_rope_split_half1", "apply_rope_split_half",
                                                  "apply_rope_split_half1_", "apply_rope_split_half_",
                                                  "rms_rope_split_half1", "rms_rope_split_half",
                                                  "rms_rope_split_half1_", "rms_rope_split_half_")},
}


def test_short_pass():
    left_out = {op: ck_lacks(*FUZZ_NEEDS.get(op, ())) for op in TARGETS}
    left_out = {op: missing for op, missing in left_out.items() if missing}
    fuzzed = sorted(set(TARGETS) - set(left_out))
    stats = run.run(SHORT_PASS, seed=20260101, ops=fuzzed)
    assert not stats.failures, run.report(stats, 0.0)
    answered = sum(v for (op, outcome), v in stats.by_outcome.items() if outcome == "answered")
    refused = sum(v for (op, outcome), v in stats.by_outcome.items() if outcome.startswith("refused"))
    # the pass exercises both sides of every op's contract
    assert answered > SHORT_PASS / 3 and refused > SHORT_PASS / 10, run.report(stats, 0.0)
    assert {op for (op, outcome) in stats.by_outcome if outcome == "answered"} == set(fuzzed)
    if left_out:
        missing = dict.fromkeys(f for m in left_out.values() for f in m)
        pytest.skip(f"{ck_lacks_reason(missing)}: not fuzzed {sorted(left_out)} (the other targets passed)")


def test_every_public_op_has_a_target():
    # ops.py's own functions and the int8 linear ops it re-exports from linear.py
    public = {name for name in dir(ops) if not name.startswith(("_", "check_")) and callable(getattr(ops, name))
              and getattr(getattr(ops, name), "__module__", "") in (ops.__name__, "comfy_kitchen_c.linear")}
    # the ops of the list (comfy_kitchen_c/op_list.py), and the memory bound's setter and getter
    listed = {op.name for op in op_list.OPS}
    assert public - listed == {"linear_memory_limit", "set_linear_memory_limit"}
    # not ops: the getter of the memory bound (covered by its setter's target)
    assert public - set(TARGETS) == {"linear_memory_limit"}


def test_every_registered_op_is_fuzzed_through_the_registry():
    from comfy_kitchen.registry import registry

    # of the registered ops, those the installed comfy_kitchen declares (backend.py; all, in the newest)
    declared = ckc.backend.declared_ops()
    served = set(registry._capabilities.get("c", ()))
    assert served == {t.op for t in TARGETS.values() if t.registered} & declared == {
        op.name for op in op_list.OPS if op.registered} & declared


def test_the_oracle_rejects_a_wrong_result():
    """The comparison can fail: one code off, one scale bit off, an error naming no argument."""
    x = torch.randn(4, 32)
    q, s = ops.quantize_int8_rowwise(x)
    ref = TARGETS["quantize_int8_rowwise"].reference({"x": x})
    TARGETS["quantize_int8_rowwise"].compare((q, s), ref, {"x": x})
    q2 = q.clone()
    q2[1, 3] += 1 if q2[1, 3] < 127 else -1
    with pytest.raises(oracle.Mismatch):
        TARGETS["quantize_int8_rowwise"].compare((q2, s), ref, {"x": x})
    with pytest.raises(oracle.Mismatch):
        TARGETS["quantize_int8_rowwise"].compare((q, s.nextafter(torch.full_like(s, 9.0))), ref, {"x": x})
    with pytest.raises(oracle.Mismatch):
        oracle.check_error("quantize_int8_rowwise", ("x",), ckc.ArgumentError("quantize_int8_rowwise: bad x"))
    with pytest.raises(oracle.Mismatch):
        oracle.check_error("quantize_int8_rowwise", ("x",), ZeroDivisionError("integer division by zero"))


# ---- findings, kept as regression cases ---------------------------------------------------------

def test_rows_of_length_zero_are_named_not_divided_by():
    """Found: rows_of computed rows as numel // K, a ZeroDivisionError for [4, 0]."""
    with pytest.raises(ckc.ArgumentError, match="quantize_int8_rowwise: argument 'x': rows of length 0"):
        ops.quantize_int8_rowwise(torch.empty(4, 0))
    assert ops.dequantize_int8_simple(torch.empty(4, 0, dtype=torch.int8), torch.ones(4, 1)).shape == (4, 0)


def test_a_call_missing_an_argument_falls_through_the_registry():
    """Found: the backend's call rule let the TypeError of a missing argument escape the registry
    (and, with the checks' own defaults, accepted calls the op itself refuses)."""
    from comfy_kitchen.exceptions import NoCapableBackendError
    from comfy_kitchen.registry import registry

    for op, kwargs in (("dequantize_int8_simple", {"scale": torch.ones(1)}),
                       ("rotate_int8_convrot_weight", {"weight": torch.randn(2, 256)})):
        with pytest.raises(NoCapableBackendError):
            registry.get_implementation(op, backend="c", kwargs=kwargs)


def test_an_unhashable_dtype_code_is_refused_by_the_check_not_the_speed_rule(tmp_path):
    """Found (1:98189): with the CPU speed rules measuring, output_dtype_code=[1.0] reached the
    rule's table look-up before the check and escaped the registry as a TypeError."""
    from comfy_kitchen.exceptions import NoCapableBackendError
    from comfy_kitchen.registry import registry

    from comfy_kitchen_c import cpu_speed

    kwargs = {"q": torch.ones(5, 7, 1, dtype=torch.int8), "scale": torch.ones(5, 7, 1), "output_dtype_code": [1.0]}
    cpu_speed.configure(mode="measure", cache_file=str(tmp_path / "cpu_speed.json"))  # the rules on, as users run
    try:
        assert cpu_speed.rule_for("dequantize_int8_simple_dtype")(kwargs) is None
        with pytest.raises(NoCapableBackendError):
            registry.get_implementation("dequantize_int8_simple_dtype", backend="c", kwargs=kwargs)
    finally:
        cpu_speed.configure()


def test_a_tensorwise_scale_with_more_dims_gives_eagers_shape():
    """Found: eager's q is x / scale broadcast, so a [1, 1] scale makes a 1-D x's q [1, K]."""
    from comfy_kitchen.backends.eager import quantization as E

    x, scale = torch.randn(5, dtype=torch.float16), torch.tensor([[0.5]], dtype=torch.bfloat16)
    (q, s), (qr, sr) = ops.quantize_int8_tensorwise(x, scale), E.quantize_int8_tensorwise(x, scale)
    assert q.shape == qr.shape == (1, 5) and torch.equal(q, qr) and torch.equal(s, sr)


def test_a_negative_per_tensor_scale_saturates_block_scales_as_eager():
    """Found: a block scale below -448 (a negative per-tensor scale) became e4m3 NaN; eager's
    float8 cast saturates it to -448."""
    from comfy_kitchen.backends.eager import quantization as E

    x = torch.full((2, 16), 3000.0)  # block scale 3000 / 6 / -0.5 = -1000, below -448
    for pts in (torch.tensor(-0.5), -0.5):
        q, s = ops.quantize_nvfp4(x, pts)
        assert s.view(torch.uint8)[0, 0] == 0xFE  # -448
    # comfy_kitchen 0.2.31's eager gave NaN there (fixed later): ours follow the newest eager
    skip_unless_ck("saturating nvfp4 block scales")
    for pts in (torch.tensor(-0.5), -0.5):
        (q, s), (qr, sr) = ops.quantize_nvfp4(x, pts), E.quantize_nvfp4(x, torch.tensor(-0.5))
        assert torch.equal(s.view(torch.uint8), sr.view(torch.uint8)) and torch.equal(q, qr)


def test_an_infinite_per_tensor_scale_gives_zero_codes():
    """Found (documented, not a bug): pts = inf makes every block's total scale inf * 0 = NaN;
    eager's codes there come from casting NaN, ours are 0 (docs/parity.md)."""
    q, s = ops.quantize_nvfp4(torch.randn(2, 32), float("inf"))
    assert not q.any() and not s.view(torch.uint8).any()


@requires_ck(*RMS_NORM_ACT, "E.int8_linear_rms_modulated")
def test_rms_norm_of_a_strided_row_is_that_of_the_contiguous_row():
    """Found (seed 1, input 13555): torch's rms_norm sums a strided float32 row in another order
    than a contiguous one, so eager's bits depend on the layout (2-4 ulps here).  Ours are the
    contiguous row's whatever the layout (docs/parity.md), bit for bit with eager's on it."""
    from comfy_kitchen.backends.eager import quantization as E

    g = torch.Generator().manual_seed(13555)
    layout_mattered = 0
    for _ in range(20):
        x = torch.randn(13, 2, generator=g).t()  # rows of stride 2
        nw, ms = torch.randn(13, generator=g), torch.randn(13, generator=g) * 0.1
        w = torch.randint(-127, 128, (3, 13), generator=g, dtype=torch.int8)
        ws = torch.rand(3, generator=g).half() + 0.01
        args = (1e-5, ms, w, ws, None, torch.float32)
        ours = ops.int8_linear_rms_modulated(x, nw, *args)
        assert torch.equal(ours, E.int8_linear_rms_modulated(x.contiguous(), nw, *args))
        assert torch.equal(ours, ops.int8_linear_rms_modulated(x.contiguous(), nw, *args))
        assert torch.equal(ops.int8_linear(x, w, ws, None, torch.float32, input_act="rms_norm", input_act_weight=nw,
                                           input_act_eps=1e-5),
                           E.int8_linear(x.contiguous(), w, ws, None, torch.float32, input_act="rms_norm",
                                         input_act_weight=nw, input_act_eps=1e-5))
        f = torch.nn.functional.rms_norm
        layout_mattered += not torch.equal(f(x, (13,), nw, 1e-5), f(x.contiguous(), (13,), nw, 1e-5))
    assert layout_mattered  # the finding's premise: torch's own bits depend on the layout here


def test_a_tensor_group_size_of_the_packed_w4a8_linear_is_refused_by_name():
    """Found (seed 1, inputs 14449 and 44049): a tensor group_size reached `group_size != 16`, and
    the truth value of the comparison raised torch's RuntimeError."""
    x, s_channel = torch.randn(2, 256), torch.ones(16)
    packed = torch.zeros(16 * 256 // 2 + 16 * 256 // 16, dtype=torch.int8)
    with pytest.raises(ckc.ArgumentTypeError, match="w4a8_packed_linear: argument 'group_size'"):
        ops.w4a8_packed_linear(x, packed, torch.empty(0), s_channel, group_size=torch.tensor([16, 16]))


def test_rot_dim_is_applied_to_q_and_k_each():
    """Found (seed 1, inputs 28692 and 94842): the split-half rms_rope pair ops took q's rotated
    length for k too; a q no longer than rot_dim (rotated whole) made k rotate all of its values.
    Eager slices each at rot_dim."""
    skip_unless_ck("fused split-half rope", "comfy_kitchen.backends.eager.rope:rms_rope_split_half")
    from comfy_kitchen.backends.eager import rope as E

    q, k = torch.randn(2, 1, 3, 4), torch.randn(2, 1, 3, 24)
    pos = torch.arange(3, dtype=torch.float32)[:, None] * torch.tensor([1.0, 0.5])
    freqs = torch.stack([pos.cos(), -pos.sin(), pos.sin(), pos.cos()], -1).reshape(1, 1, 3, 2, 2, 2)
    qs, ks = torch.rand(4) + 0.5, torch.rand(24) + 0.5
    ours = ops.rms_rope_split_half(q, k, freqs, qs, ks, 1e-6, rot_dim=4)
    ref = E.rms_rope_split_half(q, k, freqs, qs, ks, 1e-6, rot_dim=4)
    assert all(torch.equal(a, b) for a, b in zip(ours, ref))
    q2, k2 = q.clone(), k.clone()
    ops.rms_rope_split_half_(q2, k2, freqs, qs, ks, 1e-6, rot_dim=4)
    assert torch.equal(q2, ref[0]) and torch.equal(k2, ref[1])


def test_torch_activation_of_a_strided_x_is_that_of_the_contiguous_rows():
    """Found (seed 1, input 84820): on the CPU's library-GEMM path (16 rows and more) the rms_norm
    activation, torch's there (cpu_speed.py), summed a strided row in another order than a
    contiguous one: one row's codes differed.  Ours are the contiguous rows' whatever the layout."""
    skip_unless_ck("input_act='rms_norm'")
    from comfy_kitchen.backends.eager import quantization as E

    g = torch.Generator().manual_seed(84820)
    x = (torch.randn(10, 4, 4, generator=g) * 100).permute(2, 1, 0)  # [4, 4, 10], strided: 16 rows
    w = torch.randint(-127, 128, (20, 10), generator=g, dtype=torch.int8)
    s, nw = torch.rand(1, generator=g) + 0.01, torch.rand(10, generator=g) + 0.5
    ours = ops.int8_linear(x, w, s, None, torch.float32, input_act="rms_norm", input_act_weight=nw, input_act_eps=0.0)
    ref = E.int8_linear(x.contiguous(), w, s, None, torch.float32, input_act="rms_norm", input_act_weight=nw,
                        input_act_eps=0.0)
    assert torch.equal(ours, ref)


def test_the_w4a8_quantizer_refuses_stochastic_rounding_none_as_eager_does():
    """Found (seed 5, input 2528 of the quantizer's own run, under the sanitizers): our shared seed
    check reads None as "off", but eager's quantizer compares the seed with 0, a TypeError for
    None; ours answered where eager raised.  Refused by name now (the registry then gives the call
    to the next backend, which raises as eager does)."""
    from comfy_kitchen.backends.eager import w4a8_int8 as EW

    w = torch.randn(16, 256)
    with pytest.raises(TypeError):
        EW.quantize_w4a8_int8_weight(w, stochastic_rounding=None)
    with pytest.raises(ckc.ArgumentTypeError, match="quantize_w4a8_int8_weight: argument 'stochastic_rounding'"):
        ops.quantize_w4a8_int8_weight(w, stochastic_rounding=None)
