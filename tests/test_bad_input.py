# SPDX-License-Identifier: Apache-2.0
"""Bad input gets our own exception (ArgumentError is a ValueError,
ArgumentTypeError a TypeError) naming the op and the argument; never a crash."""
import pytest
import torch

import comfy_kitchen_c as ckc
from comfy_kitchen_c import _C, ops

BF = torch.bfloat16
X = torch.randn(4, 64, dtype=BF)
Q, S = ops.quantize_int8_rowwise(X)
PTS = torch.tensor(0.01)
QX, SX = ops.quantize_nvfp4(X, PTS)
H64 = torch.ones(64, 64, dtype=BF)

# (id, call, exception, op name, argument name)
CASES = [
    ("rowwise dtype", lambda: ops.quantize_int8_rowwise(X.int()), ckc.ArgumentTypeError,
     "quantize_int8_rowwise", "x"),
    ("rowwise not a tensor", lambda: ops.quantize_int8_rowwise([1.0, 2.0]), ckc.ArgumentTypeError,
     "quantize_int8_rowwise", "x"),
    ("rowwise 0-dim", lambda: ops.quantize_int8_rowwise(torch.tensor(1.0)), ckc.ArgumentError,
     "quantize_int8_rowwise", "x"),
    ("rowwise empty rows", lambda: ops.quantize_int8_rowwise(torch.empty(4, 0)), ckc.ArgumentError,
     "quantize_int8_rowwise", "x"),
    ("rowwise seed type", lambda: ops.quantize_int8_rowwise(X, "7"), ckc.ArgumentTypeError,
     "quantize_int8_rowwise", "stochastic_rounding"),
    ("rowwise meta device", lambda: ops.quantize_int8_rowwise(torch.empty(2, 8, device="meta")),
     ckc.ArgumentTypeError, "quantize_int8_rowwise", "x"),
    ("rotate K % G", lambda: ops.quantize_and_rotate_rowwise(torch.randn(2, 100), None, 64), ckc.ArgumentError,
     "quantize_and_rotate_rowwise", "group_size"),
    ("rotate G not power of 4", lambda: ops.quantize_and_rotate_rowwise(X, None, 32), ckc.ArgumentError,
     "quantize_and_rotate_rowwise", "group_size"),
    ("rotate G too large", lambda: ops.quantize_and_rotate_rowwise(torch.randn(1, 4096), None, 4096),
     ckc.ArgumentError, "quantize_and_rotate_rowwise", "group_size"),
    ("rotate G not int", lambda: ops.quantize_and_rotate_rowwise(X, None, 64.0), ckc.ArgumentTypeError,
     "quantize_and_rotate_rowwise", "group_size"),
    ("rotate h shape", lambda: ops.quantize_and_rotate_rowwise(X, H64[:16, :16], 64), ckc.ArgumentError,
     "quantize_and_rotate_rowwise", "h"),
    ("convrot weight 3-D", lambda: ops.quantize_int8_convrot_weight(X.reshape(2, 2, 64), 64), ckc.ArgumentError,
     "quantize_int8_convrot_weight", "weight"),
    ("convrot weight dtype", lambda: ops.quantize_int8_convrot_weight(Q, 64), ckc.ArgumentTypeError,
     "quantize_int8_convrot_weight", "weight"),
    ("rotate weight group", lambda: ops.rotate_int8_convrot_weight(X, 8), ckc.ArgumentError,
     "rotate_int8_convrot_weight", "group_size"),
    ("tensorwise scale numel", lambda: ops.quantize_int8_tensorwise(X, torch.ones(2)), ckc.ArgumentError,
     "quantize_int8_tensorwise", "scale"),
    ("tensorwise scale string", lambda: ops.quantize_int8_tensorwise(X, "max"), ckc.ArgumentTypeError,
     "quantize_int8_tensorwise", "scale"),
    ("tensorwise empty", lambda: ops.quantize_int8_tensorwise(torch.empty(0)), ckc.ArgumentError,
     "quantize_int8_tensorwise", "x"),
    ("dequant q dtype", lambda: ops.dequantize_int8_simple(X, S), ckc.ArgumentTypeError,
     "dequantize_int8_simple", "q"),
    ("dequant scale shape", lambda: ops.dequantize_int8_simple(Q, torch.ones(3)), ckc.ArgumentError,
     "dequantize_int8_simple", "scale"),
    ("dequant scale widens q", lambda: ops.dequantize_int8_simple(Q, torch.ones(2, 4, 1)), ckc.ArgumentError,
     "dequantize_int8_simple", "scale"),
    ("dequant scale dtype", lambda: ops.dequantize_int8_simple(Q, S.int()), ckc.ArgumentTypeError,
     "dequantize_int8_simple", "scale"),
    ("dequant code", lambda: ops.dequantize_int8_simple_dtype(Q, S, 5), ckc.ArgumentError,
     "dequantize_int8_simple_dtype", "output_dtype_code"),
    ("dequant convrot 1-D", lambda: ops.dequantize_int8_convrot_weight(Q[0], S[0], 64), ckc.ArgumentError,
     "dequantize_int8_convrot_weight", "q"),
    ("dequant convrot group", lambda: ops.dequantize_int8_convrot_weight_dtype(Q, S, 128, 2), ckc.ArgumentError,
     "dequantize_int8_convrot_weight_dtype", "group_size"),
    ("nvfp4 3-D", lambda: ops.quantize_nvfp4(X.reshape(2, 2, 64), PTS), ckc.ArgumentError,
     "quantize_nvfp4", "x"),
    ("nvfp4 cols without pad", lambda: ops.quantize_nvfp4(torch.randn(33, 65), PTS), ckc.ArgumentError,
     "quantize_nvfp4", "x"),
    ("nvfp4 pad_16x not a bool", lambda: ops.quantize_nvfp4(X, PTS, 0.0, "no"), ckc.ArgumentTypeError,
     "quantize_nvfp4", "pad_16x"),
    ("nvfp4 hi_first not a bool", lambda: ops.quantize_nvfp4(X, PTS, hi_first=2), ckc.ArgumentTypeError,
     "quantize_nvfp4", "hi_first"),
    ("nvfp4 dequant hi_first not a bool", lambda: ops.dequantize_nvfp4(QX, PTS, SX, hi_first=1),
     ckc.ArgumentTypeError, "dequantize_nvfp4", "hi_first"),
    ("rotated nvfp4 pad_16x not a bool", lambda: ops.quantize_and_rotate_nvfp4(X, PTS, 16, pad_16x=0),
     ckc.ArgumentTypeError, "quantize_and_rotate_nvfp4", "pad_16x"),
    ("rowwise seed above 2^64", lambda: ops.quantize_int8_rowwise(X, 2**70), ckc.ArgumentError,
     "quantize_int8_rowwise", "stochastic_rounding"),
    ("tensorwise seed above 2^64", lambda: ops.quantize_int8_tensorwise(X, None, 2**64), ckc.ArgumentError,
     "quantize_int8_tensorwise", "stochastic_rounding"),
    ("nvfp4 pts dtype", lambda: ops.quantize_nvfp4(X, PTS.half()), ckc.ArgumentTypeError,
     "quantize_nvfp4", "per_tensor_scale"),
    ("nvfp4 pts numel", lambda: ops.quantize_nvfp4(X, torch.ones(2)), ckc.ArgumentError,
     "quantize_nvfp4", "per_tensor_scale"),
    ("nvfp4 dequant cols", lambda: ops.dequantize_nvfp4(QX[:, :7], PTS, SX), ckc.ArgumentError,
     "dequantize_nvfp4", "qx"),
    ("nvfp4 dequant scales numel", lambda: ops.dequantize_nvfp4(QX, PTS, SX[:64]), ckc.ArgumentError,
     "dequantize_nvfp4", "block_scales"),
    ("nvfp4 dequant qx dtype", lambda: ops.dequantize_nvfp4(QX.view(torch.int8), PTS, SX), ckc.ArgumentTypeError,
     "dequantize_nvfp4", "qx"),
    ("nvfp4 dequant output_type", lambda: ops.dequantize_nvfp4(QX, PTS, SX, torch.int32), ckc.ArgumentTypeError,
     "dequantize_nvfp4", "output_type"),
    # Row length and row count must each stay below 2^31 (kernels and CUDA grids index them in 32 bits).
    # torch.empty does not touch the memory, so these cost no RAM.
    ("row length 2^31", lambda: ops.dequantize_int8_simple(torch.empty(1, 2**31, dtype=torch.int8),
                                                           torch.tensor(1.0)),
     ckc.ArgumentError, "dequantize_int8_simple", "q"),
    ("rows 2^31", lambda: ops.quantize_int8_rowwise(torch.empty(2**31, 1, dtype=torch.float16)),
     ckc.ArgumentError, "quantize_int8_rowwise", "x"),
]


