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

from ._checks import DTYPE_CODE_TO_DTYPE

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
# Each rule below is a valid call eager runs faster on the CPU; the registry gives it to eager with
# the reason logged (backend.py), and a direct call of comfy_kitchen_c.ops still runs ours.  The
# figures: benchmarks/bench_cpu_grid.py, 1 thread, ABAB medians, each slow cell measured twice
# (benchmarks/README.md, "CPU grid").

# The fewest elements of its input an op serves: below, a call is a few microseconds of work and
# ours costs more per call (the argument check, the hand-over to C: about 10 us) than eager's one
# or two torch ops (3-5 us), or the same memory-bound work.  1 thread, ABAB medians of 7:
# dequantize_int8_simple at K = 3072 0.38-0.50x at 8-16 rows, 0.76x at 32, 1.00x at 64 (196,608
# elements), 1.08-1.38x at 128 (393,216); at K = 1024 0.15-0.79x at 64 rows, 0.83-1.34x at 256
# (262,144: three runs), 1.05-2.01x at 1024; 512 x 3072 1.08-1.53x.  _dtype: 0.72x at 8 x 3072,
# 0.87-1.11x at 16 x 3072 (49,152), 1.00-1.33x at 64 x 1024 (65,536), 1.04x and more from 32 x 3072.
# Per-tensor FP8 (1 thread, K = 3072, medians of 5 alternating blocks, 2026-12-03 at 0b6d291):
# dequantize_per_tensor_fp8 0.83-1.05x at 1 row, 1.52-1.70x at 2 rows, 2.2-2.5x at 4; 2 threads
# 0.80-1.07x at 1 row, 1.07-1.54x at 2; quantize_per_tensor_fp8 1.01-1.18x at 1 row (2 threads 0.99-1.20x),
# 1.06-1.40x at 2 rows.  rms_gated_residual bfloat16 (its float16 and float32 go to eager at every
# size, EAGER_DTYPES), 1 and 2 threads, medians of 5, 2026-12-04 with the rms factor's streams side by
# side (csrc/cpu/rms_impl.h): K = 3072 0.92-0.94x at 1 row, 1.15-1.23x at 8, 1.37-1.84x at 16,
# 1.67-1.85x at 32; K = 1024 0.92-0.94x at 1 row, 0.98-1.08x at 16, 1.30-1.31x at 64 (65,536),
# 1.40-1.47x at 256.  dequantize_int8_simple_dtype: OUT_MIN_ELEMENTS.  dequantize_int8_embedding (its
# elements: indices x D, the rows it gathers; a 32000 x 4096 table): 0.75-0.79x at 1 index, 0.85-1.10x
# at 6, 1.16-1.76x at 77 (315,392), 2.7-3.3x at 512.
MIN_ELEMENTS = {
    "dequantize_int8_simple": 1 << 19,        # 524,288: 171 rows of 3072
    "dequantize_int8_simple_dtype": 1 << 17,  # 131,072: its bfloat16 output (OUT_MIN_ELEMENTS: the others)
    "dequantize_per_tensor_fp8": 1 << 12,     # 4,096: one row of 3072 goes to eager, two rows or one of 5120 not
    "quantize_per_tensor_fp8": 1 << 12,
    "rms_gated_residual": 1 << 16,            # 65,536: 22 rows of 3072, 64 of 1024
    "dequantize_int8_embedding": 1 << 16,     # 65,536: 16 tokens of 4096
}

# Input dtypes of an op that eager serves at every size: rms_gated_residual's float16 rows (our
# kernel rounds every intermediate to float16 in software) 0.39x at 1 row, 0.09-0.10x at 256,
# 0.39x at 4096 (K = 3072); float32 0.68-0.71x at 1 row, 0.55-0.88x at 256.  bfloat16: 0.93-0.98x
# at 1 row (23 us both), 1.56x at 256: served.
EAGER_DTYPES = {"rms_gated_residual": (torch.float16, torch.float32)}

