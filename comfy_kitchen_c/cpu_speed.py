# SPDX-License-Identifier: Apache-2.0
"""Where the CPU runs torch's code instead of ours, because it is faster there: measured side by
side with eager (benchmarks/bench_cpu_grid.py; the figures: benchmarks/results/cpu_speed_rules.md).

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

import json
import logging
import os
import platform
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable

import torch

from ._checks import DTYPE_CODE_TO_DTYPE

logger = logging.getLogger("comfy_kitchen_c")

# (input_act, x dtype) whose activation torch computes faster than our fused load, on the CPU's
# library-GEMM path.  Measured 1 thread, K = N = 3072, M = 16, 64, 256, 1024, ABAB medians of 5
# (benchmarks/results/cpu_speed_rules.md): our fused time / torch's activation +
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


# ---- calls the registry gives to eager, decided on this CPU ------------------------------------
# Where a valid CPU call runs faster in eager's code (a call so small that ours costs more per call,
# the argument check and the hand-over to C, than eager's one or two torch ops; a dtype our kernel
# stores in software), the registry gives it to eager when it picks "c" by priority (backend.py; an
# explicit "c", use_backend("c") or get_implementation(..., backend="c"), always runs ours).  Where
# that is, is measured on this machine, not assumed from another: at the first call a rule below
# decides (per op, dtype and thread count), ours and eager's are timed side by side over a ladder of
# sizes (PROBES), and eager serves the sizes where it measured faster than MARGIN; the result is kept
# in a file keyed by CPU model and the versions of torch, comfy_kitchen and comfy-kitchen-c
# (COMFY_KITCHEN_C_CPU_SPEED_CACHE, default the user's cache folder), so each machine measures once.
# COMFY_KITCHEN_C_CPU_SPEED=off gives every valid call to "c".  `doctor` shows the CPU's features,
# the file and what was measured.

MARGIN = 0.95      # eager serves a size only where eager ms / ours ms measured below this: nearer 1.0
                   # is noise (two idle runs of one cell differ by up to 5%), and a tie goes to "c"
ROUNDS = 5         # ABAB rounds per size; the ratio is their median
BLOCK_S = 0.002    # each side's block of calls per round (one call where a call takes longer)
DISTURBED = 2.0    # a size whose rounds' ratios spread wider (largest / smallest) is timed again, twice at
                   # most; still that wide, it counts as "c" and the table is not written to the file
CLOSE = (0.8, 1.25)  # a size measured this near a tie is timed once more, and decided by both timings
FILE_FORMAT = 1


def _numel(kwargs: dict, t: torch.Tensor) -> int:
    return t.numel()


def _row_count(kwargs: dict, t: torch.Tensor) -> int:
    return t.numel() // t.shape[-1] if t.ndim and t.shape[-1] else 0


def _gathered(kwargs: dict, t: torch.Tensor) -> int:
    """dequantize_int8_embedding's work: the rows it gathers (indices x D), not the table."""
    indices = kwargs.get("indices")
    return indices.numel() * t.shape[-1] if isinstance(indices, torch.Tensor) and t.ndim == 2 else t.numel()


def _own_dtype(kwargs: dict, t: torch.Tensor):
    return t.dtype


def _code_dtype(kwargs: dict, t: torch.Tensor):
    return DTYPE_CODE_TO_DTYPE.get(kwargs.get("output_dtype_code"))


def _output_type(kwargs: dict, t: torch.Tensor):
    return kwargs.get("output_type", torch.bfloat16)


def _float32(kwargs: dict, t: torch.Tensor):
    return torch.float32  # dequantize_int8_simple's output


def _wscales_dtype(kwargs: dict, t: torch.Tensor):
    s = kwargs.get("wscales")
    return s.dtype if isinstance(s, torch.Tensor) else None


def _gen(seed: int = 3) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


K_ELEMENTWISE = 3072   # a row of Flux's and WAN 2.1 14B's hidden states
K_LINEAR = 3072        # the linears' K = N: Flux's attention projections
D_EMBEDDING = 4096     # a text encoder's embedding row (T5-XXL, Llama)


def _int8_rows(rows: int, width: int = K_ELEMENTWISE) -> tuple:
    g = _gen()
    return torch.randint(-127, 128, (rows, width), generator=g, dtype=torch.int8), torch.rand(rows, 1, generator=g) + 0.01


def _build_dequant(dtype, rows):
    q, s = _int8_rows(rows)
    return {"q": q, "scale": s}


