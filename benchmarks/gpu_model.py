# SPDX-License-Identifier: Apache-2.0
"""Performance model of the GPU kernels that needs no GPU.

It compiles kernels/*.cu (of the working tree, or of any commit) for sm_90 and sm_120 with
the build's flags, reads each kernel's machine code (cuobjdump -sass; triton ships one) and
resources, follows the hot path a thread takes (benchmarks/sass_paths.py) and counts, per
element: instructions by pipe, shuffles, conversions, global and local memory accesses; it
reads registers and the occupancy they allow, the bytes a thread has in flight before it
first uses a loaded value, and whether all its loads are issued before that use.  From
these it predicts an op's GPU time for a shape as

    launch floor + max(bytes / bandwidth, warp instructions / issue rate,
                       instructions of each pipe / its rate, load rounds x DRAM latency)

where the bandwidth is the lower of the device copy's and what the bytes in flight sustain
(Little's law: bytes in flight per SM x SMs / DRAM latency).  Every constant is in GPUS
below with its source.

    python3 benchmarks/gpu_model.py                 # predictions table and per-kernel metrics
    python3 benchmarks/gpu_model.py --commit 8a578f0 --measured benchmarks/results/nvidia-h200-8a578f0.md
    python3 benchmarks/gpu_model.py --commit 1cdf9a7 --measured benchmarks/results/nvidia-h200.md
    predict_ms("quantize_and_rotate_rowwise", 4096, 14336)       # from Python (gpu_check.py)

Compiled objects and their listings are cached under build/gpu_model/, keyed by the
sources' contents, the flags and the compiler, so a second run takes seconds."""
import argparse
import concurrent.futures
import functools
import hashlib
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sass_paths  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("CKC_GPU_MODEL_CACHE") or ROOT / "build" / "gpu_model")
MODEL_ARCHS = ("90", "120")
# The flags of setup.py's _nvcc (no FMA contraction, IEEE division), without -lineinfo.
NVCC_FLAGS = ["-std=c++17", "-O3", "--fmad=false", "-DCKC_WITH_GPU=1", "-DCKC_WITH_CUDA=1"]


@dataclass(frozen=True)
class Gpu:
    name: str
    arch: str
    sms: int
    clock_ghz: float
    dram_gb_s: float        # datasheet bandwidth
    copy_gb_s: float        # what a device-to-device copy reaches (read + written bytes)
    latency_ns: float       # DRAM latency under load, for Little's law
    max_threads: int        # per SM
    max_blocks: int         # per SM
    smem_bytes: int         # shared memory per SM usable by blocks
    # warp instructions per clock per SM: issue (all), and each pipe
    pipes: tuple = ()
    launch_us: float = 2.0
    # a riding completion mark's cost per wave of its kernel's grid (kernels/done_mark.cuh: every
    # block's release fence holds it until its stores land)
    mark_us_per_wave: float = 0.75
    sources: tuple = ()


GPUS = {
    "h200": Gpu(
        name="NVIDIA H200 SXM", arch="90", sms=132, clock_ghz=1.98, dram_gb_s=4800.0, copy_gb_s=4300.0,
        latency_ns=800.0, max_threads=2048, max_blocks=32, smem_bytes=228 * 1024,
        pipes=(("issue", 4.0), ("fma", 4.0), ("alu", 2.0), ("conversion", 0.5), ("shuffle", 1.0),
               ("memory", 1.0)),
        sources=(
            "SMs 132 and SM clock 1980 MHz under load: /work/.library/device/KINDS.md (PyTorch and nvidia-smi "
            "on the H200 machines, 2026-10-28) and benchmarks/results/nvidia-h200.md",
            "DRAM 4.8 TB/s: NVIDIA H200 datasheet (/work/.library/device/H200.md)",
            "copy 4.3 TB/s (bytes read + written): device-to-device copy through PyTorch, KINDS.md",
            "DRAM latency 800 ns: issue 11's figure for covering latency at full bandwidth",
            "2048 threads, 32 blocks, 64K registers (256 per warp granule), 228 KB shared memory per SM: "
            "CUDA C++ Programming Guide, compute capability 9.0",
            "pipes per SM per clock: 4 schedulers issuing 1 warp instruction each; 128 FP32 lanes (FADD, FMUL, "
            "FFMA, IMAD, FMNMX) = 4 warp instructions; 64 INT32 lanes (LOP3, IADD3, SHF, PRMT, ISETP, SEL) = 2: "
            "NVIDIA H100 Tensor Core GPU Architecture whitepaper; conversions 16 lanes = 0.5, warp shuffle "
            "32 lanes = 1: Programming Guide, throughput of native arithmetic instructions; load/store 32 "
            "lanes = 1 (whitepaper: 32 LD/ST units per SM)",
            "launch floor 2 us per kernel: assumed (the GPU-side cost of one small kernel queued behind "
            "others), to be calibrated by gpu_check.py's GPU times per call",
            "riding completion mark 0.75 us per wave of the grid: fitted on the H200 run at 1cdf9a7 (flight "
            "record on minus off at M = 4096 over the last kernel's waves: 0.53-1.18 us for the 24 row and "
            "tile rows whose kernels are not store-bound; 0.12-0.39 us where they are); a separate mark: "
            "one launch floor",
        )),
    "rtx5070ti": Gpu(
        name="NVIDIA GeForce RTX 5070 Ti", arch="120", sms=70, clock_ghz=2.452, dram_gb_s=896.0,
        copy_gb_s=896.0 * 4300.0 / 4800.0, latency_ns=800.0, max_threads=1536, max_blocks=32,
        smem_bytes=100 * 1024,
        pipes=(("issue", 4.0), ("fma", 4.0), ("alu", 4.0), ("conversion", 0.5), ("shuffle", 1.0),
               ("memory", 1.0)),
        sources=(
            "70 SMs (8960 CUDA cores / 128), boost clock 2452 MHz, 896 GB/s (28 Gbps GDDR7, 256-bit): NVIDIA's "
            "GeForce RTX 5070 Ti specifications",
            "copy bandwidth: not measured; taken as the H200's copy/datasheet ratio (4.3/4.8) of 896 GB/s",
            "DRAM latency 800 ns: issue 11's figure (same as the H200's)",
            "1536 threads, 32 blocks, 64K registers, 100 KB shared memory per SM: CUDA C++ Programming "
            "Guide, compute capability 12.0",
            "pipes: as the H200's, except INT32 at 128 lanes (every Blackwell CUDA core runs FP32 or INT32: "
            "NVIDIA RTX Blackwell GPU architecture whitepaper)",
            "launch floor 2 us: assumed, as for the H200",
            "riding completion mark 0.75 us per wave: the H200's, not measured here",
        )),
}
GPU_ALIASES = {"5070ti": "rtx5070ti", "rtx_5070_ti": "rtx5070ti"}
REGISTERS_PER_SM = 65536
REGISTER_GRANULE = 8      # registers per thread are allocated in multiples of 8 (256 per warp)
RESERVED_SMEM = 1024      # per block, sm_80 and later
L1_BYTES = 256 * 1024     # L1 + shared memory per SM, at most (Hopper whitepaper; 128 KB on sm_120)


# ---------------------------------------------------------------- building and reading the code

