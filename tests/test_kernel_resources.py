# SPDX-License-Identifier: Apache-2.0
"""Every CUDA kernel fits every architecture we build for: ptxas reports no
register spills and no stack frame (a register array indexed dynamically lives
in local memory: a stack frame without spills), and each kernel's launch
configuration fits the registers and static shared memory of an SM on each
target.  Needs nvcc (not a GPU).  Where a cuobjdump is found, the machine code
is also checked for the vector-wide global accesses of the row kernels.

The device code is compiled per target by benchmarks/gpu_model.py (-cubin: no host
compiler), in parallel, and cached under build/gpu_model/ by the sources' contents,
so a second run (and tests/test_gpu_model.py, which reads sm_90 and sm_120 from the
same cache) compiles nothing.  Targets: COMFY_KITCHEN_C_CUDA_ARCHS when set (the
build's own, as for a development build), else every target of setup.py."""
import ast
import os
import re
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_model  # noqa: E402

NVCC = gpu_model.find_nvcc()

# Threads per block of each kernel's launches (kernels/int8.cu, kernels/nvfp4.cu):
# CKC_ROW_THREADS = 256 for the row and elementwise kernels, CKC_NVFP4_THREADS = 128;
# the tile kernels (kernels/int8_tile.cu, tile.cuh) launch up to CKC_TILE_MAX_THREADS = 1024
# (CKC_TILE_WIDE_THREADS = 512 for the stochastic and activated instances: tile_threads).
BLOCK_THREADS = {
    "int8_rowwise_kernel": 256, "hadamard_rows_kernel": 256, "int8_dequant_kernel": 256, "int8_dequant_walk_kernel": 256,
    "int8_dequant_rotated_kernel": 256, "tensor_absmax_kernel": 256, "tensor_quantize_kernel": 256,
    "tensor_scale_kernel": 1, "nvfp4_quant_kernel": 128, "nvfp4_dequant_kernel": 128,
    "ckc_tile_rows_kernel": 1024, "ckc_tile_dequant_kernel": 1024, "nvfp4_quant_rows_kernel": 1024,
    "nvfp4_dequant_rows_kernel": 1024,
    # kernels/linear.cu: CKC_GEMV_WARPS = 8 warps, the epilogue CKC_ROW_THREADS
    "int8_gemv_kernel": 256, "linear_epilogue_kernel": 256, "rms_factor_kernel": 32,
    # kernels/flight.cu: the flight record's completion mark, the start of a CUDA-graph replay
    "flight_mark_kernel": 1, "replay_begin_kernel": 1,
    # kernels/fp8.cu, kernels/rope.cu: CKC_ROW_THREADS
    "fp8_quant_kernel": 256, "fp8_dequant_kernel": 256, "fp8_stochastic_kernel": 256, "rope_kernel": 256,
    # kernels/rope.cu, kernels/residual.cu: CKC_RMS_ROPE_WARPS = 8 warps, one row each
    "rms_rope_kernel": 256, "rms_gated_residual_kernel": 256,
    # kernels/mxfp8.cu: CKC_ROW_THREADS
    "mxfp8_quant_kernel": 256, "mxfp8_dequant_kernel": 256,
    # kernels/w4a4.cu: CKC_ROW_THREADS (the GEMM: 256 threads per 64 x 64 tile)
    "w4_quant_kernel": 256, "w4_dequant_kernel": 256, "w4_unpack_kernel": 256, "w4_linear_kernel": 256,
    # kernels/w4a8.cu: CKC_ROW_THREADS; the GEMV CKC_GEMV_WARPS = 8 warps
    "w4a8_dequant_kernel": 256, "w4a8_gemv_kernel": 256,
    # kernels/w4a8_quant.cu: CKC_W4A8Q_THREADS (a thread per group or row)
    "w4a8_quant_kernel": 128,
    # kernels/awq.cu: CKC_AWQ_WARPS = 4 warps
    "awq_gemv_kernel": 128,
}
REGISTERS_PER_SM = 65536
REGISTER_GRANULE = 8              # registers are allocated per thread in multiples of 8 (per warp: 256)
MAX_REGISTERS_PER_THREAD = 255
STATIC_SHARED_PER_BLOCK = 48 * 1024


