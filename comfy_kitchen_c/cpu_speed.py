# SPDX-License-Identifier: Apache-2.0
"""Where the CPU runs torch's code instead of ours, because it is faster there: measured side by
side with eager (benchmarks/bench_cpu_grid.py; the figures: benchmarks/README.md, "CPU grid").

int8_linear's input activation.  On the CPU, from LIBRARY_GEMM_MIN_ROWS rows on (linear.py: the
GEMM is torch._int_mm there), our quantizer applies the activation while it loads a row, one
element at a time (csrc/cpu/linear_impl.h ``act_range``), while torch's activation kernels are
vectorized; for the pairs in TORCH_ACTS torch's activation and then our plain quantizer are
faster than the fused one.  The activation is then eager's own expression
(comfy_kitchen/backends/_activations.py ``apply_input_act``, copied below because "c" runs
without comfy_kitchen), so the result is eager's bits exactly: the plain quantizer, the GEMM and
the epilogue are bit for bit eager's.  Below LIBRARY_GEMM_MIN_ROWS rows the one-call C op keeps
the activation fused: the weight read dominates there and a separate activation costs a call.
"""
from __future__ import annotations

import torch

# (input_act, x dtype) whose activation torch computes faster than our fused load, on the CPU's
# library-GEMM path.  Measured 1 thread, K = N = 3072, M = 16, 64, 256, 1024, ABAB medians of 5
# (benchmarks/README.md, "Fused activation or torch's"): our fused time / torch's activation +
# our plain quantizer:  gelu_tanh float32 1.2-2.2x (float16 0.8-1.0x, bfloat16 0.9-1.1x: fused
# kept, its bfloat16 and float16 values come from act_tables.c); swiglu 1.0-1.6x in every dtype;
# situ float32 1.5-2.0x, float16 1.1-1.2x (bfloat16 0.8-0.9x: fused kept, tabulated); rms_norm
# float32 1.1-1.3x, float16 1.2-1.7x, bfloat16 1.1-1.3x from M = 64.
TORCH_ACTS = {
    ("gelu_tanh", torch.float32),
    ("swiglu", torch.float32), ("swiglu", torch.float16), ("swiglu", torch.bfloat16),
    ("situ", torch.float32), ("situ", torch.float16),
    ("rms_norm", torch.float32), ("rms_norm", torch.float16), ("rms_norm", torch.bfloat16),
}


def torch_act(input_act, dtype: torch.dtype) -> bool:
    """Whether a CPU int8_linear on the library-GEMM path applies input_act with torch."""
    return (input_act, dtype) in TORCH_ACTS


def apply_input_act(x: torch.Tensor, input_act, act_weight=None, act_eps=0.0) -> torch.Tensor:
    """comfy_kitchen 0.2.40's apply_input_act (backends/_activations.py), expression for
    expression: the activated rows eager's int8_linear quantizes."""
    if input_act == "gelu_tanh":
        return torch.nn.functional.gelu(x, approximate="tanh")
    if input_act == "swiglu":
        gate, up = x.chunk(2, dim=-1)
        return torch.nn.functional.silu(gate).mul_(up)
    if input_act == "situ":
        hidden, gate = x.chunk(2, dim=-1)
        gated = gate.div(4.0).tanh_().mul_(4.0).mul_(torch.sigmoid(gate))
        return hidden.div(25.0).tanh_().mul_(25.0).mul_(gated)
    if input_act == "rms_norm":
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight=act_weight.to(x.dtype), eps=act_eps)
    raise ValueError(f"int8_linear: argument 'input_act': {input_act!r} has no torch form here")


# ---- calls the registry gives to eager ----------------------------------------------------------

def rule(op: str, act, dtype: torch.dtype, m: int, k: int, n: int, threads: int) -> str | None:
    """Why eager serves a CPU call of op with m rows of k (n outputs) faster than "c", or None."""
    return None


def decline(op: str, kwargs: dict) -> str | None:
    """The registry's speed rule for a checked CPU call (backend.py): rule() of its shape."""
    return None