def find_nvcc() -> str | None:
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    candidates = [home and os.path.join(home, "bin", "nvcc"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]
    return next((c for c in candidates if c and Path(c).is_file()), None)


def find_cuobjdump() -> str | None:
    """cuobjdump from PATH, beside nvcc, or in triton's package (which ships one)."""
    nvcc = find_nvcc()
    candidates = [shutil.which("cuobjdump"), nvcc and str(Path(nvcc).parent / "cuobjdump")]
    triton = importlib.util.find_spec("triton")
    if triton is not None and triton.submodule_search_locations:
        candidates.append(str(Path(triton.submodule_search_locations[0]) / "backends/nvidia/bin/cuobjdump"))
    return next((c for c in candidates if c and Path(c).is_file()), None)


def tree_at(commit: str | None) -> Path:
    """The source tree: the working tree (commit None) or kernels/ and csrc/ of a commit."""
    if commit is None:
        return ROOT
    sha = subprocess.run(["git", "rev-parse", commit], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    tree = CACHE / f"tree-{sha[:12]}"
    if not (tree / "kernels").is_dir():
        data = subprocess.run(["git", "archive", sha, "kernels", "csrc"], cwd=ROOT, capture_output=True,
                              check=True).stdout
        tree.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(tree)
    return tree


@functools.lru_cache(maxsize=None)
def compiler_version(nvcc: str) -> str:
    return subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]


def source_key(tree: Path, source: Path, arch: str, nvcc: str) -> str:
    """Hash of everything an object depends on: every header and source under kernels/ and
    csrc/, the flags, the target and the compiler."""
    h = hashlib.sha256()
    for folder in ("kernels", "csrc"):
        for p in sorted((tree / folder).rglob("*")):
            if p.suffix in (".h", ".cuh", ".cu", ".hpp") and p.is_file():
                h.update(str(p.relative_to(tree)).encode())
                h.update(p.read_bytes())
    h.update(" ".join(NVCC_FLAGS + [source.name, arch, compiler_version(nvcc)]).encode())
    return h.hexdigest()[:20]


def compile_object(tree: Path, source: Path, arch: str) -> Path:
    """Device code (cubin) of one kernel source for one target, with its ptxas report
    (ptxas.txt) and its machine code listing (sass.txt) beside it; cached by source_key."""
    nvcc, cuobjdump = find_nvcc(), find_cuobjdump()
    if nvcc is None or cuobjdump is None:
        raise RuntimeError("needs nvcc and cuobjdump")
    folder = CACHE / "objects" / f"{source.stem}-sm{arch}-{source_key(tree, source, arch, nvcc)}"
    obj = folder / (source.name + ".cubin")
    if (folder / "done").exists():
        os.utime(folder)  # recently used: kept by prune
        return obj
    folder.mkdir(parents=True, exist_ok=True)
    # device code only (-cubin): the host compiler has nothing to do for a listing
    cmd = [nvcc, *NVCC_FLAGS, "-cubin", str(source), "-o", str(obj), "--resource-usage", f"-I{tree / 'csrc'}",
           f"-I{tree / 'kernels'}", f"-arch=sm_{arch}"]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}\n{out.stderr[-4000:]}")
    (folder / "ptxas.txt").write_text(out.stdout + out.stderr)
    sass = subprocess.run([cuobjdump, "-sass", str(obj)], capture_output=True, text=True, check=True).stdout
    (folder / "sass.txt").write_text(sass)
    (folder / "done").write_text("")
    prune(folder)
    return obj


CACHE_VERSIONS = 8  # compiled versions kept per source and target (old commits, recent edits)


def prune(folder: Path) -> None:
    """Drops all but the CACHE_VERSIONS newest cached compilations of the folder's source and target."""
    prefix = folder.name.rsplit("-", 1)[0] + "-"
    siblings = sorted((p for p in folder.parent.iterdir() if p.name.startswith(prefix) and p.is_dir()),
                      key=lambda p: p.stat().st_mtime, reverse=True)
    for old in siblings[CACHE_VERSIONS:]:
        shutil.rmtree(old, ignore_errors=True)


@dataclass
class Kernel:
    mangled: str
    name: str
    args: tuple
    arch: str
    source: str
    instrs: list
    registers: int = 0
    smem: int = 0
    stack: int = 0
    spills: tuple = (0, 0)


def template_args(mangled: str) -> tuple[str, tuple]:
    """(name, template arguments as ints) of a kernel's symbol: the extern "C" name of an
    instance (csrc/gpu/kernel_list.h), int8_rowwise_kernel__2_4_0 -> ("int8_rowwise_kernel",
    (2, 4, 0)), or, in commits before the driver API, the C++ mangled name,
    _Z19int8_rowwise_kernelIL14ckc_float_kind2ELi4ELi0EEv... -> the same."""
    if not mangled.startswith("_Z"):
        name, _, args = mangled.partition("__")
        return name, tuple(int(a) for a in args.split("_")) if args else ()
    m = re.match(r"_Z(\d+)", mangled)
    n = int(m.group(1))
    name = mangled[m.end():m.end() + n]
    rest = mangled[m.end() + n:]
    args = []
    if rest.startswith("I"):
        for lit in re.finditer(r"L(?:\d+[A-Za-z_]\w*?|[a-z])(n?\d+)E", rest[:rest.find("EE") + 2]):
            v = lit.group(1)
            args.append(-int(v[1:]) if v.startswith("n") else int(v))
    return name, tuple(args)


def _ptxas_resources(text: str) -> dict:
    rows, current = {}, None
    for line in text.splitlines():
        entry = re.search(r"Compiling entry function '(\w+)' for 'sm_(\d+)'", line)
        if entry:
            current = rows.setdefault(entry.group(1), {})
        elif current is not None and "spill stores" in line:
            current["spills"] = tuple(int(v) for v in re.findall(r"(\d+) bytes spill", line))
            current["stack"] = int(re.search(r"(\d+) bytes stack frame", line).group(1))
        elif current is not None and "Used" in line and "registers" in line:
            current["registers"] = int(re.search(r"Used (\d+) registers", line).group(1))
            smem = re.search(r"(\d+) bytes smem", line)
            current["smem"] = int(smem.group(1)) if smem else 0
    return rows


def _functions(sass: str) -> dict[str, list[str]]:
    functions, current = {}, None
    for line in sass.splitlines():
        if m := re.search(r"Function : (\w+)", line):
            current = functions.setdefault(m.group(1), [])
        elif current is not None:
            current.append(line)
    return functions


@functools.lru_cache(maxsize=None)
def kernels(commit: str | None = None, archs: tuple = MODEL_ARCHS) -> dict[tuple[str, str], Kernel]:
    """{(mangled name, arch): Kernel} for every kernel of kernels/*.cu."""
    tree = tree_at(commit)
    return kernels_of(tree, sorted((tree / "kernels").glob("*.cu")), archs)


def kernels_of(tree: Path, sources: list, archs: tuple) -> dict[tuple[str, str], Kernel]:
    """{(mangled name, arch): Kernel} of the given sources (compiled in parallel, cached)."""
    jobs = [(s, a) for s in sources for a in archs]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, min(len(jobs), os.cpu_count() or 1))) as pool:
        objects = list(pool.map(lambda j: compile_object(tree, *j), jobs))
    result = {}
    for (source, arch), obj in zip(jobs, objects):
        resources = _ptxas_resources((obj.parent / "ptxas.txt").read_text())
        for mangled, lines in _functions((obj.parent / "sass.txt").read_text()).items():
            name, args = template_args(mangled)
            r = resources.get(mangled, {})
            result[(mangled, arch)] = Kernel(mangled, name, args, arch, source.name, sass_paths.parse(lines),
                                             r.get("registers", 0), r.get("smem", 0), r.get("stack", 0),
                                             r.get("spills", (0, 0)))
    return result