def tile_threads(mangled: str) -> int | None:
    """Block size bound of a ckc_tile_rows_kernel<KIND, G, MODE, ACT> instance: 512 for the
    stochastic mode (1) or an activation, else 1024."""
    name, args = gpu_model.template_args(mangled)
    if name != "ckc_tile_rows_kernel":
        return None
    return 512 if args[2] == 1 or args[3] != 0 else 1024


def build_archs() -> list[str]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "CUDA_ARCHS":
            return node.value.value.split(";")
    raise AssertionError("CUDA_ARCHS not found in setup.py")


def checked_archs() -> list[str]:
    """The targets to check: the build's own (COMFY_KITCHEN_C_CUDA_ARCHS), else all of setup.py's."""
    own = [a.strip() for a in os.environ.get("COMFY_KITCHEN_C_CUDA_ARCHS", "").split(";") if a.strip() != "all"
           and a.strip()]
    return own or build_archs()


def compile_kernels(source: Path) -> dict[str, Path]:
    """{arch: the cached cubin} of one kernel source for every target checked."""
    archs = checked_archs()
    jobs = [(source, a) for a in archs]
    return {a: gpu_model.compile_object(ROOT, s, a) for (s, a) in jobs}


def resource_usage(source: Path) -> list[dict]:
    rows, current = [], None
    text = "\n".join((obj.parent / "ptxas.txt").read_text() for obj in compile_kernels(source).values())
    for line in text.splitlines():
        entry = re.search(r"Compiling entry function '(\w+)' for '(sm_\d+)'", line)
        if entry:
            name, _ = gpu_model.template_args(entry.group(1))
            current = {"kernel": name, "arch": entry.group(2), "mangled": entry.group(1)}
            rows.append(current)
        elif current is not None and "spill stores" in line:
            current["spills"] = [int(v) for v in re.findall(r"(\d+) bytes spill", line)]
            current["stack"] = int(re.search(r"(\d+) bytes stack frame", line).group(1))
        elif current is not None and line.strip().startswith("ptxas info") and "Used" in line:
            current["registers"] = int(re.search(r"Used (\d+) registers", line).group(1))
            smem = re.search(r"(\d+) bytes smem", line)
            current["smem"] = int(smem.group(1)) if smem else 0
    return rows


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.parametrize("source", sorted((ROOT / "kernels").glob("*.cu")), ids=lambda p: p.name)
def test_kernels_fit_every_target(source):
    rows = resource_usage(source)
    assert rows, "ptxas reported no kernels"
    archs = {f"sm_{a}" for a in checked_archs()}
    assert {r["arch"] for r in rows} == archs
    for r in rows:
        where = f"{r['kernel']} on {r['arch']}"
        assert r["kernel"] in BLOCK_THREADS, f"{where}: unknown kernel, add its block size to BLOCK_THREADS"
        if r["kernel"] not in gpu_model.KNOWN_SPILLS:  # each listed there with why (issue 22)
            assert r["spills"] == [0, 0], f"{where}: spills {r['spills']} bytes"
            assert r["stack"] == 0, f"{where}: {r['stack']} bytes stack frame (local memory)"
        threads = tile_threads(r["mangled"]) or BLOCK_THREADS[r["kernel"]]
        regs = -(-r["registers"] // REGISTER_GRANULE) * REGISTER_GRANULE
        assert r["registers"] <= MAX_REGISTERS_PER_THREAD, where
        assert regs * threads <= REGISTERS_PER_SM, f"{where}: {r['registers']} registers x {threads} threads"
        assert r["smem"] <= STATIC_SHARED_PER_BLOCK, f"{where}: {r['smem']} bytes of shared memory"


CUOBJDUMP = gpu_model.find_cuobjdump()


def access_width(instruction: str) -> str:
    """The width of a global or local memory instruction (STG.E.U8 -> "8", STG.E.128 -> "128")."""
    parts = instruction.split(".")[1:]
    for bits in ("U8", "S8", "U16", "S16", "64", "128"):
        if bits in parts:
            return bits.lstrip("US")
    return "32"


def machine_code(source: Path) -> dict[tuple[str, str], list[str]]:
    """{(mangled kernel name, arch): its lines of machine code (cuobjdump -sass)}, one entry per
    template instance."""
    functions = {}
    for arch, obj in compile_kernels(source).items():
        for name, lines in gpu_model._functions((obj.parent / "sass.txt").read_text()).items():
            functions[(name, f"sm_{arch}")] = lines
    return functions


def kernel_name(symbol: str) -> str:
    """The template's name of a kernel instance's symbol (gpu_model.template_args)."""
    return gpu_model.template_args(symbol)[0]


def memory_accesses(source: Path) -> dict[tuple[str, str], Counter]:
    """{(kernel, arch): Counter of "LDG 128", "STG 8", "STL 32", ...}: the memory instructions in
    each kernel's machine code (static counts, the instances of a template summed, scalar
    fallback paths included)."""
    counts = {}
    for (mangled, arch), lines in machine_code(source).items():
        c = counts.setdefault((kernel_name(mangled), arch), Counter())
        for line in lines:
            if m := re.search(r"\*/\s+(?:@!?U?P\w+\s+)?((LDG|STG|LDL|STL)[A-Z0-9_.]*)", line):
                c[f"{m.group(2)} {access_width(m.group(1))}"] += 1
    return counts


# The widest access each kernel's chunk of values must use where alignment allows:
# 16 codes / values per thread in one or two 16-byte accesses, 8 bytes of packed FP4.
VECTOR_ACCESSES = {
    "int8_rowwise_kernel": ["LDG 128", "STG 128"], "hadamard_rows_kernel": ["LDG 128", "STG 128"],
    "int8_dequant_rotated_kernel": ["LDG 128", "STG 128"], "int8_dequant_kernel": ["LDG 128", "STG 128"],
    "nvfp4_quant_kernel": ["LDG 128", "STG 64"], "nvfp4_dequant_kernel": ["LDG 64", "STG 128"],
    "ckc_tile_rows_kernel": ["LDG 128", "STG 128"], "ckc_tile_dequant_kernel": ["LDG 128", "STG 128"],
    "nvfp4_quant_rows_kernel": ["LDG 128", "STG 64"], "nvfp4_dequant_rows_kernel": ["LDG 128", "STG 128"],
    # 16 codes: 8 bytes of nibbles (and 4 of the 6-bit plane), 16 int8 or 16-bit values stored
    "w4a8_dequant_kernel": ["LDG 64", "STG 128"],
    # 16 codes per lane and step: 8 bytes of nibbles, the rows' 16 activation codes
    "w4a8_gemv_kernel": ["LDG 64", "LDG 128"],
}


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump not found (nor triton's copy)")
@pytest.mark.parametrize("source", sorted((ROOT / "kernels").glob("*.cu")), ids=lambda p: p.name)
def test_machine_code_accesses(source):
    """No local memory in any kernel, and the chunk kernels' vector loads and stores are there."""
    counts = memory_accesses(source)
    assert {arch for _, arch in counts} == {f"sm_{a}" for a in checked_archs()}
    for (kernel, arch), c in counts.items():
        local = {k: v for k, v in c.items() if k.startswith(("LDL", "STL"))}
        if gpu_model.template_args(kernel)[0] not in gpu_model.KNOWN_SPILLS:  # listed with why (issue 22)
            assert not local, f"{kernel} on {arch}: local memory {local}"
        for access in VECTOR_ACCESSES.get(kernel, []):
            assert c[access], f"{kernel} on {arch}: no {access}-bit access in {dict(c)}"


@pytest.mark.skipif(NVCC is None, reason="nvcc not found")
@pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump not found (nor triton's copy)")
def test_row_kernels_issue_a_segments_loads_before_rotating():
    """A row kernel thread loads up to four chunks of 16 values; issued one chunk at a time
    (each rotated before the next is loaded) a thread has only 32 bytes in flight, too little
    to cover DRAM latency at the row kernels' occupancy (kernels/row_tile.cuh,
    ckc_rotated_segment).  In every instance of the two row kernels, the 16-byte loads of all
    its chunks come before the first warp shuffle."""
    seen = 0
    for (symbol, arch), lines in machine_code(ROOT / "kernels" / "int8.cu").items():
        name, args = gpu_model.template_args(symbol)
        if name not in ("int8_rowwise_kernel", "hadamard_rows_kernel"):
            continue
        kind, chunks = args[0], args[1]
        wanted = chunks * (4 if kind == 0 else 2)  # 16 floats: four 16-byte loads; 16-bit values: two
        first_shuffle = next(i for i, line in enumerate(lines) if "SHFL" in line)
        early = sum("LDG.E.128" in line for line in lines[:first_shuffle])
        assert early >= wanted, f"{name} (kind {kind}, {chunks} chunks) on {arch}: {early} of {wanted} loads " \
                                "before the first shuffle"
        seen += 1
    assert seen >= 2 * 3 * 3 * len(checked_archs()), f"only {seen} row kernel instances found"


def resource_table() -> str:
    """The build's kernel resources as a Markdown table: registers per thread for each
    target, static shared memory, stack frame and spills (the figures the test above checks),
    each the largest over a template's instances."""
    archs = [f"sm_{a}" for a in checked_archs()]
    usage = {}
    for source in sorted((ROOT / "kernels").glob("*.cu")):
        for r in resource_usage(source):
            per_arch = usage.setdefault((source.name, r["kernel"]), {})
            seen = per_arch.setdefault(r["arch"], {"registers": 0, "smem": 0, "stack": 0, "spills": [0, 0]})
            for key in ("registers", "smem", "stack"):
                seen[key] = max(seen[key], r[key])
            seen["spills"] = [max(a, b) for a, b in zip(seen["spills"], r["spills"])]
    lines = ["| file | kernel | threads/block | registers " + " / ".join(archs) +
             " | smem bytes | stack frame bytes | spills |",
             "|---|---|---:|---|---:|---:|---|"]
    for (name, kernel), per_arch in usage.items():
        regs = " / ".join(str(per_arch[a]["registers"]) for a in archs)
        smem = max(r["smem"] for r in per_arch.values())
        stack = max(r["stack"] for r in per_arch.values())
        spills = "none" if all(r["spills"] == [0, 0] for r in per_arch.values()) else "YES"
        lines.append(f"| {name} | {kernel} | {BLOCK_THREADS.get(kernel, '?')} | {regs} | {smem} | {stack} | {spills} |")
    return "\n".join(lines)


def access_table(arch: str = "sm_90") -> str:
    """Global loads and stores by width in bits, and local memory instructions, per kernel on
    one target, as a Markdown table."""
    columns = [f"{op} {w}" for op in ("LDG", "STG") for w in ("8", "16", "32", "64", "128")] + ["LDL/STL"]
    lines = ["| file | kernel | " + " | ".join(columns) + " |", "|---|---|" + "---:|" * len(columns)]
    for source in sorted((ROOT / "kernels").glob("*.cu")):
        for (kernel, a), c in memory_accesses(source).items():
            if a == arch:
                local = sum(v for k, v in c.items() if k.startswith(("LDL", "STL")))
                cells = [str(c[col]) for col in columns[:-1]] + [str(local)]
                lines.append(f"| {source.name} | {kernel} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    # python tests/test_kernel_resources.py > benchmarks/results/kernel_resources.md
    print(f"Kernel resources from ptxas (nvcc, targets {', '.join(checked_archs())}), the largest over each "
          "kernel's template instances.  Static shared memory only: the row kernels take 16 KB of dynamic "
          "shared memory more when they rotate by G = 1024.\n")
    print(resource_table())
    if CUOBJDUMP is not None:
        print("\nGlobal memory instructions by width in bits, and local memory instructions, in each "
              "kernel's sm_90 machine code (cuobjdump -sass): static counts, the instances of a template "
              "summed, the scalar fallbacks for unaligned rows included.\n")
        print(access_table())
