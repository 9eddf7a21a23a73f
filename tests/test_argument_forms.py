# SPDX-License-Identifier: Apache-2.0
"""Forms an argument can take, for every op of the list (its fuzz target draws a valid call, so an
op added to op_list.py is covered here without a line more):

* an input whose non-contiguous copy cannot fit the device is refused with the op and the argument
  before the copy is made; the int8 linears serve an expanded (stride-0) x from its distinct rows;
* numpy's integer scalars are taken wherever Python ints are, with the same result;
* sparse (and other non-strided) tensors get our error naming the op and the argument;
* out_dtype / output_type / output_dtype None gives what eager's direct call gives."""
import os
import sys

import numpy as np
import pytest
import torch
from comfy_kitchen.backends.eager import quantization as E

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz"))

import comfy_kitchen_c as ckc  # noqa: E402
from comfy_kitchen_c import _checks, linear, op_list, ops  # noqa: E402
from comfy_kitchen_c._checks import COPIED_BY_THE_OP  # noqa: E402
from draw import Draw  # noqa: E402
from targets import TARGETS  # noqa: E402

OPS = sorted(op.name for op in op_list.OPS)  # the list: a new op is covered here as soon as it is listed
ERRORS = (ckc.ArgumentError, ckc.ArgumentTypeError)
DTYPE_PARAMS = ("out_dtype", "output_type", "output_dtype")
INPLACE = {op for op in OPS if op.endswith("_")}  # their result is the argument itself


def _valid(op: str, want=lambda args: True) -> dict:
    """The first drawn call of op that it answers (and that `want` accepts)."""
    target = TARGETS[op]
    for i in range(400):
        args = target.make(Draw(23, i))
        if not want(args):
            continue
        try:
            target.call()(**args)
        except ckc.KitchenError:
            continue
        return args
    raise AssertionError(f"no valid call of {op} drawn")


def _same(a, b) -> None:
    """Results equal: tensors bit for bit (NaN where NaN), tuples element by element."""
    if isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a.view(torch.uint8) if a.element_size() == 1 else a, b.view(torch.uint8)
                           if b.element_size() == 1 else b) or torch.equal(a.isnan(), b.isnan())
    else:
        assert a == b


def _named(error: Exception, op: str, name: str) -> None:
    assert isinstance(error, ERRORS), repr(error)
    assert str(error).startswith(f"{op}:") and f"'{name}'" in str(error), str(error)


# ---- huge copies ---------------------------------------------------------------------------

def _strided(t: torch.Tensor) -> torch.Tensor:
    """t's values in a non-contiguous view (every other element of a wider row)."""
    wide = torch.zeros((*t.shape[:-1], 2 * t.shape[-1]), dtype=t.dtype)
    wide[..., ::2] = t
    return wide[..., ::2]


@pytest.mark.parametrize("op", OPS)
def test_a_copy_beyond_the_devices_memory_is_refused_before_it_is_made(op, monkeypatch):
    """With the device's memory bound at 0 bytes, any argument the op would have to copy whole is
    named in our error (the bound is checked after the op's check and before its first copy), or
    the op serves it without the whole copy and gives the contiguous call's result."""
    args = {n: v.resolve_neg().contiguous() if isinstance(v, torch.Tensor) else v for n, v in _valid(op).items()}
    names = [n for n, v in args.items() if isinstance(v, torch.Tensor) and v.numel() > 1]
    assert names, f"{op}: no tensor argument drawn"
    fn = TARGETS[op].call()
    want = fn(**args) if op not in INPLACE else None
    monkeypatch.setattr(_checks, "memory_bound", lambda device: 0)
    for name in names:
        try:
            got = fn(**{**args, name: _strided(args[name])})
        except ERRORS as error:
            _named(error, op, name)
            continue
        assert op in COPIED_BY_THE_OP and name in COPIED_BY_THE_OP[op], f"{op}: '{name}' copied past the bound"
        _same(got, want)


def test_the_cpu_linear_copies_a_strided_x_a_chunk_at_a_time(monkeypatch):
    """A transposed x on the CPU's chunked path: each chunk of rows is copied within the linear
    memory limit, never x whole (with the memory bound at 0 bytes, only a whole copy is refused)."""
    g = torch.Generator().manual_seed(5)
    k, n, m = 96, 40, 300
    x = torch.randn(k, m, generator=g).t()
    w, ws = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g), torch.rand(n, generator=g) * 0.01
    if not linear._library_gemm(m, k, n):
        pytest.skip("torch's oneDNN int8 GEMM is off: one C call takes x contiguous")
    limit = linear.linear_memory_limit()
    monkeypatch.setattr(_checks, "memory_bound", lambda device: 0)
    try:
        linear.set_linear_memory_limit(20000)  # chunks of ~100 rows
        _same(ops.int8_linear(x, w, ws), E.int8_linear(x.contiguous(), w, ws))
        with pytest.raises(ckc.ArgumentError, match="int8_linear: argument 'x'"):  # the one-call path copies x
            ops.int8_linear(x[:2], w, ws)
    finally:
        linear.set_linear_memory_limit(limit)