def find_kernel(ks: dict, arch: str, name: str, args: tuple | None = None) -> Kernel | None:
    """The kernel of that name (and template arguments, a prefix of them; a kernel that is no
    template, as some were before, takes its element type at run time) on arch."""
    for k in ks.values():
        if k.arch == arch and k.name == name and (args is None or not k.args or k.args[:len(args)] == tuple(args)):
            return k
    return None


# ---------------------------------------------------------------- ops, shapes and launches

DTYPES = {"float32": (0, 4), "float16": (1, 2), "bfloat16": (2, 2)}   # name -> (ckc_float_kind, bytes)
OPS = ("quantize_int8_rowwise", "quantize_and_rotate_rowwise", "quantize_int8_convrot_weight",
       "rotate_int8_convrot_weight", "dequantize_int8_simple", "dequantize_int8_convrot_weight",
       "quantize_nvfp4", "dequantize_nvfp4", "quantize_and_rotate_nvfp4", "int8_linear_quantize",
       "int8_linear_epilogue")
ROTATED = {"quantize_and_rotate_rowwise", "quantize_int8_convrot_weight", "rotate_int8_convrot_weight",
           "dequantize_int8_convrot_weight", "quantize_and_rotate_nvfp4"}


@dataclass
class Launch:
    """One kernel launch of an op: which instance, its grid, and what a thread handles."""
    name: str
    args: tuple
    threads: int            # per block
    blocks: int
    elements: float         # elements a thread handles (the path's loops are weighted by it)
    in_bytes: float         # bytes read per element (for the loop weights)
    out_bytes: float        # bytes written per element
    rotated: bool = False   # the hot path is the one through the rotation's shuffles
    smem_dynamic: int = 0
    load_bytes: int | None = None   # wide-load bytes on the hot path (loops once); None: the most
    bytes: float | None = None      # DRAM bytes of this launch (None: all of its plan's)


@dataclass
class Plan:
    op: str
    bytes: float            # DRAM bytes the op moves (read + written)
    launches: list = field(default_factory=list)


def op_bytes(op: str, m: int, k: int, esize: int, n: int | None) -> float:
    """Bytes an op moves: tensors read plus tensors written (esize: the float tensor's element)."""
    mk = m * k
    if op in ("quantize_int8_rowwise", "quantize_and_rotate_rowwise", "quantize_int8_convrot_weight",
              "int8_linear_quantize"):
        return mk * esize + mk + 4 * m
    if op == "rotate_int8_convrot_weight":
        return 2 * mk * esize
    if op in ("dequantize_int8_simple", "dequantize_int8_convrot_weight"):
        return mk + 4 * m + mk * esize
    if op in ("quantize_nvfp4", "quantize_and_rotate_nvfp4"):
        return mk * esize + mk / 2 + mk / 16
    if op == "dequantize_nvfp4":
        return mk / 2 + mk / 16 + mk * esize
    if op == "int8_linear_epilogue":
        return m * n * 4 + m * n * 2 + 4 * m + 4 * n + 2 * n
    if op == "quantize_int8_tensorwise":
        return 2 * mk * esize + mk  # x read twice (absmax, then codes)
    if op == "int8_gemv":
        return n * k + m * k + 2 * m * n  # the weight once, the rows' codes, the outputs
    if op == "w4a8_gemv":  # 4-bit codes and an e4m3 scale per 16 values, once; the rows' codes, the outputs
        return n * k / 2 + n * k / 16 + m * k + 2 * m * n
    if op == "w4a8_decode":  # m weight rows: 4-bit codes and e4m3 scales (groups of 16) in, the int8 grid out
        return mk / 2 + mk / 16 + mk
    raise KeyError(op)


