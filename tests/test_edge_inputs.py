# SPDX-License-Identifier: Apache-2.0
"""Inputs at the edges of what a tensor can be: views with torch's negation bit (their memory
holds the un-negated values, which DLPack would export as they are), and empty tensors, for
which every op does what comfy_kitchen's eager backend does: the same empty results, or, where
eager fails, one of our errors naming the op and the argument."""
import pytest
import torch

import comfy_kitchen_c as ckc
from comfy_kitchen_c import _call, ops
from comfy_kitchen_c.testing import emulated_device
from conftest import E, assert_same

X = (torch.randn(8, 64, generator=torch.Generator().manual_seed(5)) * 3).to(torch.bfloat16)
PTS = torch.tensor(0.01)


def neg_views():
    """(name, view with the negation bit, the same values without it)."""
    z = torch.complex(X.float(), -X.float())
    return [
        ("_neg_view", torch._neg_view(X), -X),
        # imag of a conjugate: -imag(z), as a strided view with the negation bit
        ("conj().imag", z.conj().imag, -z.imag),
    ]


NEG_OPS = {
    "quantize_int8_rowwise": lambda x: ops.quantize_int8_rowwise(x),
    "quantize_and_rotate_rowwise": lambda x: ops.quantize_and_rotate_rowwise(x, None, 64),
    "quantize_int8_tensorwise": lambda x: ops.quantize_int8_tensorwise(x),
    "rotate_int8_convrot_weight": lambda x: ops.rotate_int8_convrot_weight(x, 16),
    "quantize_nvfp4": lambda x: ops.quantize_nvfp4(x, PTS),
    "quantize_and_rotate_nvfp4": lambda x: ops.quantize_and_rotate_nvfp4(x, PTS, 16),
    "dequantize_int8_simple": lambda x: ops.dequantize_int8_simple(torch.ones(8, 64, dtype=torch.int8), x[:, :1]),
}


@pytest.mark.parametrize("device", ["cpu", "emulated"])
@pytest.mark.parametrize("op", list(NEG_OPS))
def test_views_with_the_negation_bit_are_read_as_their_values(op, device):
    for name, view, plain in neg_views():
        assert view.is_neg() and not plain.is_neg()
        if device == "emulated":
            with emulated_device():
                ours, ref = NEG_OPS[op](view), NEG_OPS[op](plain)
        else:
            ours, ref = NEG_OPS[op](view), NEG_OPS[op](plain)
        assert_same(ref, ours, f"{op} of {name}")
        assert view.is_neg(), "the caller's view is left as it was"


def test_the_negation_bit_is_not_on_the_raw_values(monkeypatch):
    """The test above can fail: exported as they are (the code before the fix), negated views
    give the codes of the other sign."""
    raw_export = torch.utils.dlpack.to_dlpack
    monkeypatch.setattr(_call, "_capsule", lambda t: None if t is None else raw_export(t))
    view = torch._neg_view(X)
    q_view, _ = ops.quantize_int8_rowwise(view)
    q_plain, _ = ops.quantize_int8_rowwise(-X)
    assert not torch.equal(q_view, q_plain)


def test_complex_tensors_are_refused_by_dtype():
    z = torch.complex(X.float(), X.float()).conj()
    with pytest.raises(ckc.ArgumentTypeError, match="quantize_int8_rowwise: argument 'x': expected dtype"):
        ops.quantize_int8_rowwise(z)


# ---- empty tensors: eager's results, or our named error where eager fails ----------------------

H16 = torch.ones(16, 16)


def _q(shape):
    return torch.empty(shape, dtype=torch.int8)


def _row_scale(shape):
    return torch.empty((*shape[:-1], 1))