HUGE = 1 << 20  # an expand of a row of 2^20 to 2^20 rows: 2^40 values, 4 TiB in float32


def test_an_expanded_input_of_2_40_values_is_refused_not_copied():
    x = torch.randn(1, HUGE).expand(HUGE, HUGE)
    for call in (lambda: ops.quantize_int8_rowwise(x), lambda: ops.quantize_and_rotate_rowwise(x, None, 16),
                 lambda: ops.quantize_int8_tensorwise(x, 0.5), lambda: ops.rotate_int8_convrot_weight(x, 16)):
        with pytest.raises(ckc.ArgumentError, match=r"argument 'x'|argument 'weight'") as info:
            call()
        assert "4398046511104 bytes, more than the memory of cpu" in str(info.value)


def test_through_the_registry_and_on_the_emulated_device_too():
    """comfy_kitchen's registry gives the call to "c" (its rule checks the arguments, not the
    memory), and the op names the argument; the emulated device (CPU memory) alike."""
    import comfy_kitchen as ck
    from comfy_kitchen_c.testing import emulated_device

    x = torch.randn(1, HUGE).expand(HUGE, HUGE)
    with ck.use_backend("c"):
        with pytest.raises(ckc.ArgumentError, match="quantize_int8_rowwise: argument 'x'"):
            ck.quantize_int8_rowwise(x)
    with emulated_device(), pytest.raises(ckc.ArgumentError, match="quantize_int8_rowwise: argument 'x'"):
        ops.quantize_int8_rowwise(x)


def test_the_linears_serve_an_expanded_x_from_its_distinct_rows():
    """2^40 values of x (eager cannot copy them), 2^20 output values: the one distinct row is
    computed and the result expanded, contiguous, equal to eager's on that row."""
    x = torch.randn(1, HUGE).expand(HUGE, HUGE)
    w = torch.randint(-127, 128, (1, HUGE), dtype=torch.int8)
    ws = torch.tensor(0.01)
    y = ops.int8_linear(x, w, ws, out_dtype=torch.float32)
    assert y.shape == (HUGE, 1) and y.is_contiguous()
    ref = E.int8_linear(x[:1].contiguous(), w, ws, out_dtype=torch.float32)
    assert torch.equal(y, ref.expand(HUGE, 1))
    mod = torch.randn(HUGE)
    y = ops.int8_linear_modulated(x, mod, w, ws)
    assert torch.equal(y, E.int8_linear_modulated(x[:1].contiguous(), mod, w, ws).expand(HUGE, 1))


@pytest.mark.parametrize("form", ["plain", "broadcast residual", "per-row residual", "modulated", "rms"])
def test_an_expanded_x_gives_eagers_result(form):
    """Small shapes, every form: served from the distinct rows where the residual repeats too,
    copied where it does not; eager's bits either way."""
    g = torch.Generator().manual_seed(23)
    k, n = 64, 24
    x = torch.randn(3, 1, k, generator=g).to(torch.bfloat16).expand(3, 5, k)
    w = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=g)
    ws = torch.rand(n, generator=g) * 0.01
    mod, nw = torch.randn(k, generator=g), torch.rand(k, generator=g).to(torch.bfloat16)
    rs = torch.rand(n, generator=g)
    xc = x.contiguous()
    if form == "modulated":
        ours, ref = ops.int8_linear_modulated(x, mod, w, ws), E.int8_linear_modulated(xc, mod, w, ws)
    elif form == "rms":
        ours = ops.int8_linear_rms_modulated(x, nw, 1e-6, mod, w, ws)
        ref = E.int8_linear_rms_modulated(xc, nw, 1e-6, mod, w, ws)
    else:
        r = {"plain": None, "broadcast residual": torch.randn(n, generator=g),
             "per-row residual": torch.randn(3, 5, n, generator=g)}[form]
        ours = ops.int8_linear(x, w, ws, residual=r, residual_scale=rs)
        ref = E.int8_linear(xc, w, ws, residual=r, residual_scale=rs)
    assert ours.is_contiguous()
    _same(ours, ref)


# ---- numpy integers ------------------------------------------------------------------------

def _int_params(op: str, args: dict) -> dict:
    """The op's integer arguments of this call: drawn ones, and defaulted ones given explicitly."""
    import inspect
    params = inspect.signature(TARGETS[op].call()).parameters
    ints = {n: v for n, v in args.items() if type(v) is int}
    ints.update({n: p.default for n, p in params.items() if n not in args and type(p.default) is int})
    return ints