def _build_dequant_dtype(dtype, rows):
    code = {v: k for k, v in DTYPE_CODE_TO_DTYPE.items()}[dtype]
    return {**_build_dequant(dtype, rows), "output_dtype_code": code}


def _build_quant_fp8(dtype, rows):
    x = torch.randn(rows, K_ELEMENTWISE, generator=_gen()).to(dtype)
    return {"x": x, "scale": torch.tensor(0.01), "output_type": torch.float8_e4m3fn}


def _build_dequant_fp8(dtype, rows):
    x = (torch.randn(rows, K_ELEMENTWISE, generator=_gen()) * 50).to(torch.float8_e4m3fn)
    return {"x": x, "scale": torch.tensor(0.01), "output_type": dtype}


def _build_residual(dtype, rows):
    g = _gen()
    k = K_ELEMENTWISE
    return {"activation": torch.randn(rows, k, generator=g).to(dtype), "norm_weight": torch.rand(k, generator=g).to(dtype),
            "residual": torch.randn(rows, k, generator=g).to(dtype), "gate": torch.randn(1, k, generator=g).to(dtype),
            "eps": 1e-6}


def _build_embedding(dtype, tokens):
    q, s = _int8_rows(256, D_EMBEDDING)
    code = {v: k for k, v in DTYPE_CODE_TO_DTYPE.items()}[dtype]
    return {"q": q, "scale": s, "indices": torch.randint(0, 256, (tokens,), generator=_gen()), "group_size": 0,
            "output_dtype_code": code}


# The linears' forms: each one's own speed question (a float16 residual can be slower where a plain
# float16 linear is faster), measured when a call of that form first comes
ACTIVATIONS = ("gelu_tanh", "swiglu", "situ", "rms_norm")
WIDENING = ("swiglu", "situ")  # x holds two halves of K: [gate | up], [hidden | gate]


def _linear_form(kwargs: dict, t: torch.Tensor):
    """(x's dtype, the form): "plain", or its parts joined by "+": convrot, the activation, residual."""
    parts = ["convrot"] if kwargs.get("convrot") is True else []
    act = kwargs.get("input_act")
    if act is not None and act != "none":
        parts.append(act if act in ACTIVATIONS else "?")
    if kwargs.get("residual") is not None:
        parts.append("residual")
    return t.dtype, "+".join(parts) or "plain"


def _linear_accepts(key) -> bool:
    return isinstance(key, tuple) and key[0] in FLOATS and "?" not in key[1].split("+")


def _build_linear(op: str):
    def build(key, rows):
        dtype, form = key
        parts = form.split("+")
        g = _gen()
        k = n = K_LINEAR
        act = next((p for p in parts if p in ACTIVATIONS), None)
        kw = {"x": torch.randn(rows, 2 * k if act in WIDENING else k, generator=g).to(dtype),
              "weight": torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8),
              "weight_scale": torch.rand(n, generator=g) * 0.01 + 0.001, "bias": torch.randn(n, generator=g).to(dtype),
              "out_dtype": dtype}
        vec = (torch.rand(k, generator=g) + 0.5).to(dtype)
        if "convrot" in parts:
            kw.update(convrot=True, convrot_groupsize=256)
        if act is not None:
            kw["input_act"] = act
            if act == "rms_norm":
                kw.update(input_act_weight=vec, input_act_eps=1e-6)
        if "residual" in parts:
            kw.update(residual=torch.randn(rows, n, generator=g).to(dtype),
                      residual_scale=torch.rand(n, generator=g).to(dtype))
        if op == "int8_linear_modulated":
            kw["modulation_scale"] = vec * 0.1
        elif op == "int8_linear_rms_modulated":
            kw.update(norm_weight=vec, norm_eps=1e-6, modulation_scale=vec * 0.1)
        return kw
    return build