def _block_scales(rows, cols):
    return torch.empty(((rows + 127) // 128 * 128) * ((cols // 16 + 3) // 4 * 4), dtype=torch.float8_e4m3fn)


# (name, shapes, call(module, shape), the argument our error names where eager fails)
EMPTY_CASES = [
    ("quantize_int8_rowwise", lambda m, s: m.quantize_int8_rowwise(torch.empty(s)), "x"),
    ("quantize_int8_rowwise seeded", lambda m, s: m.quantize_int8_rowwise(torch.empty(s), 5), "x"),
    ("quantize_and_rotate_rowwise", lambda m, s: m.quantize_and_rotate_rowwise(torch.empty(s), H16, 16), "x"),
    ("quantize_int8_tensorwise", lambda m, s: m.quantize_int8_tensorwise(torch.empty(s)), "x"),
    ("quantize_int8_tensorwise given", lambda m, s: m.quantize_int8_tensorwise(torch.empty(s), 0.5), None),
    ("quantize_int8_tensorwise tensor", lambda m, s: m.quantize_int8_tensorwise(torch.empty(s), torch.tensor(2.0)),
     None),
    ("quantize_int8_convrot_weight", lambda m, s: m.quantize_int8_convrot_weight(torch.empty(s), 16), "weight"),
    ("rotate_int8_convrot_weight", lambda m, s: m.rotate_int8_convrot_weight(torch.empty(s), 16), "weight"),
    ("dequantize_int8_simple", lambda m, s: m.dequantize_int8_simple(_q(s), _row_scale(s)), "q"),
    ("dequantize_int8_simple scalar", lambda m, s: m.dequantize_int8_simple(_q(s), torch.tensor(2.0)), "q"),
    ("dequantize_int8_simple_dtype", lambda m, s: m.dequantize_int8_simple_dtype(_q(s), _row_scale(s), 2), "q"),
    ("dequantize_int8_convrot_weight", lambda m, s: m.dequantize_int8_convrot_weight(_q(s), _row_scale(s), 16), "q"),
    ("dequantize_int8_convrot_weight_dtype",
     lambda m, s: m.dequantize_int8_convrot_weight_dtype(_q(s), _row_scale(s), 16, 1), "q"),
    ("quantize_nvfp4", lambda m, s: m.quantize_nvfp4(torch.empty(s), PTS), "x"),
    ("quantize_nvfp4 padded", lambda m, s: m.quantize_nvfp4(torch.empty(s), PTS, 0.0, True), "x"),
    ("dequantize_nvfp4", lambda m, s: m.dequantize_nvfp4(torch.empty((s[0], s[1] // 2), dtype=torch.uint8), PTS,
                                                         _block_scales(*s)), "qx"),
    ("int8_linear", lambda m, s: m.int8_linear(torch.empty(s), torch.zeros(8, s[1], dtype=torch.int8),
                                               torch.ones(8), None, torch.bfloat16), "x"),
]
EMPTY_SHAPES = [(0, 64), (4, 0), (0, 0), (2, 0, 64), (0,)]
TWO_D_ONLY = ("quantize_nvfp4", "dequantize_nvfp4", "int8_linear")  # their inputs are built from 2-D shapes
EMPTY_PARAMS = [pytest.param(name, call, arg, shape, id=f"{name}-{shape}") for name, call, arg in EMPTY_CASES
                for shape in EMPTY_SHAPES if len(shape) == 2 or not name.startswith(TWO_D_ONLY)]


def _outcome(call):
    try:
        return call(), None
    except Exception as exc:  # noqa: BLE001 - the outcome is compared below
        return None, exc


@pytest.mark.parametrize("name,call,arg,shape", EMPTY_PARAMS)
def test_empty_tensors_as_eager(name, call, arg, shape):
    ref, ref_error = _outcome(lambda: call(E, shape))
    ours, error = _outcome(lambda: call(ops, shape))
    op = name.split()[0]
    if ref_error is not None:
        # our error where eager's is an accident of its code (or a refused rank: the 2-D ops)
        assert isinstance(error, (ckc.ArgumentError, ckc.ArgumentTypeError)), (shape, ref_error, error)
        assert str(error).startswith(f"{op}: argument '"), error
        if arg is not None and error is not None and "dimensions" not in str(error):
            assert f"argument '{arg}'" in str(error), error
        return
    assert error is None, f"eager gives {ref!r}, we raise {error!r}"
    ref = ref if isinstance(ref, tuple) else (ref,)
    ours = ours if isinstance(ours, tuple) else (ours,)
    assert len(ours) == len(ref)
    for a, b in zip(ours, ref):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
        if a.numel():  # the given tensorwise scale
            assert torch.equal(a, b)


def test_empty_tensors_on_the_emulated_device():
    with emulated_device():
        q, s = ops.quantize_int8_rowwise(torch.empty(0, 64))
        out = ops.dequantize_int8_simple_dtype(_q((3, 0)), _row_scale((3, 0)), 1)
        qx, sx = ops.quantize_nvfp4(torch.empty(5, 0), PTS, pad_16x=True)
    assert q.shape == (0, 64) and s.shape == (0, 1)
    assert out.shape == (3, 0) and out.dtype == torch.float16
    assert qx.shape == (16, 0) and sx.shape == (128, 0)


def test_empty_tensors_through_the_registry():
    """The backend's call rules accept the empty calls the op serves: "c" runs them."""
    from comfy_kitchen.registry import registry

    kwargs = {"x": torch.empty(0, 64), "stochastic_rounding": 0}
    impl = registry.get_implementation("quantize_int8_rowwise", backend="c", kwargs=kwargs)
    q, s = impl(**kwargs)
    assert q.shape == (0, 64) and s.shape == (0, 1)
