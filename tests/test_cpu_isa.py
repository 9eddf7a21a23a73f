# SPDX-License-Identifier: Apache-2.0
"""The CPU kernels are built once per instruction set (baseline, AVX2 on x86-64)
and picked at run time; every build must give the same bits."""
import os
import subprocess
import sys

import pytest
import torch

import comfy_kitchen_c as ckc
from comfy_kitchen_c import _C, ops
from inputs import CASES

ISAS = _C.cpu_isas()


@pytest.fixture(params=ISAS)
def isa(request):
    saved = _C.cpu_isa()
    _C.set_cpu_isa(request.param)
    yield request.param
    _C.set_cpu_isa(saved)


def _all_ops(x):
    pts = (x.float().abs().amax() / 2688).reshape(())
    q, s = ops.quantize_int8_rowwise(x)
    qx, sx = ops.quantize_nvfp4(x, pts, pad_16x=True)
    return {
        "rowwise": (q, s),
        "rowwise_sr": ops.quantize_int8_rowwise(x, 9),
        "tensorwise": ops.quantize_int8_tensorwise(x),
        "convrot": ops.quantize_int8_convrot_weight(x, 64),
        "rotate": ops.rotate_int8_convrot_weight(x, 256),
        "dequant": ops.dequantize_int8_simple_dtype(q, s, 2),
        "dequant_convrot": ops.dequantize_int8_convrot_weight_dtype(q, s, 16, 1),
        "nvfp4": (qx, sx.view(torch.uint8)),
        "nvfp4_dequant": ops.dequantize_nvfp4(qx, pts, sx, torch.float16),
    }


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["f32", "f16", "bf16"])
@pytest.mark.parametrize("case", ["outliers", "denormals", "at_limits"])
def test_every_isa_gives_the_same_bits(isa, dtype, case):
    x = CASES[case](37, 512, dtype)
    mine = _all_ops(x)
    _C.set_cpu_isa("baseline")
    reference = _all_ops(x)
    for name, value in mine.items():
        value = value if isinstance(value, tuple) else (value,)
        ref = reference[name] if isinstance(reference[name], tuple) else (reference[name],)
        for a, b in zip(value, ref):
            assert torch.equal(a, b) or (a.dtype.is_floating_point and torch.equal(a.isnan(), b.isnan())
                                         and torch.equal(a.nan_to_num(), b.nan_to_num())), (isa, name)


def test_best_isa_is_the_default():
    assert ISAS[-1] == "baseline"
    out = subprocess.run([sys.executable, "-c", "from comfy_kitchen_c import _C; print(_C.cpu_isa())"],
                         capture_output=True, text=True, env={**os.environ, "COMFY_KITCHEN_C_CPU_ISA": ""})
    assert out.stdout.strip() == ISAS[0]


def test_environment_variable_selects_the_isa():
    out = subprocess.run([sys.executable, "-c", "from comfy_kitchen_c import _C; print(_C.cpu_isa())"],
                         capture_output=True, text=True, env={**os.environ, "COMFY_KITCHEN_C_CPU_ISA": "baseline"})
    assert out.stdout.strip() == "baseline"


def test_unknown_isa_is_rejected():
    with pytest.raises(ckc.ArgumentError, match="set_cpu_isa: argument 'isa'"):
        _C.set_cpu_isa("avx9000")
