# SPDX-License-Identifier: Apache-2.0
"""CPU benchmark: comfy_kitchen_c's ops against comfy_kitchen's eager backend and against memcpy.

What is measured, for each op and each K (inputs are DiT-sized activations/weights, M rows x K
columns, bfloat16, group_size 256):

* eager ms   -- ``comfy_kitchen.backends.eager.quantization.<op>``, the reference implementation.
* ours ms    -- ``comfy_kitchen_c.ops.<op>`` with the same arguments.
* speedup    -- eager ms / ours ms.
* MB         -- bytes our op moves: every tensor argument read plus every tensor result written,
                counted from the actual tensors (so padding and scale tensors are included).
* GB/s       -- MB / ours ms.
* memcpy ms  -- ``dst.copy_(src)`` on uint8 tensors of half that many bytes: a copy reads N and
                writes N bytes, so it moves the same total. This is the floor a memory-bound op
                can approach on this machine.
* x memcpy   -- ours ms / memcpy ms (1.0 would be "as fast as moving the bytes").
* +alloc ms  -- the same copy into a newly allocated destination. Our ops (like eager) return new
                tensors, and a large fresh buffer costs page faults on first touch; this column
                shows how much of the gap to memcpy that alone explains.

Every timing is the median of ``--repeats`` runs after one warm-up run (ours and the copies: of
three such blocks, alternated), measured with
``time.perf_counter`` (or, with ``--clock cpu``, the process's CPU time per torch thread; see
``cpu_ms``) in the same process and with the same torch thread count (our kernels use
``torch.get_num_threads()`` workers too). Ours, eager and memcpy are each timed in blocks of
consecutive calls (see ``measure`` for why not round-robin, and why ours and the copies alternate). Absolute times depend
on the machine and its load; the ratios (speedup, x memcpy) are what the targets at the end are
about, and because the three timings of a row come from one run they are comparable.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable

import torch

import comfy_kitchen_c.ops as C
from comfy_kitchen_c import selftest_report
from comfy_kitchen.backends.eager import quantization as E
from comfy_kitchen.backends.eager import rope as E_ROPE
from comfy_kitchen.backends.eager import residual as E_RESIDUAL
from comfy_kitchen.backends.eager import convrot_w4a4 as E_W4A4
from comfy_kitchen.tensor.int8_utils import _build_hadamard

GROUP = 256
BF16_CODE = 2  # output_dtype_code for bfloat16
DEFAULT_M = 4096
DEFAULT_KS = (3072, 5120, 5376)

ROTATE_OPS = ("quantize_and_rotate_rowwise", "quantize_int8_convrot_weight")
ROTATE_SPEEDUP_TARGET = 20.0
SPEEDUP_TARGET = 2.0
MEMCPY_TARGET = 3.0


# ---- op table -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Op:
    """One benchmarked op: how to build its arguments from x, and the two implementations."""
    name: str
    make_args: Callable[[torch.Tensor], tuple]
    ours: Callable
    eager: Callable


def _nvfp4_scale(x: torch.Tensor) -> torch.Tensor:
    """The usual NVFP4 per-tensor scale: amax / (fp8 e4m3 max * fp4 e2m1 max), 0-dim float32."""
    return x.abs().amax().float() / (448 * 6)


def _nvfp4_codes(x: torch.Tensor) -> tuple:
    pts = _nvfp4_scale(x)
    qx, block_scales = C.quantize_nvfp4(x, pts)
    return qx, pts, block_scales


def _fp8_scale(x: torch.Tensor) -> torch.Tensor:
    """The usual per-tensor FP8 scale: amax / e4m3's max, 0-dim float32."""
    return x.abs().amax().float() / 448


