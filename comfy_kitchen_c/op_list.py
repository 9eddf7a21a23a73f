# SPDX-License-Identifier: Apache-2.0
"""Every op of backend "c", once: the list that the rest is made from or checked against.

One line per op, under comfy_kitchen's name.  From the list come the registration with
comfy_kitchen (backend.py: one constraint rule per registered op, which is the op's own
check), the op table of docs/ops.md (``python -m comfy_kitchen_c.op_list`` prints it; a test
compares), and the op lists of the tests (the parity fuzzer runs every op listed here).
What an op is made of, and where a new one goes:

* its C op(s): ``kernels`` names functions of ``_C`` (csrc/ops/op_list.h, one line there;
  the spec in csrc/ops/<family>.c and the device kernels under it);
* its contract: ``comfy_kitchen_c.ops.check_<name>`` (every argument, as eager's
  signature has it: the registry's rule and the op both run it, once per call) and the op
  function ``comfy_kitchen_c.ops.<name>``;
* its tests: a fuzz target (tests/fuzz/targets.py) with eager's result as the oracle.

``missing()`` says what an entry lacks of these, in words; tests/test_op_list.py runs it
over the list, so an op added without its C op, contract or tests fails there, and so does
a C op that no op of the list uses.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

# The CUDA kernels are built for compute capability 7.5 (Turing) and newer; the int8 GEMM is
# cuBLASLt's IMMA (7.5+); the FP4 GEMM cuBLASLt's block-scaled FP4 (10.0+; on the CPU a
# dequantize-and-matmul, which comfy_kitchen's eager backend cannot run there).
MIN_CC = (7, 5)
FP4_GEMM_MIN_CC = (10, 0)
# The MXFP8 GEMM: cuBLASLt's block-scaled FP8 (E8M0 scales per 32 values), 10.0+ as well; on the
# CPU a dequantize-and-matmul (eager's torch scaled_mm refuses the CPU's swizzled scales).
MXFP8_GEMM_MIN_CC = (10, 0)


@dataclass(frozen=True)
class Op:
    name: str                     # comfy_kitchen's name: ops.<name>, ops.check_<name>
    family: str                   # its row of docs/ops.md's table
    kernels: tuple[str, ...]      # the functions of _C it calls (csrc/ops/op_list.h)
    min_cc: tuple[int, int] = MIN_CC  # below it, a CUDA call falls through to the next backend
    registered: bool = True       # served through comfy_kitchen's registry (False: comfy_kitchen_c.ops only)
    note: str = ""                # docs/ops.md's words after the name
    # The registry's CPU calls: False where eager is faster on the CPU (the rule then gives them to
    # eager, with the reason logged; a direct call of comfy_kitchen_c.ops.<name> still runs ours)
    registry_cpu: bool = True


INT8, NVFP4, LINEAR, OURS = "int8", "NVFP4", "linear", "NVFP4 + ConvRot (`comfy_kitchen_c.ops` only)"
ROPE = "RoPE"
FP8 = "FP8"
RESIDUAL = "residual"
MXFP8 = "MXFP8"
W4A4 = "ConvRot W4A4 (int4)"
W4A8 = "W4A8 / W6A8"
AWQ = "AWQ"
_DEQUANT = ("dequantize_int8_convrot_weight_dtype",)
_LINEAR = ("int8_linear", "int8_linear_quantize", "int8_linear_epilogue")

OPS: tuple[Op, ...] = (
    Op("quantize_int8_rowwise", INT8, ("quantize_int8_rowwise",)),
    Op("quantize_int8_tensorwise", INT8, ("quantize_int8_tensorwise",)),
    Op("quantize_and_rotate_rowwise", INT8, ("quantize_int8_rowwise",)),
    Op("quantize_int8_convrot_weight", INT8, ("quantize_int8_rowwise",)),
    Op("rotate_int8_convrot_weight", INT8, ("rotate_int8_convrot_weight",)),
    Op("dequantize_int8_simple", INT8, _DEQUANT),
    Op("dequantize_int8_simple_dtype", INT8, _DEQUANT),
    Op("dequantize_int8_convrot_weight", INT8, _DEQUANT),
    Op("dequantize_int8_convrot_weight_dtype", INT8, _DEQUANT),
    Op("dequantize_int8_embedding", INT8, ("dequantize_int8_embedding",)),
    Op("quantize_nvfp4", NVFP4, ("quantize_nvfp4",), note="`pad_16x`, `hi_first`"),
    Op("dequantize_nvfp4", NVFP4, ("dequantize_nvfp4",), note="cuBLAS swizzled block scales"),
    Op("int8_linear", LINEAR, _LINEAR,
       note="scalar or per-channel weight scale, bias, ConvRot, every `input_act` of comfy_kitchen 0.2.40: "
            "`gelu_tanh`, `swiglu`, `rms_norm`, `situ`; the residual form"),
    Op("int8_linear_modulated", LINEAR, _LINEAR),
    Op("int8_linear_rms_modulated", LINEAR, _LINEAR),
    Op("scaled_mm_nvfp4", LINEAR, ("scaled_mm_nvfp4",), min_cc=FP4_GEMM_MIN_CC),
    Op("quantize_and_rotate_nvfp4", OURS, ("quantize_nvfp4",), registered=False),
    Op("nvfp4_linear", OURS, ("quantize_nvfp4", "scaled_mm_nvfp4"), registered=False,
       note='see "NVFP4 with rotation" below'),
    Op("apply_rope1", ROPE, ("apply_rope1",), note="x [B, H, L, D] or [B, L, H, D], float32 `freqs_cis`"),
    Op("apply_rope", ROPE, ("apply_rope1",)),
    Op("apply_rope1_", ROPE, ("apply_rope1",)),
    Op("apply_rope_", ROPE, ("apply_rope1",)),
    Op("apply_rope_split_half1", ROPE, ("apply_rope1",)),
    Op("apply_rope_split_half", ROPE, ("apply_rope1",)),
    Op("apply_rope_split_half1_", ROPE, ("apply_rope1",)),
    Op("apply_rope_split_half_", ROPE, ("apply_rope1",)),
    Op("quantize_per_tensor_fp8", FP8, ("quantize_per_tensor_fp8",), note="`float8_e4m3fn`, `float8_e5m2`"),
    Op("dequantize_per_tensor_fp8", FP8, ("dequantize_per_tensor_fp8",)),
    Op("stochastic_rounding_fp8", FP8, ("stochastic_rounding_fp8",), note="eager's bits for the same `rng`"),
    Op("rms_rope1", ROPE, ("rms_rope1",), note="rms_norm and RoPE in one pass"),
    Op("rms_rope", ROPE, ("rms_rope1",)),
    Op("rms_rope1_", ROPE, ("rms_rope1",)),
    Op("rms_rope_", ROPE, ("rms_rope1",)),
    Op("rms_rope_split_half1", ROPE, ("rms_rope1",)),
    Op("rms_rope_split_half", ROPE, ("rms_rope1",), note="`rot_dim`"),
    Op("rms_rope_split_half1_", ROPE, ("rms_rope1",)),
    Op("rms_rope_split_half_", ROPE, ("rms_rope1",)),
    Op("rms_gated_residual", RESIDUAL, ("rms_gated_residual",), note="gate and residual per row, batch or position"),
    Op("quantize_mxfp8", MXFP8, ("quantize_mxfp8",), note="`pad_32x`, E8M0 scales in cuBLAS's swizzled layout"),
    Op("dequantize_mxfp8", MXFP8, ("dequantize_mxfp8",)),
    Op("scaled_mm_mxfp8", MXFP8, ("scaled_mm_mxfp8", "dequantize_mxfp8"), min_cc=MXFP8_GEMM_MIN_CC),
    Op("quantize_convrot_w4a4_weight", W4A4, ("quantize_convrot_w4a4_weight",),
       note="`convrot_groupsize` 4 ... 1024, stochastic rounding with eager's noise"),
    Op("dequantize_convrot_w4a4_weight", W4A4, ("dequantize_convrot_w4a4_weight",)),
    Op("convrot_w4a4_linear", W4A4, ("quantize_convrot_w4a4_weight", "convrot_w4a4_linear",
                                     "prepare_int4_weight_for_int8_linear"),
       note="the int4 GEMM accumulated exactly: on the CPU over the codes unpacked to int8, on the GPU "
            "with the nibbles unpacked in registers"),
    Op("prepare_int4_weight_for_int8_linear", W4A4, ("prepare_int4_weight_for_int8_linear",)),
    Op("quantize_w4a8_int8_weight", W4A8, ("quantize_w4a8_int8_weight", "rotate_int8_convrot_weight"),
       note="every form: the 4-bit codebook (chosen as eager chooses it: torch's seeded sample and fit), uniform, "
            "asymmetric with its correction, 6-bit with the scale search; stochastic rounding with eager's noise"),
    Op("dequantize_w4a8_int8_weight", W4A8, ("dequantize_w4a8_int8_weight", "rotate_int8_convrot_weight"),
       note="4-bit codebook or uniform, 6-bit; e4m3 or float32 group scales, correction"),
    Op("w4a8_int8_linear", W4A8, ("dequantize_w4a8_int8_weight", "w4a8_linear") + _LINEAR,
       note="on CUDA the codes decoded a part of the rows at a time into the GEMM's scratch, never the whole "
            "weight; the correction form (eager's float F.linear) a part of the rows at a time too"),
    Op("w4a8_packed_linear", W4A8, ("dequantize_w4a8_int8_weight", "w4a8_linear") + _LINEAR,
       note="the MMA records decoded directly"),
    Op("gemv_awq_w4a16", AWQ, ("gemv_awq_w4a16",),
       note="any number of rows (the registry gives larger batches to eager's GEMM where that is faster: "
            "measured on the CPU, above `awq.GPU_MAX_ROWS` on CUDA); within the bound of docs/parity.md"),
)

BY_NAME = {op.name: op for op in OPS}

# Eager's quantized ops that "c" does not serve, with why.  A comfy_kitchen release that adds an
# op makes tests/test_registration.py fail until it is served (a line above) or listed here.
NOT_SERVED = {
    # SVDQuant: on CUDA comfy_kitchen's layout calls its own CUDA extension directly whenever it is built
    # (the registry is bypassed), so "c" would serve CPU calls only; its low-rank branch is torch's float
    # matmul, and its GEMM is a group-scaled int4 one (scales per 64 values of both operands)
    "quantize_svdquant_w4a4": "SVDQuant int4: on CUDA its layout calls comfy_kitchen's CUDA extension directly "
                              "(the registry is bypassed): CPU calls only would reach c; not served",
    "scaled_mm_svdquant_w4a4": "SVDQuant int4: on CUDA its layout calls comfy_kitchen's CUDA extension directly "
                               "(the registry is bypassed): CPU calls only would reach c; not served",
    # eager's fp16_linear is torch.nn.functional.linear (cuBLAS on CUDA, oneDNN on the CPU) plus an
    # addcmul; measured (benchmarks/results/cpu_ops_vs_eager.md, "fp16_linear"): bfloat16 on the CPU
    # runs oneDNN's AMX kernels at 80-180 GFLOP/s, and cuBLAS is the GPU's own GEMM.  float16 on the
    # CPU (torch's 8-11 GFLOP/s path) is the one case a C GEMM could win; not done (its sums would
    # not be eager's bits, and the op is meant for CUDA's fp16 accumulation)
    "fp16_linear": "eager is torch's own GEMM (cuBLAS, oneDNN), which c does not beat",
}


def missing(op: Op, ops_module, c_module, targets) -> list[str]:
    """What op lacks of its parts (C op, contract, tests), one sentence each; [] when complete.
    targets: the fuzz targets by op name (tests/fuzz/targets.py)."""
    out = []
    c_ops = set(getattr(c_module, "OP_FUNCTIONS", ()))
    for kernel in op.kernels:
        if kernel not in c_ops:
            out.append(f"{op.name}: its C op {kernel} is not a function of {c_module.__name__} "
                       "(add it to csrc/ops/op_list.h with its spec in csrc/ops/<family>.c)")
    fn = getattr(ops_module, op.name, None)
    check = getattr(ops_module, f"check_{op.name}", None)
    if fn is None:
        out.append(f"{op.name}: no op function comfy_kitchen_c.ops.{op.name}")
    if check is None:
        out.append(f"{op.name}: no contract comfy_kitchen_c.ops.check_{op.name} (the argument check that "
                   "the registry's rule and the op run)")
    elif fn is not None and list(inspect.signature(check).parameters) != list(inspect.signature(fn).parameters):
        out.append(f"{op.name}: check_{op.name} takes other parameters than {op.name}")
    if op.name not in targets:
        out.append(f"{op.name}: no test: add its fuzz target with eager's result as the oracle "
                   "(tests/fuzz/targets.py)")
    return out


def unused_c_ops(c_module, ops=OPS) -> list[str]:
    """The functions of _C that no op of the list calls: each is a C op left behind."""
    used = {k for op in ops for k in op.kernels}
    return [f"C op {name} of {c_module.__name__} serves no op of comfy_kitchen_c/op_list.py "
            "(remove it from csrc/ops/op_list.h, or list the op that calls it)"
            for name in getattr(c_module, "OP_FUNCTIONS", ()) if name not in used]


def _gpu_cell(family_ops) -> str:
    """The compute capabilities a family's ops run on: the family's floor, and each op above it."""
    floor = min(op.min_cc for op in family_ops)
    above = [f"`{op.name}` {op.min_cc[0]}.{op.min_cc[1]}+" for op in family_ops if op.min_cc != floor]
    return f"{floor[0]}.{floor[1]}+" + (f" ({', '.join(above)}; below, the call falls through)" if above else "")


def readme_table(ops=OPS) -> str:
    """docs/ops.md's op table: one row per family, in the list's order, with where its ops run
    (every op has CPU kernels; on CUDA from the compute capability the list gives)."""
    families: dict[str, list[Op]] = {}
    for op in ops:
        families.setdefault(op.family, []).append(op)
    rows = ["| family | ops | CPU | CUDA (compute capability) |", "|---|---|---|---|"]
    for family, members in families.items():
        names = ", ".join(f"`{op.name}`" + (f" ({op.note})" if op.note else "") for op in members)
        slower = [f"`{op.name}`" for op in members if not op.registry_cpu]
        cpu = "all" + (f" ({', '.join(slower)}: direct calls only; the registry gives its CPU calls to eager, "
                       "which is faster there)" if slower else "")
        rows.append(f"| {family} | {names} | {cpu} | {_gpu_cell(members)} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(readme_table())