@pytest.mark.parametrize("op", [op for op in OPS if _int_params(op, {})] + ["quantize_and_rotate_rowwise"])
@pytest.mark.parametrize("kind", [np.int64, np.int32])
def test_numpy_integers_are_taken_as_ints(op, kind):
    args = _valid(op)
    ints = _int_params(op, args)
    assert ints, f"{op}: no integer argument"
    fn = TARGETS[op].call()
    info = np.iinfo(kind)
    _same(fn(**{**args, **ints}), fn(**{**args, **{n: kind(v) for n, v in ints.items() if info.min <= v <= info.max}}))


@pytest.mark.parametrize("value", [True, np.bool_(True), 16.0, np.float64(16.0), torch.tensor(16), "16"])
def test_what_is_not_an_integer_is_refused_by_name(value):
    """operator.index's semantics, less bool (a flag is not a size) and tensors (on CUDA reading
    one is a host sync)."""
    with pytest.raises(ckc.ArgumentTypeError) as info:
        ops.quantize_and_rotate_rowwise(torch.randn(2, 64), None, value)
    _named(info.value, "quantize_and_rotate_rowwise", "group_size")


def test_numpy_numbers_are_taken_as_numbers():
    x = torch.randn(4, 64)
    _same(ops.quantize_int8_tensorwise(x, np.float32(0.5)), ops.quantize_int8_tensorwise(x, 0.5))
    _same(ops.quantize_nvfp4(x, np.int64(2)), ops.quantize_nvfp4(x, 2))


# ---- layouts -------------------------------------------------------------------------------

def _layouts(t: torch.Tensor):
    """t in each other layout torch can give it (torch has no sparse float8; mkldnn takes float32
    tensors of at most 5 dimensions)."""
    makers = [("sparse_coo", torch.Tensor.to_sparse)]
    if t.dim() == 2:
        makers.append(("sparse_csr", torch.Tensor.to_sparse_csr))
    if torch.backends.mkldnn.is_available():
        makers.append(("mkldnn", torch.Tensor.to_mkldnn))
    for layout, make in makers:
        try:
            yield layout, make(t)
        except (RuntimeError, NotImplementedError, TypeError):
            continue


@pytest.mark.parametrize("op", OPS)
def test_non_strided_layouts_are_refused_by_name(op):
    args = _valid(op)
    tried = 0
    for name, value in args.items():
        if not isinstance(value, torch.Tensor) or value.dim() == 0:
            continue
        for layout, other in _layouts(value):
            with pytest.raises(ERRORS) as info:
                TARGETS[op].call()(**{**args, name: other})
            _named(info.value, op, name)
            assert layout in str(info.value)
            tried += 1
    assert tried, f"{op}: no tensor argument tried"


# ---- out_dtype None ------------------------------------------------------------------------

def _dtype_param(op):
    return next((p for p in TARGETS[op].params if p in DTYPE_PARAMS), None)


@pytest.mark.parametrize("op", [op for op in OPS if _dtype_param(op) and TARGETS[op].reference])
@pytest.mark.parametrize("given", ["None", "omitted"])
def test_a_result_dtype_of_none_or_omitted_is_eagers(op, given):
    """Eager's function called directly: int8_linear(out_dtype=None) is float32 (its float32
    accumulator .to(None)), omitted bfloat16; where eager refuses None (FP8, NVFP4), ours refuses
    it by name.  The fuzz references pass the argument through as drawn."""
    name = _dtype_param(op)
    args = _valid(op)
    args = {k: v for k, v in args.items() if k != name}
    if given == "None":
        args[name] = None
    target = TARGETS[op]
    try:
        ref = target.reference(args)
    except Exception:  # noqa: BLE001 (eager's own error, whatever its type)
        with pytest.raises(ERRORS) as info:
            target.call()(**args)
        _named(info.value, op, name)
        return
    ours = target.call()(**args)
    first = lambda r: r[0] if isinstance(r, tuple) else r  # noqa: E731
    assert first(ours).dtype == first(ref).dtype, (first(ours).dtype, first(ref).dtype)
    target.compare(ours, ref, args)


def test_int8_linear_none_is_float32_as_eagers_direct_call():
    x, w, ws = torch.randn(5, 64), torch.randint(-127, 128, (8, 64), dtype=torch.int8), torch.rand(8) * 0.01
    assert ops.int8_linear(x, w, ws, out_dtype=None).dtype == E.int8_linear(x, w, ws, out_dtype=None).dtype \
        == torch.float32
    assert ops.int8_linear(x, w, ws).dtype == E.int8_linear(x, w, ws).dtype == torch.bfloat16
    _same(ops.int8_linear(x, w, ws, out_dtype=None), E.int8_linear(x, w, ws, out_dtype=None))