# By output dtype (eager: dequantize_int8_simple, then .to(dtype)).  1 and 2 threads, per-row scale,
# medians of 7 blocks, 2026-12-04: float32 output (eager's one op, the work of
# dequantize_int8_simple) 0.72-0.76x at 64 x 1024, 0.74-0.92x at 32 x 3072, 1.08-1.23x at 256 x 1024
# (262,144), 1.21-1.46x at 128 and 171 x 3072; bfloat16 0.98-0.99x at 64 x 1024, 0.91-1.17x at
# 32 x 3072, 1.09-1.21x at 128 x 1024 (131,072), 1.35-1.47x from 256 x 1024; float16 0.78-0.93x from
# 32 x 3072 to 512 x 1024 and 0.95-1.04x at 171 and 512 x 3072 (our float16 store costs 0.16 ns an
# element, eager's conversion less; F16C's vcvtps2ph instead of our vectorized software rounding was
# tried: 3-10% faster, not enough): eager at every size.
# float32 output is eager's dequantize_int8_simple alone, so it takes that op's threshold (the
# selftest's 256 x 1024, at 1 << 18, measured 0.95x and 1.16x in two idle runs).
OUT_MIN_ELEMENTS = {("dequantize_int8_simple_dtype", torch.float32): MIN_ELEMENTS["dequantize_int8_simple"]}
EAGER_OUT_DTYPES = {"dequantize_int8_simple_dtype": (torch.float16,)}

# int8_linear and its modulated forms with float16 rows: from this many rows on (the library-GEMM
# path) our float16 loads and stores cost more than eager's float16 torch ops save.  K = N = 3072:
# 64 rows 1.40-1.93x; 256 rows 0.68-1.11x (none 0.92-1.11x, residual 0.70-0.93x, modulated
# 0.72x, rms_modulated 0.68-0.71x); 1024 rows 0.42-0.94x.  bfloat16 and float32: 1.0x and more.
FLOAT16_LINEAR_MIN_ROWS = 128
FLOAT16_LINEARS = ("int8_linear", "int8_linear_modulated", "int8_linear_rms_modulated")


def rule(op: str, dtype: torch.dtype, rows: int, elements: int, out_dtype: torch.dtype | None = None) -> str | None:
    """Why eager serves a CPU call of op faster than "c" (its first tensor's dtype, rows and
    elements; the output dtype where the op takes one), or None: the rules above."""
    where = "comfy_kitchen_c/cpu_speed.py"
    if out_dtype in EAGER_OUT_DTYPES.get(op, ()):
        return f"eager is faster on the CPU with {out_dtype} output ({where} EAGER_OUT_DTYPES)"
    least = OUT_MIN_ELEMENTS.get((op, out_dtype), MIN_ELEMENTS.get(op))
    if least is not None and elements < least:
        table = "OUT_MIN_ELEMENTS" if (op, out_dtype) in OUT_MIN_ELEMENTS else "MIN_ELEMENTS"
        return f"eager is faster on the CPU below {least} elements (this call: {elements}; {where} {table})"
    if dtype in EAGER_DTYPES.get(op, ()):
        return f"eager is faster on the CPU with {dtype} inputs ({where} EAGER_DTYPES)"
    if op in FLOAT16_LINEARS and dtype == torch.float16 and rows >= FLOAT16_LINEAR_MIN_ROWS:
        return (f"eager is faster on the CPU with float16 x from {FLOAT16_LINEAR_MIN_ROWS} rows (this call: "
                f"{rows}; {where} FLOAT16_LINEAR_MIN_ROWS)")
    return None


def decline(op: str, kwargs: dict) -> str | None:
    """The registry's speed rule for a checked CPU call (backend.py): rule() of its main tensor
    (x; the dequantizers' int8 codes q; rms_gated_residual's activation)."""
    if op not in MIN_ELEMENTS and op not in EAGER_DTYPES and op not in FLOAT16_LINEARS:
        return None
    first = next((kwargs[name] for name in ("x", "q", "activation") if name in kwargs), None)
    if not isinstance(first, torch.Tensor):
        return None
    width = first.shape[-1] if first.ndim else 1
    elements = first.numel()
    indices = kwargs.get("indices")
    if op == "dequantize_int8_embedding" and isinstance(indices, torch.Tensor):
        elements = indices.numel() * width  # the rows it gathers, not the table
    out_dtype = DTYPE_CODE_TO_DTYPE.get(kwargs.get("output_dtype_code")) if op in EAGER_OUT_DTYPES else None
    return rule(op, first.dtype, elements // width if width else 0, elements, out_dtype)