@pytest.mark.parametrize("call,exc,op,arg", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_named_error(call, exc, op, arg):
    with pytest.raises(exc) as info:
        call()
    message = str(info.value)
    assert message.startswith(op + ":"), message
    # the exact form our errors use: "argument 'name'" (a bare name would be vacuous: "x" is in "expected")
    assert f"argument '{arg}'" in message, message
    assert isinstance(info.value, ckc.KitchenError)
    assert isinstance(info.value, ValueError if exc is ckc.ArgumentError else TypeError)


# The C layer checks everything it reads again, whatever Python passed.
def _c_rowwise(x, q, scale, group=0):
    return _C.quantize_int8_rowwise("quantize_int8_rowwise", x.__dlpack__(), q.__dlpack__(), scale.__dlpack__(), None,
                           group, 0, 1)


C_CASES = [
    ("q shape", lambda: _c_rowwise(X, Q[:2], S), ckc.ArgumentError, "argument 'q'"),
    # x of any rank is its rows of the last dimension; q must have x's own shape.
    ("q not x's shape", lambda: _c_rowwise(X.view(2, 2, 64), Q, S), ckc.ArgumentError, "argument 'q'"),
    ("0-dim x", lambda: _c_rowwise(X[0, 0], Q, S), ckc.ArgumentError, "argument 'x': expected at least 1 dimension"),
    # 2^31 rows of 1 from two leading dimensions (torch.empty does not touch the 4 GiB).
    ("3-D rows 2^31", lambda: _c_rowwise(torch.empty(2**16, 2**15, 1, dtype=BF), Q, S), ckc.ArgumentError,
     "argument 'x': 2147483648 rows of 1"),
    ("scale count", lambda: _c_rowwise(X, Q, S[:2]), ckc.ArgumentError, "argument 'scale'"),
    ("x dtype", lambda: _c_rowwise(X.int(), Q, S), ckc.ArgumentTypeError, "argument 'x'"),
    ("non-contiguous", lambda: _c_rowwise(torch.randn(64, 4).t(), Q, S), ckc.ArgumentError, "contiguous"),
    ("group", lambda: _c_rowwise(X, Q, S, 32), ckc.ArgumentError, "argument 'group_size'"),
    ("not a capsule", lambda: _C.quantize_int8_rowwise("op", X, Q.__dlpack__(), S.__dlpack__(), None, 0, 0, 1),
     ckc.ArgumentTypeError, "DLPack"),
    ("nthreads", lambda: _C.quantize_int8_rowwise("op", X.__dlpack__(), Q.__dlpack__(), S.__dlpack__(), None, 0, 0, 0),
     ckc.ArgumentError, "argument 'nthreads'"),
    ("missing tensor", lambda: _C.quantize_int8_rowwise("op", X.__dlpack__(), None, S.__dlpack__(), None, 0, 0, 1),
     ckc.ArgumentTypeError, "argument 'q'"),
]


def test_c_layer_takes_rows_of_any_rank():
    for shape in ((2, 2, 64), (1, 4, 1, 64)):
        q, s = torch.empty(shape, dtype=torch.int8), torch.empty(4)
        _c_rowwise(X.view(shape), q, s)
        assert torch.equal(q.view(4, 64), Q) and torch.equal(s, S.view(4)), shape
    q, s = torch.empty(64, dtype=torch.int8), torch.empty(1)
    _c_rowwise(X[1], q, s)
    assert torch.equal(q, Q[1]) and torch.equal(s, S[1]), "1-D"


@pytest.mark.parametrize("call,exc,fragment", [c[1:] for c in C_CASES], ids=[c[0] for c in C_CASES])
def test_c_layer_rejects_inconsistent_arguments(call, exc, fragment):
    with pytest.raises(exc, match=fragment):
        call()


def test_consumed_capsule_is_rejected():
    cap = X.__dlpack__()
    _C.quantize_int8_rowwise("op", cap, Q.__dlpack__(), S.__dlpack__(), None, 0, 0, 1)
    with pytest.raises(ckc.ArgumentTypeError, match="unconsumed"):
        _C.quantize_int8_rowwise("op", cap, Q.__dlpack__(), S.__dlpack__(), None, 0, 0, 1)


def test_wrong_argument_count_is_a_type_error():
    with pytest.raises(TypeError, match="takes 8 arguments"):
        _C.quantize_int8_rowwise("op")