# Arguments of each op, built from x. The dequantize ops get codes and scales made from the same x
# by our quantizers (eager makes the same ones; that is the parity the tests check).
ARG_BUILDERS: dict[str, Callable[[torch.Tensor], tuple]] = {
    "quantize_int8_rowwise": lambda x: (x,),
    "quantize_int8_tensorwise": lambda x: (x,),
    "quantize_and_rotate_rowwise": lambda x: (x, _build_hadamard(GROUP, "cpu", x.dtype), GROUP),
    "quantize_int8_convrot_weight": lambda x: (x, GROUP),
    "rotate_int8_convrot_weight": lambda x: (x, GROUP),
    "dequantize_int8_simple": lambda x: C.quantize_int8_rowwise(x),
    "dequantize_int8_simple_dtype": lambda x: (*C.quantize_int8_rowwise(x), BF16_CODE),
    "dequantize_int8_convrot_weight": lambda x: (*C.quantize_int8_convrot_weight(x, GROUP), GROUP),
    "dequantize_int8_convrot_weight_dtype":
        lambda x: (*C.quantize_int8_convrot_weight(x, GROUP), GROUP, BF16_CODE),
    "quantize_nvfp4": lambda x: (x, _nvfp4_scale(x)),
    "dequantize_nvfp4": lambda x: (*_nvfp4_codes(x), torch.bfloat16),
    # RoPE: x [M, K] seen as WAN's [1, L, 24, K] (M = 24 L; --m 98304 --k 128 is x [1, 24, 4096, 128]),
    # freqs_cis per position [1, L, 1, K/2, 2, 2]; the in-place forms rotate a clone of x
    "apply_rope1": lambda x: _rope_args(x)[::2],
    "apply_rope1_": lambda x: _rope_args(x)[::2],
    "apply_rope_split_half1": lambda x: _rope_args(x)[::2],
    "apply_rope_split_half1_": lambda x: _rope_args(x)[::2],
    "apply_rope": lambda x: _rope_args(x),
    "apply_rope_": lambda x: _rope_args(x),
    "apply_rope_split_half": lambda x: _rope_args(x),
    "apply_rope_split_half_": lambda x: _rope_args(x),
    "quantize_per_tensor_fp8": lambda x: (x, _fp8_scale(x)),
    "dequantize_per_tensor_fp8": lambda x: (C.quantize_per_tensor_fp8(x, _fp8_scale(x)), _fp8_scale(x),
                                            torch.bfloat16),
    "stochastic_rounding_fp8": lambda x: (x, torch.randint(0, 256, x.shape, dtype=torch.uint8)),
    # rms_rope: x as for RoPE above ([1, L, 24, K], --m 98304 --k 128: L = 4096), a bfloat16 scale
    # of K values; the pairs take one scale for q and k (eager's k_scale=None)
    "rms_rope1": lambda x: _rms_rope_args(x)[::2],
    "rms_rope1_": lambda x: _rms_rope_args(x)[::2],
    "rms_rope_split_half1": lambda x: _rms_rope_args(x)[::2],
    "rms_rope": lambda x: _rms_rope_args(x)[:4],
    "rms_rope_split_half": lambda x: _rms_rope_args(x)[:4],
    # rms_gated_residual: activation x [M, K], norm weight [K], residual [M, K], a gate per batch
    "rms_gated_residual": lambda x: (x, torch.rand(x.shape[1]).to(x.dtype), x.flip(0).contiguous(),
                                     torch.randn(1, x.shape[1]).to(x.dtype)),
    "quantize_mxfp8": lambda x: (x, False),
    "dequantize_mxfp8": lambda x: (*C.quantize_mxfp8(x), torch.bfloat16),
}


def _rms_rope_args(x: torch.Tensor) -> tuple:
    """(q [1, L, 24, K], k, freqs_cis, scale [K] bfloat16, scale): [::2] is (q, freqs_cis, scale),
    [:4] (q, k, freqs_cis, scale)."""
    q, k, freqs = _rope_args(x)
    scale = (torch.rand(x.shape[1]) * 2).to(x.dtype)
    return q, k, freqs, scale, scale

