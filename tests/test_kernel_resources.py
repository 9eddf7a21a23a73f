"""Every CUDA kernel fits every architecture we build for: ptxas reports no
register spills, and each kernel's launch configuration fits the registers and
static shared memory of an SM on each target.  Needs nvcc (not a GPU)."""
import ast
import re
import subprocess
from pathlib import Path

import pytest

from conftest import NVCC

ROOT = Path(__file__).resolve().parent.parent

# Threads per block of each kernel's launches (kernels/int8.cu, kernels/nvfp4.cu):
# CKC_ROW_THREADS = 256 for the row and elementwise kernels, CKC_NVFP4_THREADS = 128.
BLOCK_THREADS = {
    "int8_rowwise_kernel": 256, "hadamard_rows_kernel": 256, "int8_dequant_kernel": 256,
    "int8_dequant_rotated_kernel": 256, "tensor_absmax_kernel": 256, "tensor_quantize_kernel": 256,
    "tensor_scale_kernel": 1, "nvfp4_quant_kernel": 128, "nvfp4_dequant_kernel": 128,
    # kernels/linear.cu: CKC_GEMV_WARPS = 8 warps, the epilogue CKC_ROW_THREADS
    "int8_gemv_kernel": 256, "linear_epilogue_kernel": 256,
    "flight_mark_kernel": 1,  # kernels/flight.cu: the flight record's completion mark
}
REGISTERS_PER_SM = 65536          # every target from sm_75 to sm_120
REGISTER_GRANULE = 8              # registers are allocated per thread in multiples of 8 (per warp: 256)
MAX_REGISTERS_PER_THREAD = 255
STATIC_SHARED_PER_BLOCK = 48 * 1024


def build_archs() -> list[str]:
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "CUDA_ARCHS":
            return node.value.value.split(";")
    raise AssertionError("CUDA_ARCHS not found in setup.py")


def resource_usage(source: Path) -> list[dict]:
    gencode = [f"-gencode=arch=compute_{a},code=sm_{a}" for a in build_archs()]
    out = subprocess.run(
        [NVCC, "-std=c++17", "-O3", "--fmad=false", "-c", str(source), "-o", "/dev/null", "--resource-usage",
         f"-I{ROOT / 'csrc'}", f"-I{ROOT / 'kernels'}", "-DCKC_WITH_GPU=1", "-DCKC_WITH_CUDA=1", *gencode],
        capture_output=True, text=True, check=True)
    rows, current = [], None
    for line in (out.stdout + out.stderr).splitlines():
        entry = re.search(r"Compiling entry function '_Z(\d+)(\w+)' for '(sm_\d+)'", line)
        if entry:
            name = entry.group(2)[: int(entry.group(1))]
            current = {"kernel": name, "arch": entry.group(3)}
            rows.append(current)
        elif current is not None and "spill stores" in line:
            current["spills"] = [int(v) for v in re.findall(r"(\d+) bytes spill", line)]
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
    archs = {f"sm_{a}" for a in build_archs()}
    assert {r["arch"] for r in rows} == archs
    for r in rows:
        where = f"{r['kernel']} on {r['arch']}"
        assert r["kernel"] in BLOCK_THREADS, f"{where}: unknown kernel, add its block size to BLOCK_THREADS"
        assert r["spills"] == [0, 0], f"{where}: spills {r['spills']} bytes"
        threads = BLOCK_THREADS[r["kernel"]]
        regs = -(-r["registers"] // REGISTER_GRANULE) * REGISTER_GRANULE
        assert r["registers"] <= MAX_REGISTERS_PER_THREAD, where
        assert regs * threads <= REGISTERS_PER_SM, f"{where}: {r['registers']} registers x {threads} threads"
        assert r["smem"] <= STATIC_SHARED_PER_BLOCK, f"{where}: {r['smem']} bytes of shared memory"


def resource_table() -> str:
    """The build's kernel resources as a Markdown table: registers per thread for each
    target, static shared memory, spills (the figures the test above checks)."""
    archs = [f"sm_{a}" for a in build_archs()]
    usage = {}
    for source in sorted((ROOT / "kernels").glob("*.cu")):
        for r in resource_usage(source):
            usage.setdefault((source.name, r["kernel"]), {})[r["arch"]] = r
    lines = ["| file | kernel | threads/block | registers " + " / ".join(archs) + " | smem bytes | spills |",
             "|---|---|---:|---|---:|---|"]
    for (name, kernel), per_arch in usage.items():
        regs = " / ".join(str(per_arch[a]["registers"]) for a in archs)
        smem = max(r["smem"] for r in per_arch.values())
        spills = "none" if all(r["spills"] == [0, 0] for r in per_arch.values()) else "YES"
        lines.append(f"| {name} | {kernel} | {BLOCK_THREADS.get(kernel, '?')} | {regs} | {smem} | {spills} |")
    return "\n".join(lines)


if __name__ == "__main__":
    # python tests/test_kernel_resources.py > benchmarks/results/kernel_resources.md
    print(f"Kernel resources from ptxas (nvcc, targets {', '.join(build_archs())}).\n")
    print(resource_table())