def _v1_chunks(k: int, most: int) -> int:
    needed = -(-k // 4096)
    return 1 if needed <= 1 else (2 if needed <= 2 else most)


def plan_v1(op: str, m: int, k: int, kind: int, esize: int, group: int, n: int | None, ks: dict, arch: str,
            commit: str | None = None) -> Plan:
    """Launches of the kernels up to this redesign (8a578f0 .. f34a4f9): one 256-thread block per
    row, chunks of 16 values per thread; elementwise dequantization; one thread per NVFP4 block."""
    plan = Plan(op, op_bytes(op, m, k, esize, n))
    rotated = op in ROTATED
    if op in ("quantize_int8_rowwise", "quantize_and_rotate_rowwise", "quantize_int8_convrot_weight",
              "int8_linear_quantize", "rotate_int8_convrot_weight"):
        name = "hadamard_rows_kernel" if op == "rotate_int8_convrot_weight" else "int8_rowwise_kernel"
        most = 2 if (kind == 1 and name == "int8_rowwise_kernel"
                     and find_kernel(ks, arch, name, (1, 4)) is None) else 4
        chunks = _v1_chunks(k, most)
        segments = -(-k // (4096 * chunks))
        out = esize if name == "hadamard_rows_kernel" else 1
        plan.launches.append(Launch(name, (kind, chunks), 256, m, 16 * chunks * segments, esize, out, rotated,
                                    load_bytes=16 * chunks * esize))
    elif op in ("dequantize_int8_simple", "dequantize_int8_convrot_weight"):
        if rotated:
            plan.launches.append(Launch("int8_dequant_rotated_kernel", (kind,), 256, m, -(-k // 256), 1, esize,
                                        True, load_bytes=16))
        else:
            # gpu_check's per-row scale: the warp walk where the build has it (after 1cdf9a7), else 16
            # values per thread where the kernel took a `bool chunks` (its C++ name says so, before the
            # driver API's plain names), else one
            walk = find_kernel(ks, arch, "int8_dequant_walk_kernel", (kind, 1)) is not None
            chunked = walk or any(kk.name == "int8_dequant_kernel" and "paramsb" in kk.mangled
                                  for kk in ks.values())
            per = 16 if chunked else 1
            blocks = min(-(-m * k // (per * 256)), 65536)
            if walk:
                plan.launches.append(Launch("int8_dequant_walk_kernel", (kind, 1), 256, blocks,
                                            m * k / (blocks * 256), 1, esize, load_bytes=0))
            else:
                plan.launches.append(Launch("int8_dequant_kernel", (kind,), 256, blocks, m * k / (blocks * 256), 1,
                                            esize, load_bytes=16 if chunked else 0))
    elif op in ("quantize_nvfp4", "quantize_and_rotate_nvfp4"):
        blocks16 = -(-m // 128) * 128 * (-(-k // 64) * 4)
        plan.launches.append(Launch("nvfp4_quant_kernel", (kind,), 128, -(-blocks16 // 128), 16, esize, 0.5625,
                                    rotated, load_bytes=16 * esize))
    elif op == "dequantize_nvfp4":
        plan.launches.append(Launch("nvfp4_dequant_kernel", (kind,), 128, -(-m * k // 16 // 128), 16, 0.5625,
                                    esize, load_bytes=8))
    elif op == "int8_linear_epilogue":
        rows = min(m, 65535)
        blocks = min(-(-n // 256), 64) * rows
        plan.launches.append(Launch("linear_epilogue_kernel", (), 256, blocks, m * n / (blocks * 256), 4, 2))
    return plan


# Ops whose output is float32 whatever the dtype, and their _dtype variants (output of dtype).
FLOAT32_OUT = {"dequantize_int8_simple", "dequantize_int8_convrot_weight"}


def plan_for(op: str, m: int, k: int, dtype: str, group: int, n: int | None, ks: dict, arch: str,
             commit: str | None = None) -> Plan:
    """The launches of an op at a shape with the kernels ks (of commit: None, the working tree)."""
    kind, esize = DTYPES["float32" if op in FLOAT32_OUT else dtype]
    base = op[:-len("_dtype")] if op.endswith("_dtype") else op
    if base in ("int8_linear", "w4a8_int8_linear"):
        if m > GEMV_ROWS or n is None:
            raise KeyError(f"{base}: the GEMM (cuBLASLt, on decoded parts for W4A8) is not modelled; "
                           "int8_linear_quantize and int8_linear_epilogue are its modelled parts")
        quant = plan_for("int8_linear_quantize", m, k, dtype, group, n, ks, arch, commit)
        gemv = plan_gemv(m, k, n) if base == "int8_linear" else plan_w4a8_gemv(m, k, n)
        for launch in quant.launches:
            launch.bytes = quant.bytes / len(quant.launches)
        for launch in gemv.launches:
            launch.bytes = gemv.bytes
        return Plan(op, quant.bytes + gemv.bytes, quant.launches + gemv.launches)
    if base == "quantize_int8_tensorwise":
        return plan_tensorwise(m, k, kind, esize)
    if base == "w4a8_decode":
        return plan_w4a8_decode(m, k)
    if base == "int8_linear_epilogue":
        return plan_epilogue(m, n, ks, arch)
    layout = plan_v2 if any(kk.name.startswith("ckc_tile_") for kk in ks.values()) else plan_v1
    plan = layout(base, m, k, kind, esize, group, n, ks, arch, commit)
    plan.op = op
    return plan


def plan_tensorwise(m: int, k: int, kind: int, esize: int) -> Plan:
    """kernels/int8.cu's tensor-wise path: absmax (grid-stride, 4096 blocks at most), scale (one
    thread), codes (grid-stride)."""
    n_el = m * k
    blocks = min(-(-n_el // 256), 4096)
    per = n_el / (blocks * 256)
    plan = Plan("quantize_int8_tensorwise", op_bytes("quantize_int8_tensorwise", m, k, esize, None))
    plan.launches += [Launch("tensor_absmax_kernel", (kind,), 256, blocks, per, esize, 0, load_bytes=0,
                             bytes=n_el * esize),
                      Launch("tensor_scale_kernel", (), 1, 1, 1, 4, 4, load_bytes=0, bytes=8),
                      Launch("tensor_quantize_kernel", (kind,), 256, blocks, per, esize, 1, load_bytes=0,
                             bytes=n_el * esize + n_el)]
    return plan


def plan_epilogue(m: int, n: int, ks: dict, arch: str) -> Plan:
    """kernels/linear.cu's epilogue: 8 outputs per thread and step (n a multiple of 8), 256-thread
    blocks, 1024 blocks at most, a walk over the chunk; per-channel scales and a bias read."""
    vec = 8 if n % 8 == 0 else 1
    total = m * n // vec
    blocks = max(1, min(-(-total // 256), 1024))
    plan = Plan("int8_linear_epilogue", op_bytes("int8_linear_epilogue", m, 0, 2, n))
    plan.launches.append(Launch("linear_epilogue_kernel", (vec,), 256, blocks, m * n / (blocks * 256), 4, 2))
    return plan


# Rows up to this take the GEMV: csrc/contract/linear_plan.h's CKC_LINEAR_GEMV_ROWS, read from there.
GEMV_ROWS = int(re.search(r"#define CKC_LINEAR_GEMV_ROWS (\d+)",
                          (ROOT / "csrc" / "contract" / "linear_plan.h").read_text()).group(1))


def plan_gemv(m: int, k: int, n: int) -> Plan:
    """kernels/linear.cu's GEMV for up to GEMV_ROWS rows: one warp per output column, 16 weight
    codes per lane per step, dp4a against each row's 16 codes (the weight read once for all)."""
    blocks = -(-n // 8)
    plan = Plan("int8_gemv", op_bytes("int8_gemv", m, k, 2, n))
    plan.launches.append(Launch("int8_gemv_kernel", (), 256, blocks, k / 32, 1 + m, 0, load_bytes=None))
    return plan


def plan_w4a8_decode(rows: int, k: int) -> Plan:
    """kernels/w4a8.cu's decode to the int8 grid (w4a8_dequant_kernel<3>), the modelled part of
    w4a8_linear's decoded GEMM path besides int8_linear's quantizer and epilogue (the GEMM is
    cuBLASLt's): a grid-stride walk over 16-column chunks, 256-thread blocks, 4096 at most; per
    chunk 8 bytes of nibbles and its group's e4m3 scale in, 16 bytes out.  Its DRAM bytes count the
    int8 part written and read back, which the scratch's parts (at most W4A8_DECODE_BYTES) keep in
    the L2 of GPUs with 16 MB or more: an upper bound there."""
    chunks = rows * k // 16
    blocks = max(1, min(-(-chunks // 256), 4096))
    plan = Plan("w4a8_decode", op_bytes("w4a8_decode", rows, k, 1, None))
    plan.launches.append(Launch("w4a8_dequant_kernel", (3,), 256, blocks, rows * k / (blocks * 256),
                                0.5 + 1 / 16, 1, load_bytes=None))
    return plan


def plan_w4a8_gemv(m: int, k: int, n: int) -> Plan:
    """kernels/w4a8.cu's GEMV (w4a8_linear, up to GEMV_ROWS rows, 4-bit canonical codes, groups of
    16): int8_gemv's walk with 8 bytes of codes and the group's scale per lane and step in place of
    16 weight bytes, the int8 grid made in registers."""
    blocks = -(-n // 8)
    plan = Plan("w4a8_gemv", op_bytes("w4a8_gemv", m, k, 2, n))
    plan.launches.append(Launch("w4a8_gemv_kernel", (4,), 256, blocks, k / 32, 0.5 + 1 / 16 + m, 0,
                                load_bytes=None))
    return plan


# ---------------------------------------------------------------- per-kernel metrics

def occupancy(kern: Kernel, threads: int, smem_dynamic: int, gpu: Gpu) -> int:
    """Blocks resident per SM: the least of the block, thread, register and shared memory limits."""
    warps = -(-threads // 32)
    regs_per_warp = -(-max(kern.registers, 1) // REGISTER_GRANULE) * REGISTER_GRANULE * 32
    limits = [gpu.max_blocks, gpu.max_threads // (warps * 32), REGISTERS_PER_SM // (regs_per_warp * warps)]
    smem = kern.smem + smem_dynamic
    if smem:
        limits.append(gpu.smem_bytes // (smem + RESERVED_SMEM))
    return max(0, min(limits))


def launch_metrics(launch: Launch, kern: Kernel, gpu: Gpu) -> dict:
    cost = sass_paths.path_cost(kern.instrs, launch.in_bytes, launch.out_bytes, launch.elements,
                                rotated=launch.rotated, load_bytes=launch.load_bytes)
    per_sm = occupancy(kern, launch.threads, launch.smem_dynamic, gpu)
    resident = min(per_sm, -(-launch.blocks // gpu.sms))
    return {
        "cost": cost,
        "per_element": {c: cost[c] / launch.elements for c in ("total", "fma", "alu", "conversion", "shuffle",
                                                               "memory", "control", "local")},
        "registers": kern.registers, "blocks_per_sm": per_sm, "threads_per_sm": per_sm * launch.threads,
        "in_flight_per_sm": cost["bytes_before_first_use"] * launch.threads * resident,
        "in_flight_full": cost["bytes_before_first_use"] * launch.threads * per_sm,
        "loads_first": cost["loads_before_first_use"] == cost["loads"],
        "spills": kern.spills, "stack": kern.stack,
    }


def predict_launch(launch: Launch, kern: Kernel, gpu: Gpu, bytes_: float) -> dict:
    met = launch_metrics(launch, kern, gpu)
    cost = met["cost"]
    active = min(gpu.sms, launch.blocks)
    clock = gpu.clock_ghz * 1e9
    warps = launch.blocks * -(-launch.threads // 32)
    rates = dict(gpu.pipes)
    terms = {}
    for pipe, rate in rates.items():
        count = cost["total"] if pipe == "issue" else cost[pipe]
        terms[pipe] = warps * count / (rate * active * clock)
    # Local memory (stack frames: the kernels before dd59fcd): priced as traffic at the copy's
    # bandwidth when the resident threads' frames exceed an SM's L1 (at most 256 KB on both
    # targets), an upper bound standing in for L2 traffic the model does not otherwise see.
    local_bytes = sum(n * int(key.split()[1]) / 8 for key, n in cost["accesses"].items()
                      if key.startswith(("LDL", "STL"))) * warps * 32
    if kern.stack * met["threads_per_sm"] > L1_BYTES:
        terms["local_memory"] = local_bytes / (gpu.copy_gb_s * 1e9)
    sustained = met["in_flight_per_sm"] * active / (gpu.latency_ns * 1e-9)
    bandwidth = min(gpu.copy_gb_s * 1e9, sustained) if sustained > 0 else gpu.copy_gb_s * 1e9
    terms["memory_bytes"] = bytes_ / bandwidth
    per_sm = max(met["blocks_per_sm"], 1)
    waves = -(-launch.blocks // (per_sm * gpu.sms))
    terms["latency"] = waves * max(cost["load_rounds"], 1) * gpu.latency_ns * 1e-9
    bound = max(terms, key=terms.get)
    return {"seconds": gpu.launch_us * 1e-6 + terms[bound], "bound": bound, "terms": terms, "metrics": met}


def riding_limit(commit: str | None) -> float:
    """The bytes above which an op's completion mark is a separate kernel (csrc/diag/marks.h's
    CKC_RIDING_MARK_MAX_BYTES); infinite before the limit (up to 1cdf9a7 every mark rode)."""
    found = re.search(r"#define CKC_RIDING_MARK_MAX_BYTES \(\(uint64_t\)(\d+) << (\d+)\)",
                      marks_header(commit))
    return float("inf") if found is None else float(int(found.group(1)) << int(found.group(2)))


@functools.lru_cache(maxsize=None)
def marks_header(commit: str | None) -> str:
    if commit is None:
        path = ROOT / "csrc" / "diag" / "marks.h"
        return path.read_text() if path.is_file() else ""
    shown = subprocess.run(["git", "show", f"{commit}:csrc/diag/marks.h"], cwd=ROOT, capture_output=True, text=True)
    return shown.stdout if shown.returncode == 0 else ""


def mark_seconds(plan_bytes: float, last: tuple, g: Gpu, commit: str | None) -> tuple[float, str]:
    """The op's completion mark (flight record on): riding on its last kernel, priced per wave of
    that kernel's grid, or a separate one-thread kernel (one launch floor) above the riding limit."""
    launch, _, pred = last
    if plan_bytes > riding_limit(commit):
        return g.launch_us * 1e-6, "separate"
    per_sm = max(pred["metrics"]["blocks_per_sm"], 1)
    waves = -(-launch.blocks // (per_sm * g.sms))
    return waves * g.mark_us_per_wave * 1e-6, "riding"


def predict(op: str, m: int, k: int, dtype: str = "bfloat16", gpu: str = "h200", n: int | None = None,
            group: int = 256, commit: str | None = None, marks: bool = True) -> dict | None:
    """The prediction of one op at one shape: seconds, the bound of each launch, its metrics.
    marks: with the flight record's completion mark (on by default, as ops run)."""
    g = GPUS[GPU_ALIASES.get(gpu, gpu)]
    ks = kernels(commit)
    plan = plan_for(op, m, k, dtype, group, n, ks, g.arch, commit)
    if not plan.launches:
        return None
    launches = []
    for launch in plan.launches:
        kern = find_kernel(ks, g.arch, launch.name, launch.args)
        if kern is None:
            return None
        launches.append((launch, kern, predict_launch(launch, kern, g, plan.bytes if launch.bytes is None
                                                      else launch.bytes)))
    seconds = sum(p["seconds"] for _, _, p in launches)
    mark, how = mark_seconds(plan.bytes, launches[-1], g, commit) if marks else (0.0, "off")
    return {"seconds": seconds + mark, "bytes": plan.bytes, "launches": launches, "mark": (how, mark)}


def predict_ms(op: str, m: int, k: int, dtype: str = "bfloat16", gpu: str = "h200", n: int | None = None,
               group: int = 256) -> float | None:
    """Predicted GPU time of one call in milliseconds (None: an op or shape the model does not
    cover).  gpu: "h200" or "rtx5070ti".  For gpu_check.py: it compiles nothing twice (the objects
    are cached) and returns None rather than raise when nvcc or cuobjdump is missing."""
    try:
        p = predict(op, m, k, dtype, gpu, n, group)
    except (RuntimeError, KeyError, FileNotFoundError):
        return None
    return None if p is None else p["seconds"] * 1e3


TILE = 32
TILE_GROUPS = (0, 64, 256, 1024)


def tile_geometry(cols: int, rows: int, max_threads: int) -> tuple[int, int, int] | None:
    """(threads per row, rows per block, segments) as kernels/tile.cuh's ckc_tile_geometry
    lays a launch out, or None where the tile kernels do not take the rows."""
    if cols <= 0 or cols % TILE:
        return None
    return tile_geometry_chunks(cols // TILE, rows, max_threads)


def tile_geometry_chunks(chunks: int, rows: int, max_threads: int) -> tuple[int, int, int] | None:
    """ckc_tile_geometry_chunks: rows of `chunks` threads' work each."""
    if chunks <= 0:
        return None
    t = min(chunks, max_threads)
    w = 1
    while w < 32 and t % (2 * w) == 0:
        w *= 2
    least = 32 // w
    if t * least > max_threads:
        return None
    r = least
    while r + least <= 32 and (r + least) * t <= 512 and r < rows:
        r += least
    return t, r, -(-chunks // t)


@functools.lru_cache(maxsize=None)
def plain_rows_in_one_pass(commit: str | None) -> bool:
    """Whether the tile kernels of commit take plain rows (G = 0) in one pass only (31c267e on: the
    warp walk, kernels/int8_tile.cu's ckc_tile_plain), the longer ones going to the general
    kernels: csrc/gpu/launch_tile.c's refusal of a G = 0 row of more than one segment."""
    launcher = tree_at(commit) / "csrc" / "gpu" / "launch_tile.c"
    return launcher.is_file() and "p->group == 0 && g.segments > 1" in launcher.read_text()


def plan_v2(op: str, m: int, k: int, kind: int, esize: int, group: int, n: int | None, ks: dict, arch: str,
            commit: str | None = None) -> Plan:
    """Launches of the row-tile kernels (kernels/int8_tile.cu): 32 values per thread, rows
    sized to whole warps; the general kernels (plan_v1) take what these do not."""
    quant = op in ("quantize_int8_rowwise", "quantize_and_rotate_rowwise", "quantize_int8_convrot_weight",
                   "int8_linear_quantize")
    g = group if op in ROTATED else 0
    # plain dequantization (G = 0) took the tile kernel up to 1cdf9a7; since, int8_dequant_walk_kernel
    tile_dequant = op in ("dequantize_int8_simple", "dequantize_int8_convrot_weight") and \
        (g > 0 or find_kernel(ks, arch, "ckc_tile_dequant_kernel", (kind, 0)) is not None)
    if (quant or op == "rotate_int8_convrot_weight" or tile_dequant) and g in TILE_GROUPS:
        geom = tile_geometry(k, m, 1024)
        if geom is not None and quant and g == 0 and geom[2] > 1 and plain_rows_in_one_pass(commit):
            geom = None  # over 32768 values: the general kernels' (launch_tile.c)
        if geom is not None:
            t, r, segments = geom
            plan = Plan(op, op_bytes(op, m, k, esize, n))
            blocks = -(-m // r)
            if op.startswith("dequantize"):
                plan.launches.append(Launch("ckc_tile_dequant_kernel", (kind, g), t * r, blocks, TILE * segments, 1,
                                            esize, load_bytes=TILE))
            else:
                mode = 0 if quant else 2
                out = 1 if quant else esize
                plan.launches.append(Launch("ckc_tile_rows_kernel", (kind, g, mode, 0), t * r, blocks,
                                            TILE * segments, esize, out, load_bytes=TILE * esize))
            return plan
    if op in ("quantize_nvfp4", "quantize_and_rotate_nvfp4") and find_kernel(ks, arch, "nvfp4_quant_rows_kernel"):
        scale_rows = -(-m // 128) * 128
        buffer_cols = -(-k // 64) * 4
        geom = tile_geometry_chunks(buffer_cols, scale_rows, 1024)
        if geom is not None and geom[2] == 1:
            t, r, _ = geom
            plan = Plan(op, op_bytes(op, m, k, esize, n))
            plan.launches.append(Launch("nvfp4_quant_rows_kernel", (kind,), t * r, -(-scale_rows // r), 16, esize,
                                        0.5625, op in ROTATED, load_bytes=16 * esize))
            return plan
    if op == "dequantize_nvfp4" and k % 64 == 0 and find_kernel(ks, arch, "nvfp4_dequant_rows_kernel"):
        geom = tile_geometry_chunks(k // 64, m, 1024)
        if geom is not None and geom[2] == 1:
            t, r, _ = geom
            plan = Plan(op, op_bytes(op, m, k, esize, n))
            plan.launches.append(Launch("nvfp4_dequant_rows_kernel", (kind,), t * r, -(-m // r), 64, 0.5625, esize,
                                        load_bytes=32))
            return plan
    return plan_v1(op, m, k, kind, esize, group, n, ks, arch)


# ---------------------------------------------------------------- the limits (tests/test_gpu_model.py)

# Instructions per element on the hot path, bfloat16, deterministic rounding (issue 11, item 2):
# at 4.3 TB/s a quantizer moving 3 bytes per element leaves 132 SMs x 4 x 1.98 GHz x 32 /
# (4.3e12 / 3) = 23 thread instructions per element; 18 keeps the plain one memory-bound with
# room, 26 lets the rotated one (9 additions and 2.5 shuffles per element for G = 256) stay
# within 15% of it.  Issue 22, item 3: every hot op is held to what its kernel reaches now (the
# worse of sm_90 and sm_120 at the two shapes of check(), kernels of 8e0dd6a), plus about 10% for a
# compiler's reshuffling; a real regression costs more (the planted division of the tests adds
# 20+ per element).  The NVFP4 quantizers are above the memory-bound budget: they are held where
# they are until their division goes (benchmarks/results/gpu_model_predictions.md, "NVFP4 without a
# division per value").
INSTRUCTION_LIMITS = {
    "quantize_int8_rowwise": 12.5,           # reaches 11.4
    "int8_linear_quantize": 12.5,            # 11.4 (the same kernel)
    "quantize_and_rotate_rowwise": 26.0,     # 24.8
    "rotate_int8_convrot_weight": 21.0,      # 19.3
    # The plain dequantizer's warp walk (after 1cdf9a7) spends more instructions than the tile kernel
    # it replaced (5.7 and 9.7: a row's index math shared by 32 values, four 16-byte stores 64 or 128
    # bytes apart per thread) to store coalesced: that kernel moved 18% (float32) and 50% (bfloat16) of
    # the copy's bandwidth on the H200.  At 15.3 per element the bfloat16 walk issues in 31 us what
    # takes 41 us to move at 4096 x 14336: still memory-bound.
    "dequantize_int8_simple": 13.5,          # 12.3 (sm_90)
    "dequantize_int8_simple_dtype": 17.0,    # 15.3 (sm_90)
    "dequantize_int8_convrot_weight": 20.0,  # 18.4
    "dequantize_int8_convrot_weight_dtype": 24.5,  # 22.4
    "quantize_nvfp4": 48.5,                  # 44.3
    "dequantize_nvfp4": 22.0,                # 19.9
    "quantize_and_rotate_nvfp4": 85.5,       # 78.0
}
# Registers per thread (issue 22, item 3), bfloat16, on both targets: the plain row quantizer
# holds a thread's 32 values as 16 raw words and codes them from there (kernels/int8_tile.cu,
# ckc_tile_plain), capped at 48 (CKC_TILE_REGISTERS) so that three 448-thread blocks of a
# 14336-value row share an SM (84 KB in flight) where 63 registers allowed two (56 KB).  The
# rotated quantizer keeps 32 floats through its shuffles and stays at 64.
REGISTER_LIMITS = {
    "quantize_int8_rowwise": 48,
    "int8_linear_quantize": 48,
}
# The memory-bound kernels held to the memory limits.
HOT_OPS = ("quantize_int8_rowwise", "quantize_and_rotate_rowwise", "rotate_int8_convrot_weight",
           "dequantize_int8_simple", "dequantize_int8_simple_dtype", "dequantize_int8_convrot_weight",
           "dequantize_int8_convrot_weight_dtype", "quantize_nvfp4", "dequantize_nvfp4", "quantize_and_rotate_nvfp4",
           "int8_linear_quantize")
LATENCY_TO_COVER_NS = 800.0


def required_in_flight(gpu: Gpu) -> float:
    """Bytes in flight per SM that sustain the datasheet bandwidth over the DRAM latency."""
    return gpu.dram_gb_s * 1e9 * LATENCY_TO_COVER_NS * 1e-9 / gpu.sms


def hot_launches(op: str, m: int, k: int, gpu: str, commit: str | None = None, dtype: str = "bfloat16"):
    """[(launch, kernel, metrics)] of an op's kernels at a shape, as the model sees them."""
    g = GPUS[GPU_ALIASES.get(gpu, gpu)]
    ks = kernels(commit)
    plan = plan_for(op, m, k, dtype, table_group(op), None, ks, g.arch, commit)
    result = []
    for launch in plan.launches:
        kern = find_kernel(ks, g.arch, launch.name, launch.args)
        if kern is None:
            raise KeyError(f"{launch.name}{launch.args} not found for sm_{g.arch}")
        result.append((launch, kern, launch_metrics(launch, kern, g)))
    return result


def limit_problems(launch: Launch, kern: Kernel, met: dict, gpu: Gpu) -> list[str]:
    """What a launch breaks of the memory limits: loads after a use, spills or local memory,
    too few bytes in flight per SM."""
    where = f"{kern.name}{kern.args} on sm_{kern.arch}"
    problems = []
    if not met["loads_first"]:
        problems.append(f"{where}: {met['cost']['loads_before_first_use']} of {met['cost']['loads']} loads "
                        "issued before the first use of a loaded value")
    if met["spills"] != (0, 0) or met["stack"] or met["per_element"]["local"]:
        problems.append(f"{where}: spills {met['spills']}, stack frame {met['stack']} bytes, "
                        f"{met['per_element']['local']:.2f} local accesses per element")
    need = required_in_flight(gpu)
    if met["in_flight_full"] < need:
        problems.append(f"{where}: {met['in_flight_full'] / 1024:.1f} KB in flight per SM, "
                        f"{need / 1024:.1f} KB needed")
    return problems


# Every kernel of kernels/*.cu, modelled or not (issue 21: the kernels of every format): no
# spills, no stack frame, no local memory.  The element kernels of the formats added since the model
# (FP8, RoPE, and each new family's, listed here as it lands) also load their elements in 64- or
# 128-bit units on the hot path, except the instances that are the scalar fallback for rows a vector
# cannot read (odd widths, unaligned or strided rows), named by their template arguments.
VECTOR_KERNELS = {"fp8_quant_kernel", "fp8_dequant_kernel", "fp8_stochastic_kernel", "rope_kernel",
                  "awq_gemv_kernel", "mxfp8_quant_kernel", "mxfp8_dequant_kernel", "w4_quant_kernel",
                  "w4_dequant_kernel", "w4_unpack_kernel", "w4_linear_kernel", "w4a8_dequant_kernel",
                  "w4a8_gemv_kernel"}
# Not in it yet (issue 22): rms_rope_kernel and rms_gated_residual_kernel read their rows one
# element per lane (coalesced, not 64- or 128-bit units).
SCALAR_FALLBACKS = {"rope_kernel": lambda args: args[2] == 0,  # rope_kernel<KIND, SPLIT, VEC = 0>
                    "awq_gemv_kernel": lambda args: args[1] == 0}  # awq_gemv_kernel<KIND, VEC = 0>
# Kernels that break the spill limit today, each with why, left to issue 22 (listed so that any
# other kernel breaking it fails; tests/test_kernel_resources.py reads the same list): ptxas gives
# rms_gated_residual_kernel's float32 (sm_80, sm_90) and float16 (sm_80) instances 32 registers and
# saves 36-44 bytes around its calls of the 64-bit division (its per-row gate and residual indexes)
# and IEEE division and square-root slow paths; its other instances and targets save nothing.
KNOWN_SPILLS = {"rms_gated_residual_kernel": "caller-saved registers around slow-path calls"}


def kernel_problems(kern: Kernel) -> list[str]:
    """What one kernel breaks of the every-kernel limits above."""
    where = f"{kern.name}{kern.args} on sm_{kern.arch} ({kern.source})"
    problems = []
    local = sum(1 for ins in kern.instrs if ins.base in ("LDL", "STL"))
    if (kern.spills != (0, 0) or kern.stack or local) and kern.name not in KNOWN_SPILLS:
        problems.append(f"{where}: spills {kern.spills}, stack frame {kern.stack} bytes, "
                        f"{local} local memory instructions")
    fallback = SCALAR_FALLBACKS.get(kern.name, lambda args: False)(kern.args)
    if kern.name in VECTOR_KERNELS and not fallback:
        path = [ins for block in sass_paths.hot_path(kern.instrs) for ins in block.instrs]
        widest = max([ins.width() for ins in path if ins.is_global_load()] or [0])
        if widest < 64:
            problems.append(f"{where}: element loads not vectorized (widest global load on the hot path: "
                            f"{widest} bits)")
    return problems


def register_problems(op: str, kern: Kernel) -> list[str]:
    """An op's kernel above its REGISTER_LIMITS entry."""
    limit = REGISTER_LIMITS.get(op)
    if limit is None or kern.registers <= limit:
        return []
    return [f"{op}: {kern.name}{kern.args} on sm_{kern.arch}: {kern.registers} registers, limit {limit}"]


def check(commit: str | None = None) -> list[str]:
    """Every limit the kernels break, at the tests' shapes, on both targets."""
    problems = []
    for gpu in GPUS:
        for m, k in ((4096, 14336), (4096, 3072)):
            for op in HOT_OPS:
                for launch, kern, met in hot_launches(op, m, k, gpu, commit):
                    problems += [f"{op} {m}x{k}: {p}" for p in limit_problems(launch, kern, met, GPUS[gpu])]
                    limit = INSTRUCTION_LIMITS.get(op)
                    if limit is not None and met["per_element"]["total"] > limit:
                        problems.append(f"{op} {m}x{k}: {kern.name}{kern.args} on sm_{kern.arch}: "
                                        f"{met['per_element']['total']:.1f} instructions per element, limit {limit}")
                    problems += register_problems(op, kern)
    for kern in kernels(commit).values():
        problems += kernel_problems(kern)
    return sorted(set(problems))


# ---------------------------------------------------------------- tables and the command line

TABLE_K = (3072, 5120, 14336)
TABLE_M = (1, 4096)
TABLE_OPS = ("quantize_int8_rowwise", "quantize_and_rotate_rowwise", "quantize_int8_convrot_weight",
             "rotate_int8_convrot_weight", "dequantize_int8_simple_dtype", "dequantize_int8_convrot_weight_dtype",
             "quantize_nvfp4", "dequantize_nvfp4", "quantize_and_rotate_nvfp4", "int8_linear_quantize")


def table_group(op: str) -> int:
    """The group size the benchmarks use: 256, and 16 for quantize_and_rotate_nvfp4 (gpu_check.py)."""
    return 16 if op == "quantize_and_rotate_nvfp4" else 256


def fmt_us(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e6:.1f}"


def prediction_rows(commit: str | None, gpus=("h200", "rtx5070ti")) -> list[list[str]]:
    rows = []
    for op in TABLE_OPS:
        for m in TABLE_M:
            for k in TABLE_K:
                cells = [op, str(m), str(k)]
                for gpu in gpus:
                    p = predict(op, m, k, gpu=gpu, group=table_group(op), commit=commit)
                    if p is None:
                        cells += ["-", "-"]
                        continue
                    bounds = "+".join(pr["bound"] for _, _, pr in p["launches"])
                    cells += [fmt_us(p["seconds"]), bounds]
                rows.append(cells)
    return rows


def markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def metric_rows(commit: str | None, k: int = 14336) -> list[list[str]]:
    """Per-kernel metrics of each op's launches at M = 4096, bfloat16 (plus the stochastic row
    quantizer), on both targets."""
    rows = []
    cases = [(op, table_group(op), False) for op in TABLE_OPS] + [("quantize_int8_rowwise", 256, True),
                                                                   ("quantize_and_rotate_rowwise", 256, True)]
    for op, group, noise in cases:
        for gpu in ("h200", "rtx5070ti"):
            g = GPUS[gpu]
            ks = kernels(commit)
            try:
                plan = (plan_noise if noise else plan_for)(op, 4096, k, "bfloat16", group, None, ks, g.arch, commit)
            except KeyError:
                continue
            for launch in plan.launches:
                kern = find_kernel(ks, g.arch, launch.name, launch.args)
                if kern is None:
                    continue
                met = launch_metrics(launch, kern, g)
                pe = met["per_element"]
                mode = "stochastic" if noise else "nearest"
                rows.append([op, f"G={group}" if op in ROTATED else "-", mode, f"sm_{g.arch}",
                             f"{kern.name}<{','.join(map(str, kern.args))}>", f"{pe['total']:.1f}",
                             f"{pe['fma']:.1f}", f"{pe['alu']:.1f}", f"{pe['conversion']:.2f}", f"{pe['shuffle']:.2f}",
                             f"{pe['memory']:.2f}", str(met["registers"]),
                             f"{met['blocks_per_sm']}x{launch.threads}", f"{met['in_flight_full'] / 1024:.1f}",
                             "yes" if met["loads_first"] else f"{met['cost']['loads_before_first_use']}/"
                                                             f"{met['cost']['loads']}",
                             "none" if met["spills"] == (0, 0) and met["stack"] == 0 and not pe["local"]
                             else f"spills {met['spills']}, stack {met['stack']}, local/elt {pe['local']:.2f}"])
    return rows


METRIC_HEADER = ["op", "group", "rounding", "target", "kernel", "instr/elt", "fma", "alu", "conv", "shfl", "mem",
                 "regs", "blocks x threads /SM", "KB in flight /SM", "loads first", "spills/local"]


def plan_noise(op, m, k, dtype, group, n, ks, arch, commit=None):
    """The stochastic-rounding instance of a row quantizer (its noise loaded too)."""
    plan = plan_for(op, m, k, dtype, group, n, ks, arch, commit)
    kind, esize = DTYPES[dtype]
    for launch in plan.launches:
        launch.in_bytes = 2 * esize
        launch.load_bytes = None if launch.load_bytes is None else 2 * launch.load_bytes
        launch.args = stochastic_args(launch, ks, arch)
    return plan


def stochastic_args(launch: Launch, ks: dict, arch: str) -> tuple:
    """The tile kernels' stochastic instance is its own (mode 1); the general kernels take the
    noise at run time."""
    if launch.name == "ckc_tile_rows_kernel":
        return launch.args[:2] + (1,) + launch.args[3:]
    return launch.args


def read_measured(path: Path) -> list[tuple[str, int, int, float, bool]]:
    """(op, M, K, ours ms, flight record on) rows of a gpu_check.py report's benchmark table: the 8a578f0 report's
    (op | M | K | ... | ours ms), or today's (op | MxK | MB | ours us | ... | flight off us | ...),
    where ours is taken with the flight record off where measured (M = 4096), so that the
    model's kernels and its price of the completion marks are checked apart."""
    rows = []
    header = None
    for line in path.read_text().splitlines():
        if not line.startswith("|"):
            header = None  # a table ended
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "op":
            header = cells if "MB" in cells else None  # the GPU time table, not the host time one
            continue
        if len(cells) >= 5 and not cells[0].isdigit() and cells[1].isdigit() and cells[2].isdigit():
            try:
                rows.append((cells[0], int(cells[1]), int(cells[2]), float(cells[4]), True))
            except ValueError:
                pass
        elif header and re.fullmatch(r"\d+x\d+", cells[1] if len(cells) > 1 else ""):
            m, k = (int(v) for v in cells[1].split("x"))
            value = {name: cells[i].rstrip("*") for i, name in enumerate(header) if i < len(cells)}
            off = value.get("flight off", "-") not in ("-", "")
            us = value["flight off"] if off else value["ours"]
            try:
                rows.append((cells[0], m, k, float(us) / 1e3, not off))
            except ValueError:
                pass
    return rows


MEASURED_OPS = {}


def calibration_rows(measured: Path, commit: str | None) -> list[list[str]]:
    rows = []
    for op, m, k, ms, flight in read_measured(measured):
        model_op = MEASURED_OPS.get(op, op)
        group = 16 if model_op == "quantize_and_rotate_nvfp4" else 256
        try:
            p = predict(model_op, m, k, group=group, commit=commit, marks=flight)
        except KeyError:
            p = None
        pred = None if p is None else p["seconds"] * 1e3
        bound = "-" if p is None else "+".join(pr["bound"] for _, _, pr in p["launches"])
        ratio = "-" if pred is None else f"{ms / pred:.1f}x"
        rows.append([op, str(m), str(k), f"{ms:.4f}", "-" if pred is None else f"{pred:.4f}", ratio, bound])
    return rows


BEFORE_COMMIT = "f34a4f9"   # the kernels before issue 11's redesign
MEASURED_COMMIT = "1cdf9a7"  # the kernels of the latest GPU run (benchmarks/results/nvidia-h200.md)
MEASURED = ROOT / "benchmarks" / "results" / "nvidia-h200.md"
# the first one, kept: benchmarks/results/nvidia-h200-8a578f0.md


def comparison_rows() -> list[list[str]]:
    """Per op and shape: the H200 measurement of 8a578f0, the model's predictions for 8a578f0,
    for the kernels before the redesign and for the working tree (H200), and for the RTX 5070 Ti
    before and now (us per call)."""
    measured = {(MEASURED_OPS.get(op, op), m, k): ms for op, m, k, ms, _ in read_measured(MEASURED)}
    rows = []
    for op in TABLE_OPS:
        for m in TABLE_M:
            for k in TABLE_K:
                def us(gpu, commit):
                    try:
                        p = predict(op, m, k, gpu=gpu, group=table_group(op), commit=commit)
                    except KeyError:
                        return "-"
                    return fmt_us(None if p is None else p["seconds"])
                meas = measured.get((op, m, k))
                rows.append([op, str(m), str(k), "-" if meas is None else f"{meas * 1e3:.1f}",
                             us("h200", MEASURED_COMMIT), us("h200", BEFORE_COMMIT), us("h200", None),
                             us("rtx5070ti", BEFORE_COMMIT), us("rtx5070ti", None)])
    return rows


COMPARISON_HEADER = ["op", "M", "K", f"H200 measured {MEASURED_COMMIT}", f"H200 model {MEASURED_COMMIT}",
                     f"H200 model {BEFORE_COMMIT}", "H200 model now", f"5070 Ti model {BEFORE_COMMIT}",
                     "5070 Ti model now"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commit", help="model only the kernels of this commit (default: compare "
                                     f"{MEASURED_COMMIT}, {BEFORE_COMMIT} and the working tree)")
    ap.add_argument("--measured", type=Path, help="a gpu_check.py report to set the predictions beside")
    ap.add_argument("--metrics-k", type=int, default=14336, help="K of the per-kernel metrics (default 14336)")
    ap.add_argument("--check", action="store_true", help="only list the limits the kernels break (exit 1 if any)")
    args = ap.parse_args(argv)
    if args.check:
        problems = check(args.commit)
        print("\n".join(problems) if problems else "every limit holds")
        return 1 if problems else 0
    if args.commit:
        print(f"## Predicted GPU time per call (us), bfloat16, {args.commit}\n")
        header = ["op", "M", "K"]
        for gpu in ("h200", "rtx5070ti"):
            header += [f"{gpu} us", f"{gpu} bound"]
        print(markdown(header, prediction_rows(args.commit)))
    else:
        print("## GPU time per call (us), bfloat16, G = 256 (16 for quantize_and_rotate_nvfp4)\n")
        print(markdown(COMPARISON_HEADER, comparison_rows()))
    where = args.commit or "the working tree"
    print(f"\n## Per-kernel metrics of {where} at M = 4096, K = {args.metrics_k}, bfloat16\n")
    print(markdown(METRIC_HEADER, metric_rows(args.commit, args.metrics_k)))
    measured = args.measured or (None if args.commit else MEASURED)
    if measured:
        commit = args.commit or MEASURED_COMMIT
        print(f"\n## Against {measured.relative_to(ROOT) if measured.is_absolute() else measured} "
              f"(ours, measured; predicted for {commit})\n")
        print(markdown(["op", "M", "K", "measured ms", "predicted ms", "measured/predicted", "bound"],
                       calibration_rows(measured, commit)))
    print("\n## Constants\n")
    for gpu in GPUS.values():
        print(f"- {gpu.name}: " + "; ".join(gpu.sources))
    return 0


if __name__ == "__main__":
    sys.exit(main())