def _rope_args(x: torch.Tensor) -> tuple:
    """(x as [1, L, 24, K], a copy of it as xk, freqs_cis [1, L, 1, K/2, 2, 2] float32)."""
    heads = 24 if x.shape[0] % 24 == 0 else 1
    q = x.reshape(1, x.shape[0] // heads, heads, x.shape[1])
    freqs = torch.randn(1, q.shape[1], 1, x.shape[1] // 2, 2, 2, dtype=torch.float32)
    return q, q.clone(), freqs.contiguous()


OPS = [Op(name, build, getattr(C, name), getattr(E, name, None) or getattr(E_ROPE, name, None)
          or getattr(E_RESIDUAL, name))
       for name, build in ARG_BUILDERS.items()]


def _linear_args(act: str | None) -> Callable[[torch.Tensor], tuple]:
    """int8_linear of x [M, K] by a square int8 weight [K, K] (per-channel scales, a bfloat16
    bias, bfloat16 output); swiglu's x is [gate | up], [M, 2K], made from x and x reversed."""
    def build(x: torch.Tensor) -> tuple:
        k = x.shape[1]
        g = torch.Generator().manual_seed(1)
        w = torch.randint(-127, 128, (k, k), generator=g, dtype=torch.int8)
        ws = torch.rand(k, generator=g) * 0.01 + 0.001
        b = torch.randn(k, generator=g).to(x.dtype)
        rows = torch.cat([x, x.flip(1)], 1) if act == "swiglu" else x
        return (rows, w, ws, b, torch.bfloat16, False, GROUP, act)
    return build


LINEAR_ACTS = (None, "gelu_tanh", "swiglu")
LINEAR_OPS = tuple("int8_linear" + (f"[{a}]" if a else "") for a in LINEAR_ACTS)
LINEAR_SPEEDUP_TARGET = 1.0  # a GEMM: eager's is oneDNN's too (torch._int_mm), and so is ours from 16 rows
OPS += [Op(name, _linear_args(act), C.int8_linear, E.int8_linear) for name, act in zip(LINEAR_OPS, LINEAR_ACTS)]


# ConvRot W4A4 (int4): the weight ops on x as the weight [M, K]; the linear of x [M, K] by a square
# int4 weight [K, K] quantized from a random one (float32 scales, a bfloat16 bias, bfloat16 output)
def _w4a4_linear_args(x: torch.Tensor) -> tuple:
    k = x.shape[1]
    g = torch.Generator().manual_seed(1)
    qw, ws = C.quantize_convrot_w4a4_weight((torch.randn(k, k, generator=g) * 0.05).to(x.dtype), GROUP)
    return (x, qw, ws, torch.randn(k, generator=g).to(x.dtype), GROUP)


OPS += [Op("quantize_convrot_w4a4_weight", lambda x: (x, GROUP), C.quantize_convrot_w4a4_weight,
           E_W4A4.quantize_convrot_w4a4_weight),
        Op("dequantize_convrot_w4a4_weight",
           lambda x: (*C.quantize_convrot_w4a4_weight(x, GROUP), GROUP, 64, torch.bfloat16),
           C.dequantize_convrot_w4a4_weight, E_W4A4.dequantize_convrot_w4a4_weight),
        Op("prepare_int4_weight_for_int8_linear", lambda x: (C.quantize_convrot_w4a4_weight(x, GROUP)[0],),
           C.prepare_int4_weight_for_int8_linear, E_W4A4.prepare_int4_weight_for_int8_linear),
        Op("convrot_w4a4_linear", _w4a4_linear_args, C.convrot_w4a4_linear, E_W4A4.convrot_w4a4_linear)]
LINEAR_OPS += ("convrot_w4a4_linear",)  # a GEMM: its goal is LINEAR_SPEEDUP_TARGET
# W4A8 / W6A8: random codes of the storage contract (4-bit, the frozen codebook, e4m3 group scales of
# 16), the dequantizer's weight [M, K] (x's shape), the linears' weight [K, K] for x [M, K].
def _w4a8_storage(n: int, k: int) -> tuple:
    from comfy_kitchen.tensor.w4a8_packed import _pack_codes, default_w4a8_codebook
    g = torch.Generator().manual_seed(2)
    codes = torch.randint(0, 16, (n, k), generator=g, dtype=torch.int32)
    s_rel = (torch.rand(n, k // 16, generator=g) * 100 + 1).to(torch.float8_e4m3fn)
    return _pack_codes(codes, 4), s_rel, torch.rand(n, generator=g) * 0.01 + 1e-4, default_w4a8_codebook()


def _w4a8_packed(n: int, k: int) -> tuple:
    """MMA records of random codes and e4m3 scales (unpack_w4a8_mma_weight's layout)."""
    g = torch.Generator().manual_seed(3)
    rec = torch.randint(0, 256, ((n // 16) * (k // 32), 288), generator=g, dtype=torch.int32).to(torch.uint8)
    rec[:, 256:] = torch.randint(0x20, 0x50, (rec.shape[0], 32), generator=g, dtype=torch.int32).to(torch.uint8)
    return rec.reshape(-1).view(torch.int8), torch.empty(0, dtype=torch.float8_e4m3fn)


def _w4a8_linear_args(x: torch.Tensor) -> tuple:
    q, s, sc, cb = _w4a8_storage(x.shape[1], x.shape[1])
    return (x, q, s, sc, cb, None, None, 16, GROUP, torch.bfloat16)


def _w4a8_packed_args(x: torch.Tensor) -> tuple:
    _, _, sc, cb = _w4a8_storage(x.shape[1], x.shape[1])
    return (x, *_w4a8_packed(x.shape[1], x.shape[1]), sc, cb, None, None, 16, GROUP, torch.bfloat16)


def _w4a8_ops() -> list:
    from comfy_kitchen.backends.eager import w4a8_int8 as EW
    return [Op("dequantize_w4a8_int8_weight", lambda x: (*_w4a8_storage(*x.shape), None, 16, GROUP, torch.bfloat16),
               C.dequantize_w4a8_int8_weight, EW.dequantize_w4a8_int8_weight),
            Op("w4a8_int8_linear", _w4a8_linear_args, C.w4a8_int8_linear, EW.w4a8_int8_linear),
            Op("w4a8_packed_linear", _w4a8_packed_args, C.w4a8_packed_linear, EW.w4a8_packed_linear)]


OPS += _w4a8_ops()
LINEAR_OPS += ("w4a8_int8_linear", "w4a8_packed_linear")  # GEMMs: the linears' target (1.0x)


# ---- measurement ----------------------------------------------------------------------------

@dataclass
class Row:
    op: str
    k: int
    eager_ms: float
    ours_ms: float
    nbytes: int
    memcpy_ms: float
    alloc_copy_ms: float

    @property
    def speedup(self) -> float:
        return self.eager_ms / self.ours_ms

    @property
    def gbps(self) -> float:
        return self.nbytes / (self.ours_ms * 1e-3) / 1e9

    @property
    def x_memcpy(self) -> float:
        return self.ours_ms / self.memcpy_ms


def _tensors(value) -> list[torch.Tensor]:
    """The tensors in an argument tuple or a result (a tensor or a tuple of them)."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    return [t for t in items if isinstance(t, torch.Tensor)]


def bytes_moved(args: tuple, result) -> int:
    return sum(t.nbytes for t in _tensors(args) + _tensors(result))


def wall_ms() -> float:
    return time.perf_counter() * 1e3


def cpu_ms() -> float:
    """CPU time of this process (all threads, user + system) per torch thread: what the call
    would take on cores of its own if every thread was busy throughout. Time slices taken by
    other processes do not count; their pressure on caches and memory bandwidth still does, and
    a call that leaves threads idle looks faster than it is (eager more than ours)."""
    return time.process_time() * 1e3 / torch.get_num_threads()


CLOCKS = {"wall": wall_ms, "cpu": cpu_ms}
clock = wall_ms


def time_ms(fn: Callable, args: tuple) -> float:
    start = clock()
    fn(*args)
    return clock() - start


def memcpy_calls(nbytes: int) -> dict:
    """uint8 copies of nbytes / 2 bytes (reading + writing nbytes in total) as {name: (fn, args)}:
    into one preallocated destination, and into a new one each call."""
    src = torch.full((nbytes // 2,), 7, dtype=torch.uint8)
    return {"memcpy": (torch.empty_like(src).copy_, (src,)),
            "alloc_copy": (lambda s: torch.empty_like(s).copy_(s), (src,))}


def measure(op: Op, x: torch.Tensor, repeats: int) -> Row:
    """Time ours, eager and the copies, each in blocks of consecutive calls: a warm-up call, then
    `repeats` timed calls; the median over a name's timed calls is kept.

    Blocks, not round-robin: after each parallel torch op, torch's OpenMP workers keep spinning
    for a while, and on a 2-core machine they take half the CPU from whatever runs next. Calls
    interleaved with torch ops would charge that to our op (our kernels ran about 2x slower that
    way; with OMP_WAIT_POLICY=passive the difference disappears). Consecutive calls of one op
    measure each in its steady state, eager with its own OpenMP team warm.

    Eager runs first, in one block (a rotating eager op takes seconds per call). Ours and the two
    copies then alternate for ROUNDS rounds of blocks, so the ratio "x memcpy" compares timings
    taken side by side: the machine's state (a neighbour's load, page-cache and huge-page
    compaction work) moves over seconds, and one block of each, seconds apart, caught different
    states.
    """
    args = op.make_args(x)
    result = op.ours(*args)  # its result gives the bytes written
    nbytes = bytes_moved(args, result)
    del result
    calls = {"ours": (op.ours, args), **memcpy_calls(nbytes)}
    samples: dict[str, list[float]] = {"eager": block(op.eager, args, repeats)}
    for _ in range(ROUNDS):
        for name, (fn, fn_args) in calls.items():
            samples.setdefault(name, []).extend(block(fn, fn_args, repeats))
    med = {name: statistics.median(values) for name, values in samples.items()}
    return Row(op.name, x.shape[1], med["eager"], med["ours"], nbytes, med["memcpy"], med["alloc_copy"])


ROUNDS = 3  # alternating blocks of ours and the copies (measure)


def block(fn: Callable, args: tuple, repeats: int) -> list[float]:
    """A warm-up call, then `repeats` timed calls."""
    fn(*args)
    return [time_ms(fn, args) for _ in range(repeats)]


# ---- targets --------------------------------------------------------------------------------

@dataclass
class Target:
    label: str
    op: str
    measured: float  # worst value over all K
    goal: str
    met: bool


def _target(label: str, op: str, values: list[float], goal: float, higher_is_better: bool) -> Target:
    worst = min(values) if higher_is_better else max(values)
    met = worst >= goal if higher_is_better else worst <= goal
    goal_text = f">= {goal:g}x" if higher_is_better else f"<= {goal:g}x"
    return Target(label, op, worst, goal_text, met)


def targets(rows: list[Row]) -> list[Target]:
    by_op: dict[str, list[Row]] = {}
    for row in rows:
        by_op.setdefault(row.op, []).append(row)
    result = []
    for op in ROTATE_OPS:
        if op in by_op:
            result.append(_target("speedup vs eager", op, [r.speedup for r in by_op[op]],
                                  ROTATE_SPEEDUP_TARGET, True))
    for op, op_rows in by_op.items():
        goal = LINEAR_SPEEDUP_TARGET if op in LINEAR_OPS else SPEEDUP_TARGET
        result.append(_target("speedup vs eager", op, [r.speedup for r in op_rows], goal, True))
    for op in ROTATE_OPS:
        if op in by_op:
            result.append(_target("time vs memcpy", op, [r.x_memcpy for r in by_op[op]],
                                  MEMCPY_TARGET, False))
    return result


# ---- report ---------------------------------------------------------------------------------

def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


# CPU features that make eager's bfloat16 matmul (its rotation) fast: with them torch runs it in
# oneDNN's AMX or AVX512-BF16 kernels, without them in a slow fallback, and eager's rotating ops
# take 200x longer (benchmarks/results/cpu_ops_vs_eager.md), which moves every "speedup vs eager" of those ops.
BF16_MATMUL_FLAGS = ("amx_bf16", "avx512_bf16")


def bf16_matmul_units() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return "unknown"
    return ", ".join(u for u in BF16_MATMUL_FLAGS if u in flags) or "none"


# CPU time other processes used while we ran, as a share of all cores (Linux only): our timings
# mean something only when it is near 0 (with 2 cores one busy neighbour makes every multi-threaded
# op, memcpy included, wait for time slices).  The selftest measures it the same way.
OtherLoad = selftest_report.OtherLoad


def describe_load(share: float | None) -> str:
    if share is None:
        return "unknown"
    warning = " -- timings disturbed, rerun on an idle machine" if share > 0.10 else ""
    return f"{share:.0%} of all cores{warning}"


def build_info() -> str:
    """Which build of the extension ran: git commit of the checkout and the library's mtime."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(C.__file__)))
    try:
        commit = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=root, text=True,
                                capture_output=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(os.path.getmtime(C._C.__file__)))
    return f"git {commit}, {os.path.basename(C._C.__file__)} built {built}"


def header(args, other_load: str) -> str:
    return (f"- CPU: {cpu_model()}, {os.cpu_count()} logical cores; bfloat16 matmul units for eager: "
            f"{bf16_matmul_units()}\n"
            f"- comfy_kitchen_c: {build_info()}; CPU kernels {C._C.cpu_isa()} (of {', '.join(C._C.cpu_isas())}: "
            f"COMFY_KITCHEN_C_CPU_ISA)\n"
            f"- torch threads: {torch.get_num_threads()} (torch {torch.__version__})\n"
            f"- M = {args.m}, K in {list(args.k)}, bfloat16 inputs, group_size {GROUP}, "
            f"median of {args.repeats} runs after 1 warm-up (ours and the copies: of {ROUNDS} alternating blocks "
            f"of them), {args.clock} clock\n"
            f"- CPU used by other processes during the run: {other_load}\n"
            f"- OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}, huge-page advice for our "
            f"outputs: {'off' if os.environ.get('COMFY_KITCHEN_C_HUGE_PAGES') == '0' else 'on'} "
            f"(COMFY_KITCHEN_C_HUGE_PAGES)\n")


def results_table(rows: list[Row]) -> str:
    lines = ["| op | K | eager ms | ours ms | speedup | MB | GB/s | memcpy ms | x memcpy | +alloc ms |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r.op} | {r.k} | {r.eager_ms:.2f} | {r.ours_ms:.2f} | {r.speedup:.1f}x | "
                     f"{r.nbytes / 1e6:.1f} | {r.gbps:.1f} | {r.memcpy_ms:.2f} | {r.x_memcpy:.2f} | "
                     f"{r.alloc_copy_ms:.2f} |")
    return "\n".join(lines) + "\n"


def targets_table(items: list[Target]) -> str:
    lines = ["| target | op | worst over K | goal | result |", "|---|---|---:|---|---|"]
    for t in items:
        lines.append(f"| {t.label} | {t.op} | {t.measured:.2f}x | {t.goal} | "
                     f"{'PASS' if t.met else 'MISS'} |")
    return "\n".join(lines) + "\n"


def report(args, rows: list[Row], other_load: str) -> str:
    return ("## CPU benchmark: comfy_kitchen_c vs eager\n\n" + header(args, other_load) + "\n"
            + results_table(rows) + "\n### Targets\n\n" + targets_table(targets(rows)))


# ---- gemv_awq_w4a16: a sweep of its own (x rows M against a packed weight N x K) -------------

AWQ_M = (1, 2, 4, 8, 16, 32, 64)
AWQ_KN = ((3072, 3072), (3072, 12288), (12288, 3072))


def _awq_args(m: int, k: int, n: int) -> tuple:
    """x [M, K] bfloat16 and an AWQ weight of N x K, group 64, with a bfloat16 bias."""
    g = torch.Generator().manual_seed(2)
    q = torch.randint(-128, 128, (n, k // 2), dtype=torch.int8, generator=g)
    s = (torch.rand(k // 64, n, generator=g) * 0.02).to(torch.bfloat16)
    z = (torch.randn(k // 64, n, generator=g) * 0.05).to(torch.bfloat16)
    return torch.randn(m, k, generator=g).to(torch.bfloat16), q, s, z, torch.randn(n, generator=g).bfloat16(), 64


def awq_sweep(repeats: int) -> str:
    """eager ms and ours ms of gemv_awq_w4a16 at every M of AWQ_M and (K, N) of AWQ_KN, with 1
    torch thread and with all (a direct call of ours serves any number of rows; the registry's
    boundary is measured on the machine, comfy_kitchen_c/cpu_speed.py)."""
    from comfy_kitchen.backends.eager.awq import gemv_awq_w4a16 as eager_awq
    threads = torch.get_num_threads()
    lines = ["| threads | K | N | M | eager ms | ours ms | speedup |", "|---:|---:|---:|---:|---:|---:|---:|"]
    try:
        for t in sorted({1, threads}):
            torch.set_num_threads(t)
            for k, n in AWQ_KN:
                for m in AWQ_M:
                    args = _awq_args(m, k, n)
                    e = statistics.median(block(eager_awq, args, repeats))
                    o = statistics.median(block(C.gemv_awq_w4a16, args, repeats))
                    lines.append(f"| {t} | {k} | {n} | {m} | {e:.2f} | {o:.2f} | {e / o:.2f}x |")
                    print(f"  measured gemv_awq_w4a16 threads={t} K={k} N={n} M={m}", file=sys.stderr, flush=True)
    finally:
        torch.set_num_threads(threads)
    return "## gemv_awq_w4a16\n\n" + "\n".join(lines) + "\n"


# ---- main -----------------------------------------------------------------------------------

def parse_args(argv=None):
    names = [op.name for op in OPS]
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--m", type=int, default=DEFAULT_M, help="rows (default %(default)s)")
    p.add_argument("--k", type=int, nargs="+", default=list(DEFAULT_KS), help="columns, one or more")
    p.add_argument("--repeats", type=int, default=5, help="timed runs per measurement (default 5)")
    p.add_argument("--ops", nargs="+", choices=names, default=names, metavar="OP",
                   help="subset of ops to run: " + ", ".join(names))
    p.add_argument("--quick", action="store_true", help="M=512, K=3072 only, 3 repeats")
    p.add_argument("--markdown", metavar="PATH", help="also write the report to this file")
    p.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                   help="wall: elapsed time (default); cpu: process CPU time / torch threads, "
                        "for machines that other processes keep busy")
    p.add_argument("--awq", action="store_true", help="gemv_awq_w4a16's sweep over M, K, N and threads only")
    args = p.parse_args(argv)
    if args.quick:
        args.m, args.k, args.repeats = 512, [3072], 3
    return args


def main(argv=None) -> int:
    global clock
    args = parse_args(argv)
    clock = CLOCKS[args.clock]
    other_load = OtherLoad()
    torch.manual_seed(0)
    if args.awq:
        text = awq_sweep(args.repeats) + f"\n- CPU used by other processes: {describe_load(other_load.share())}\n"
        print(text)
        return 0
    ops = [op for op in OPS if op.name in args.ops]
    rows = []
    for k in args.k:
        x = torch.randn(args.m, k).to(torch.bfloat16)
        for op in ops:
            rows.append(measure(op, x, args.repeats))
            print(f"  measured {op.name} K={k}", file=sys.stderr, flush=True)
    text = report(args, rows, describe_load(other_load.share()))
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