def _build_awq(dtype, rows):
    g = _gen()
    k = n = K_LINEAR
    group = 64
    return {"x": torch.randn(rows, k, generator=g).to(dtype),
            "qweight": torch.randint(-128, 128, (n, k // 2), generator=g, dtype=torch.int8),
            "wscales": (torch.rand(k // group, n, generator=g) * 0.02 + 0.001).to(dtype),
            "wzeros": (torch.randn(k // group, n, generator=g) * 0.05).to(dtype), "bias": None, "group_size": group}


FLOATS = (torch.float32, torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Probe:
    """One op's speed question: for calls whose `key` (a dtype, or the linears' (dtype, form)) is one
    of `keys` (or passes `accepts`), at which sizes is eager faster on this CPU.  Sizes are counted by
    `size` (elements of the argument `main`, or its rows); `ladder` is the sizes timed, as the row
    counts `build` takes (`width` elements a row)."""
    op: str
    main: str
    unit: str
    key: Callable
    keys: tuple
    build: Callable
    ladder: tuple
    width: int
    size: Callable = _numel
    key_means: str = "dtype"
    accepts: Callable | None = None

    def takes(self, key) -> bool:
        return self.accepts(key) if self.accepts is not None else key in self.keys


_LINEAR_LADDER = (1, 16, 64, 256, 1024, 4096)  # ComfyUI's tokens of one image: a few hundred to a few thousand
PROBES: dict[str, Probe] = {p.op: p for p in (
    Probe("dequantize_int8_simple", "q", "elements", _float32, (torch.float32,), _build_dequant,
          (1, 4, 16, 32, 64, 128, 256, 1024), K_ELEMENTWISE, key_means="output dtype"),
    Probe("dequantize_int8_simple_dtype", "q", "elements", _code_dtype, FLOATS, _build_dequant_dtype,
          (1, 4, 16, 32, 64, 128, 256, 1024), K_ELEMENTWISE, key_means="output dtype"),
    Probe("quantize_per_tensor_fp8", "x", "elements", _own_dtype, FLOATS, _build_quant_fp8,
          (1, 2, 4, 16, 64), K_ELEMENTWISE),
    Probe("dequantize_per_tensor_fp8", "x", "elements", _output_type, FLOATS, _build_dequant_fp8,
          (1, 2, 4, 16, 64), K_ELEMENTWISE, key_means="output dtype"),
    Probe("rms_gated_residual", "activation", "elements", _own_dtype, FLOATS, _build_residual,
          (1, 8, 16, 32, 64, 256, 1024), K_ELEMENTWISE),
    Probe("dequantize_int8_embedding", "q", "elements", _code_dtype, FLOATS, _build_embedding,
          (1, 4, 16, 64, 256), D_EMBEDDING, size=_gathered, key_means="output dtype"),
    *(Probe(op, "x", "rows", _linear_form, tuple((d, "plain") for d in FLOATS), _build_linear(op), _LINEAR_LADDER,
            K_LINEAR, size=_row_count, key_means="x, form", accepts=_linear_accepts)
      for op in ("int8_linear", "int8_linear_modulated", "int8_linear_rms_modulated")),
    Probe("gemv_awq_w4a16", "x", "rows", _wscales_dtype, FLOATS, _build_awq, (1, 4, 16, 32, 64, 256),
          K_LINEAR, size=_row_count, key_means="compute dtype (wscales')"),
)}


# ---- the decisions: this process's, the cache file's, or measured now --------------------------

_tables: dict[tuple, tuple] = {}   # (op, dtype, threads) -> ((lo, hi, reason), ...): sizes eager serves
_lock = threading.RLock()
_file_doc: dict | None = None      # the cache file as read (this environment's entry), once per process


def mode() -> str:
    """"measure" (the default) or "off" (COMFY_KITCHEN_C_CPU_SPEED)."""
    return _mode


def _setting(name: str, default):
    try:
        from . import settings
        return settings.value(name)
    except Exception:  # noqa: BLE001 - the settings' own problems are reported at import
        return default


_mode: str = _setting("COMFY_KITCHEN_C_CPU_SPEED", "measure") or "measure"
_off: bool = _mode == "off"
_generation = 0  # configure() counts: the rules' remembered look-ups are of an older one


def configure(mode: str | None = None, cache_file: str | None = None) -> None:
    """Forgets every decision of this process and (re)reads the settings; tests pass them."""
    global _mode, _off, _cache_override, _file_doc, _generation
    with _lock:
        _generation += 1
        _tables.clear()
        _file_doc = None
        _mode = mode if mode is not None else (_setting("COMFY_KITCHEN_C_CPU_SPEED", "measure") or "measure")
        _off = _mode == "off"
        _cache_override = cache_file


_cache_override: str | None = None


def cache_file() -> str:
    """Where measured decisions are kept: COMFY_KITCHEN_C_CPU_SPEED_CACHE, else the user's cache folder."""
    if _cache_override is not None:
        return _cache_override
    configured = _setting("COMFY_KITCHEN_C_CPU_SPEED_CACHE", None)
    if configured:
        return configured
    from .flight import cache_root
    return os.path.join(cache_root(), "cpu_speed.json")


def decline(op: str, kwargs: dict) -> tuple[str, str] | None:
    """The registry's speed rule for a CPU call of op (backend.py runs it before the argument check,
    and only when comfy_kitchen picks "c" by priority): (the argument whose size decides, why eager is
    faster there) where eager measured faster on this CPU, else None.  The first call of an (op,
    dtype, thread count) not yet measured here measures it (about 0.1 s; a linear's form 5-15 s), or
    reads it from the cache file."""
    rule = _RULES.get(op)
    return rule(kwargs) if rule is not None else None


def decided(op: str, kwargs: dict) -> bool | None:
    """Whether the registry gives this CPU call to eager for speed, from what is already measured
    (this process's decisions or the cache file's), never timing anything: None where the call's
    (op, dtype, thread count) is not measured yet, or no rule applies (the selftest, doctor)."""
    probe = PROBES.get(op)
    t = kwargs.get(probe.main) if probe is not None else None
    if _off or not isinstance(t, torch.Tensor) or not t.is_cpu:
        return None
    key = probe.key(kwargs, t)
    if not probe.takes(key):
        return None
    threads = torch.get_num_threads()
    ranges = _tables.get((op, key, threads))
    if ranges is None:
        entry = _file_tables().get(_table_key(op, key, threads))
        if entry is None:
            return None
        ranges = _ranges(probe, key, threads, entry)
    size = probe.size(kwargs, t)
    return any(lo <= size < hi for lo, hi, _ in ranges)


def _pair(argument: str, reason: str) -> tuple[str, str]:
    return argument, reason


def rule_for(op: str, make: Callable[[str, str], object] = _pair) -> Callable[[dict], object] | None:
    """decline() for one op, made once: what it returns for a declined call is make(argument, reason),
    made once per reason (backend.py makes comfy_kitchen's ValidationResult), so that a declined call
    costs a few attribute reads; the call's own size is logged at DEBUG."""
    probe = PROBES.get(op)
    if probe is None:
        return None
    main, key_of, takes, size_of, unit = probe.main, probe.key, probe.takes, probe.size, probe.unit
    own_dtype, plain_size = key_of is _own_dtype, size_of is _numel
    tensor, threads_now, tables, debug, level = torch.Tensor, torch.get_num_threads, _tables, logger.isEnabledFor, \
        logging.DEBUG
    # the logger's own answer for DEBUG where it has one (logging keeps it per level, and forgets it
    # when levels change): isEnabledFor costs a Python call on every declined call otherwise
    answers = getattr(logger, "_cache", {})
    # the previous call's look-up: (key, threads, generation) -> ((lo, hi, result, reason), ...)
    last_key: list = [None]
    last_ranges: list = [()]

    def rule(kwargs: dict):
        if _off:
            return None
        t = kwargs.get(main)
        if t.__class__ is not tensor and not isinstance(t, tensor):
            return None
        if not t.is_cpu:
            return None
        try:
            look = (t.dtype if own_dtype else key_of(kwargs, t), threads_now(), _generation)
            if look == last_key[0]:
                ranges = last_ranges[0]
            else:
                key, threads, _ = look
                found = tables.get((op, key, threads))
                if found is None:
                    if not takes(key):
                        return None
                    found = _table(probe, key, threads)
                ranges = tuple((lo, hi, make(main, reason), reason) for lo, hi, reason in found)
                last_key[0], last_ranges[0] = look, ranges
        except TypeError:  # an argument no key is made of (a list for a dtype code): the op's check refuses it
            return None
        if ranges:
            size = t.numel() if plain_size else size_of(kwargs, t)
            for lo, hi, result, reason in ranges:
                if lo <= size < hi:
                    if answers.get(level) or (answers.get(level) is None and debug(level)):
                        logger.debug("backend 'c' declines %s: argument '%s': %d %s; %s", op, main, size, unit, reason)
                    return result
        return None

    rule.__name__ = f"speed_rule_{op}"
    return rule


def _name(key) -> str:
    """A key in words: "float16", or a linear's "float16 residual"."""
    if isinstance(key, tuple):
        return " ".join(_name(part) for part in key)
    return str(key).replace("torch.", "")


def _table_key(op: str, dtype, threads: int) -> str:
    return f"{op}|{_name(dtype)}|{threads}"


def _table(probe: Probe, key, threads: int) -> tuple:
    with _lock:
        ranges = _tables.get((probe.op, key, threads))
        if ranges is not None:
            return ranges
        entry = _file_tables().get(_table_key(probe.op, key, threads))
        if entry is None:
            entry = measure(probe, key, threads)
            if not entry["disturbed"]:
                _write(_table_key(probe.op, key, threads), entry)
        ranges = _ranges(probe, key, threads, entry)
        _tables[(probe.op, key, threads)] = ranges
        return ranges


def _ranges(probe: Probe, key, threads: int, entry: dict) -> tuple:
    """The sizes eager serves, from the ladder's timings (sizes s_0 < s_1 < ...): up to s_0 where
    s_0 measured eager faster, from s_i to s_i+1 where both did, from the last where it did.  A size
    between a point where eager was faster and one where ours was goes to "c"."""
    points = sorted((int(size), float(ratio)) for size, ratio, *_ in entry.get("points", ()))
    if not points:
        return ()
    eager = [ratio < MARGIN for _, ratio in points]
    spans = []
    if eager[0]:
        spans.append([0, points[0][0] + 1])
    for i in range(len(points) - 1):
        if eager[i] and eager[i + 1]:
            spans.append([points[i][0], points[i + 1][0] + 1])
    if eager[-1]:
        spans.append([points[-1][0], float("inf")])
    merged: list[list] = []
    for lo, hi in spans:
        if merged and merged[-1][1] >= lo:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    out = []
    for lo, hi in merged:
        inside = ", ".join(f"{r:.2f}x at {s}" for s, r in points if lo <= s < hi)
        where = ("at every size in" if lo == 0 and hi == float("inf") else f"up to {hi - 1}" if lo == 0 else f"from {lo}" if hi == float("inf") else f"from {lo} to {hi - 1}")
        out.append((lo, hi, f"eager is faster on this CPU {where} {probe.unit} ({_name(key)} {probe.key_means}, "
                            f"{threads} thread{'s' if threads != 1 else ''}; measured here, ours ran at {inside} "
                            "of eager's speed: comfy_kitchen_c/cpu_speed.py)"))
    return tuple(out)


# ---- measuring -------------------------------------------------------------------------------

def _eager(op: str):
    try:
        from comfy_kitchen.registry import registry
    except ImportError:
        return None
    try:
        return registry.get_implementation(op, backend="eager")
    except RuntimeError:  # comfy_kitchen's BackendError: eager missing, disabled or without op
        return None


def _block(fn, kwargs: dict, calls: int, warm: bool = True) -> float:
    if warm:
        fn(**kwargs)  # charged the other side's still-spinning OpenMP workers, untimed
    start = time.perf_counter()
    for _ in range(calls):
        fn(**kwargs)
    return (time.perf_counter() - start) / calls


def time_pair(ours, eager, kwargs: dict, rounds: int = ROUNDS) -> tuple[float, float]:
    """(median of eager s / ours s over ABAB rounds, largest / smallest round ratio)."""
    one = min(_block(ours, kwargs, 1), _block(eager, kwargs, 1))
    calls = max(1, min(500, round(BLOCK_S / max(one, 1e-7))))
    warm = one < 0.05  # a call this long outlasts the other side's spinning workers: no untimed call
    ratios = []
    for _ in range(rounds if one < 0.02 else 3):
        o = _block(ours, kwargs, calls, warm)
        e = _block(eager, kwargs, calls, warm)
        ratios.append(e / o)
    ratios.sort()
    return ratios[len(ratios) // 2], ratios[-1] / ratios[0]


def measure(probe: Probe, key, threads: int) -> dict:
    """Times ours against eager at each size of probe's ladder, with this process's thread count
    (threads: the count the table is for).  {"points": [[size, ratio, spread], ...], "disturbed": bool,
    "error": str | None}; no points where either side cannot run the call (then "c" serves)."""
    ops = sys.modules[__package__ + ".ops"]  # loaded before any registry call (no import: linear.py imports us)
    eager = _eager(probe.op)
    entry = {"points": [], "disturbed": False, "error": None, "seconds": 0.0}
    if eager is None:
        entry["error"] = "eager's implementation not found"
        return entry
    ours = getattr(ops, probe.op)
    start = time.perf_counter()
    logger.info("comfy_kitchen_c: timing %s (%s %s, %d thread%s) against eager on this CPU, once; kept in %s",
                probe.op, _name(key), probe.key_means, threads, "s" if threads != 1 else "", cache_file())
    try:
        with torch.inference_mode():
            for rows in probe.ladder:
                kwargs = probe.build(key, rows)
                size = probe.size(kwargs, kwargs[probe.main])
                clean = []  # the medians of undisturbed timings
                for _ in range(3):
                    ratio, spread = time_pair(ours, eager, kwargs)
                    if spread <= DISTURBED:
                        clean.append(ratio)
                        if len(clean) == 2 or not CLOSE[0] <= ratio <= CLOSE[1]:
                            break
                if clean:
                    ratio = statistics.median(clean)
                else:
                    entry["disturbed"] = True
                    ratio = max(ratio, 1.0)  # not trusted: "c" serves it
                entry["points"].append([size, round(ratio, 4), round(spread, 3)])
    except Exception as exc:  # noqa: BLE001 - a side that cannot run the call: no rule, "c" serves it
        entry = {"points": [], "disturbed": False, "error": f"{type(exc).__name__}: {exc}", "seconds": 0.0}
    entry["seconds"] = round(time.perf_counter() - start, 3)
    return entry


# ---- the cache file ----------------------------------------------------------------------------

def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo; elsewhere platform's words)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_features() -> dict:
    """What explains where eager's torch ops are fast: the matrix and dot-product extensions that
    torch's oneDNN GEMMs use, the half-precision instructions, the cores."""
    flags: set[str] = set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    wanted = ("amx_int8", "amx_bf16", "amx_fp16", "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16",
              "avx512f", "avx2", "f16c")
    try:
        from . import _C
        isa, runtime = _C.cpu_isa(), _C.cpu_threads()
    except Exception:  # noqa: BLE001
        isa = runtime = "unknown"
    return {"model": cpu_model(), "cores": os.cpu_count(), "threads": torch.get_num_threads(),
            "torch_capability": getattr(torch.backends.cpu, "get_cpu_capability", lambda: "unknown")(),
            "flags": [f for f in wanted if f in flags] if flags else None, "isa": isa, "runtime": runtime}


def environment() -> str:
    """The cache file's key for this machine and these versions: a measurement holds for them only."""
    try:
        from importlib.metadata import version
        ck = version("comfy-kitchen")
    except Exception:  # noqa: BLE001
        ck = "none"
    __version__ = getattr(sys.modules.get(__package__), "__version__", "unknown")  # the package imports us
    f = cpu_features()
    return (f"{f['model']} | torch {torch.__version__} | comfy_kitchen {ck} | comfy_kitchen_c {__version__} | "
            f"{f['isa']} {f['runtime']}")


def read_file(path: str | None = None) -> dict:
    """The cache file's contents ({} when absent or unreadable)."""
    try:
        with open(path or cache_file(), encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) and doc.get("format") == FILE_FORMAT else {}


def _file_tables() -> dict:
    global _file_doc
    if _file_doc is None:
        _file_doc = dict(read_file().get("environments", {}).get(environment(), {}))
    return _file_doc


def _write(name: str, entry: dict) -> None:
    """Adds one table to the file (read again first: another process may have written it)."""
    global _file_doc
    path = cache_file()
    doc = read_file(path) or {"format": FILE_FORMAT, "environments": {}}
    envs = doc.setdefault("environments", {})
    env = environment()
    envs.setdefault(env, {})[name] = entry
    for old in list(envs)[:-8]:  # the 8 newest environments (torch, comfy_kitchen upgrades) are kept
        if old != env:
            envs.pop(old)
    _file_doc = dict(envs[env])
    try:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        os.replace(tmp, path)
    except OSError as exc:  # kept for this process only
        logger.warning("comfy_kitchen_c: cannot write %s (%s); the CPU speed measurement is kept for this "
                       "process only", path, exc)


def known(path: str | None = None) -> dict:
    """doctor's view: {"file", "environment", "tables": {name: entry} of this environment (file and
    this process), "other_environments": count}."""
    doc = read_file(path)
    env = environment()
    envs = doc.get("environments", {})
    return {"file": path or cache_file(), "exists": os.path.exists(path or cache_file()), "environment": env,
            "tables": dict(envs.get(env, {})), "other_environments": len([e for e in envs if e != env]),
            "mode": _mode}


def eager_sizes(op: str, dtype, threads: int, entry: dict) -> list[tuple]:
    """(lo, hi) of the sizes eager serves for one table entry (doctor, the benchmark)."""
    return [(lo, hi) for lo, hi, _ in _ranges(PROBES[op], dtype, threads, entry)]


_RULES = {op: rule_for(op) for op in PROBES}
