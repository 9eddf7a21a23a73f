# SPDX-License-Identifier: Apache-2.0
"""Build of comfy_kitchen_c's extensions: C11 on the CPython limited API (abi3,
Python >= 3.10), no torch headers or libraries.

  comfy_kitchen_c._C      the kernels users run: CPU kernels (baseline, AVX2 and
                          AVX-512 builds), and the CUDA kernels when nvcc is found: nvcc
                          compiles kernels/*.cu to fatbins (device code only), embedded in
                          _C as data; the host code is C, and reaches the GPU through the
                          CUDA driver opened at run time (csrc/gpu/cuda_driver.c).  _C
                          links no CUDA library.
  comfy_kitchen_c._C_emu  the same op layer with the GPU kernels (kernels/*.cu,
                          compiled as C++) on the emulated device: the tests run
                          every GPU entry point through it on the CPU.  Test code:
                          built for in-place and editable builds only (or
                          COMFY_KITCHEN_C_EMULATED=1), never into a wheel.

Builds are incremental: objects are kept per extension and build configuration in
build/objects/ and recompiled only when their source or a header changed.

Environment: COMFY_KITCHEN_C_WERROR=1 turns warnings into errors (CI does);
COMFY_KITCHEN_C_NO_CUDA=1 builds without CUDA kernels; COMFY_KITCHEN_C_CUDA_ARCHS="80;90"
names the GPU architectures ("all": CUDA_ARCHS below; by default all of them for a wheel or
a plain install, this machine's GPU (or the newest alone) for in-place and editable builds);
COMFY_KITCHEN_C_SANITIZE=address (or address,undefined; any -fsanitize= list) builds
the host code (C, and the GPU kernels on the emulated device) with the sanitizers, for CI
(UndefinedBehaviorSanitizer without recovery: its first report aborts);
COMFY_KITCHEN_C_EMU_RACES=1 builds _C_emu with its shared-memory race detector;
COMFY_KITCHEN_C_EMULATED=1 / 0 builds the emulated device whatever the build / for none;
COMFY_KITCHEN_C_FATBIN_CACHE=<folder> keeps compiled fatbins there by content, for other builds
of the same kernels (CI: the wheels reuse the editable install's)."""
import concurrent.futures
import functools
import hashlib
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).parent
LIMITED_API = "0x030A0000"  # Python 3.10

# Compiled separately with their instruction set's flags.
ISA_SOURCES = {
    "csrc/cpu/kernels_avx2.c": {"unix": ["-mavx2", "-mfma"], "msvc": ["/arch:AVX2"]},
    "csrc/cpu/kernels_avx512.c": {"unix": ["-mavx2", "-mfma", "-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq"],
                                  "msvc": ["/arch:AVX512"]},
}
# Compute capabilities built as real code (SASS): Turing, Ampere (A100, RTX 30),
# Ada (RTX 40), Hopper, Blackwell (B200, RTX 50), Jetson Thor (11.0).  The newest also
# ships as PTX, which the driver compiles for GPUs newer than this list.  Each runs on
# GPUs of its major and a minor at least its own (sm_86 on 8.7, sm_100 on 10.3,
# sm_120 on 12.1).
CUDA_ARCHS = "75;80;86;89;90;100;110;120"
# Architectures that only a CUDA 13 toolchain knows (CUDA 12 called Thor 10.1).
CUDA13_ONLY_ARCHS = {"110"}
# The device layer (runtime seam and GEMM seam): exactly one per extension.  The
# others are not compiled at all: their #if guards would leave empty translation
# units, which ISO C forbids (MSVC /W4: C4206).
# The launchers (host C over the runtime seam) serve both GPU devices: every
# gpu/launch_<family>.c, so that a new family's launcher needs no line here.
GPU_LAUNCHERS = ["csrc/gpu/entries.c", "csrc/gpu/kernel.c"] + sorted(
    p.relative_to(ROOT).as_posix() for p in (ROOT / "csrc" / "gpu").glob("launch_*.c"))
DEVICE_SOURCES = {
    "none": ["csrc/gpu/runtime_none.c"],
    "cuda": ["csrc/gpu/runtime_cuda.c", "csrc/gpu/blas_cublaslt.c", "csrc/gpu/blas_load.c", "csrc/gpu/cuda_driver.c",
             "csrc/gpu/fatbin_info.c"] + GPU_LAUNCHERS,
    "emu": ["csrc/gpu/runtime_emu.c", "csrc/gpu/blas_emu.c"] + GPU_LAUNCHERS,
}


def rel(p: Path) -> str:
    return str(p.relative_to(ROOT)).replace(os.sep, "/")


def is_x86_64() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def c_sources(device: str):
    other_os = "_posix.c" if sys.platform == "win32" else "_win32.c"
    other_devices = {s for sources in DEVICE_SOURCES.values() for s in sources} - set(DEVICE_SOURCES[device])
    return sorted(
        rel(p) for p in (ROOT / "csrc").rglob("*.c")
        if not p.name.endswith(other_os) and rel(p) not in ISA_SOURCES and rel(p) not in other_devices
    )


def find_nvcc() -> str | None:
    if os.environ.get("COMFY_KITCHEN_C_NO_CUDA") == "1":
        return None
    # CUDA_PATH: what the CUDA installer sets on Windows.
    nvcc = "nvcc.exe" if sys.platform == "win32" else "nvcc"
    homes = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")]
    candidates = [os.path.join(h, "bin", nvcc) for h in homes if h] + [shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]
    return next((c for c in candidates if c and os.path.isfile(c)), None)


# Whether this is a development build (in-place or editable: BuildExt.finalize_options sets it),
# whose GPU kernels are built for this machine's GPU only (arch_list).
DEVELOPMENT = False


@functools.lru_cache(maxsize=None)
def local_gpu_archs() -> tuple[str, ...]:
    """The compute capabilities of this machine's GPUs ("90"), as nvidia-smi reports them
    (asked once per build); none without a GPU or a driver."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return ()
    try:
        out = subprocess.run([smi, "--query-gpu=compute_cap", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return ()
    return tuple(sorted({line.strip().replace(".", "") for line in out.splitlines()
                         if re.fullmatch(r"\d+\.\d", line.strip())}, key=int))


def arch_list() -> list[str]:
    """The architectures to build ("75", ...): COMFY_KITCHEN_C_CUDA_ARCHS ("all": CUDA_ARCHS);
    else, for a wheel or a plain install, all of CUDA_ARCHS; for a development build, this
    machine's GPUs, or the newest of CUDA_ARCHS without one (so that the driver path is
    built and linked at a seventh of the seven-architecture compile)."""
    setting = os.environ.get("COMFY_KITCHEN_C_CUDA_ARCHS", "").strip()
    if setting and setting != "all":
        return [a.strip() for a in setting.split(";") if a.strip()]
    every = CUDA_ARCHS.split(";")
    if setting == "all" or not DEVELOPMENT:
        return every
    return list(local_gpu_archs()) or every[-1:]


NVCC = find_nvcc()


def toolchain_archs() -> list[str]:
    """arch_list() less what this nvcc cannot build (a CUDA 12 nvcc knows no sm_110)."""
    return [a for a in arch_list() if nvcc_version() >= 13000 or a not in CUDA13_ONLY_ARCHS]


def cuda_archs() -> list[str]:
    """The architectures built, as compute capabilities ("7.5", "8.0", ...)."""
    return [f"{a[:-1]}.{a[-1]}" for a in toolchain_archs()]


# ---- the CUDA 12 assembler: SASS that drivers from CUDA 12.0 (R525) on can load ----
# A CUDA 13 nvcc's cubins need a CUDA 13 driver (R580): their ELF ABI is new.  So the SASS of
# every architecture a CUDA 12 ptxas knows is assembled by one (PyPI's nvidia-cuda-nvcc-cu12,
# a build requirement) from the PTX nvcc 13 writes, its `.version` lowered to the newest ISA
# that ptxas reads; the SASS of architectures only CUDA 13 knows, and the PTX for newer GPUs,
# come from nvcc 13 (docs/install.md: which drivers run which GPUs).
PTXAS12_ISA = {12080: "8.7", 12090: "8.8"}  # the newest PTX ISA each CUDA 12 ptxas reads
PTXAS12_ARCHS = {"75", "80", "86", "89", "90", "100", "120"}


def tool_version(tool: str) -> int:
    """A CUDA tool's release as 1000 * major + 10 * minor (`--version`'s "release 12.9")."""
    out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=True).stdout
    major, minor = re.search(r"release (\d+)\.(\d+)", out).groups()
    return 1000 * int(major) + 10 * int(minor)


@functools.lru_cache(maxsize=None)
def find_ptxas12() -> str | None:
    """A CUDA 12.8+ ptxas: COMFY_KITCHEN_C_PTXAS, else the nvidia-cuda-nvcc-cu12 package's;
    None when nvcc is itself CUDA 12 (its cubins already load on CUDA 12 drivers) or none is found."""
    if NVCC is None or nvcc_version() < 13000:
        return None
    exe = "ptxas.exe" if sys.platform == "win32" else "ptxas"
    candidates = [os.environ.get("COMFY_KITCHEN_C_PTXAS")]
    try:
        import importlib.util
        spec = importlib.util.find_spec("nvidia.cuda_nvcc")
        candidates += [os.path.join(d, "bin", exe) for d in (spec.submodule_search_locations or [])] if spec else []
    except (ImportError, ValueError):
        pass
    for ptxas in filter(None, candidates):
        if os.path.isfile(ptxas) and tool_version(ptxas) in PTXAS12_ISA:
            return ptxas
    return None


def fatbinary() -> str:
    exe = "fatbinary.exe" if sys.platform == "win32" else "fatbinary"
    return os.path.join(os.path.dirname(NVCC), exe)


@functools.lru_cache(maxsize=None)
def nvcc_version_text() -> str:
    """What `nvcc --version` prints (asked once per build)."""
    return subprocess.run([NVCC, "--version"], capture_output=True, text=True, check=True).stdout


def nvcc_version() -> int:
    """nvcc's CUDA version as 1000 * major + 10 * minor (13.0: 13000)."""
    out = nvcc_version_text()
    major, minor = re.search(r"release (\d+)\.(\d+)", out).groups()
    return 1000 * int(major) + 10 * int(minor)


def sass_toolchains() -> list[tuple[str, int]]:
    """(architecture, the CUDA version of the toolchain that assembles its SASS): fatbin_commands' choice.
    The driver an image needs follows it (csrc/gpu/fatbin_info.c); a cubin's ELF ABI does not say (CUDA
    12.9's ptxas writes the ABI of CUDA 13 for sm_100 and newer)."""
    ptxas12 = find_ptxas12()
    return [(a, tool_version(ptxas12) if ptxas12 and a in PTXAS12_ARCHS else nvcc_version()) for a in toolchain_archs()]


def write_fatbins_c(path: str, fatbins: list[str], cuda_version: int, archs: list[str], ptxas12: int = 0,
                    toolchains: list[tuple[str, int]] = ()) -> bool:
    """The fatbins as C data (csrc/gpu/fatbins.h): 64-bit words, so that each image is
    8-byte aligned as cuModuleLoadData wants, little-endian as every CUDA host is, and
    numbers rather than a string literal, which MSVC caps at 64 KiB.  Written only when it
    changes (the return value), so that an unchanged build compiles nothing."""
    lines = ["/* Generated by setup.py from kernels/<family>.cu: do not edit. */", '#include "gpu/fatbins.h"', ""]
    entries = []
    for i, fatbin in enumerate(fatbins):
        data = Path(fatbin).read_bytes()
        padded = data + bytes(-len(data) % 8)
        words = struct.unpack(f"<{len(padded) // 8}Q", padded)
        lines.append(f"static const unsigned long long fatbin_{i}[{len(words)}] = {{")
        for at in range(0, len(words), 6):
            lines.append("    " + ", ".join(f"0x{w:016x}ULL" for w in words[at:at + 6]) + ",")
        lines.append("};")
        entries.append(f'    {{"{Path(fatbin).stem}", (const unsigned char *)fatbin_{i}, {len(data)}u}},')
    limit = int(re.search(r"#define CKC_FATBIN_MAX (\d+)", (ROOT / "csrc/gpu/fatbins.h").read_text()).group(1))
    if len(entries) > limit:
        raise RuntimeError(f"{len(entries)} kernel sources, more than CKC_FATBIN_MAX = {limit} (csrc/gpu/fatbins.h)")
    lines += ["", "const ckc_fatbin ckc_fatbins[CKC_FATBIN_MAX] = {", *entries, "};",
              f"const int ckc_fatbin_count = {len(entries)};",
              f"const int ckc_kernels_cuda_version = {cuda_version};",
              f"const int ckc_kernels_ptxas12_version = {ptxas12};",
              "const ckc_sass_toolchain ckc_kernels_sass[] = {"
              + ", ".join(f"{{{a}, {v}}}" for a, v in toolchains) + ("" if toolchains else "{0, 0}") + "};",
              f"const int ckc_kernels_sass_count = {len(toolchains)};",
              f'const char ckc_kernels_archs[] = "{" ".join(archs)}";', ""]
    text = "\n".join(lines)
    if os.path.exists(path) and Path(path).read_text() == text:
        return False
    Path(path).write_text(text)
    return True


def nvcc_base(source: str, include_dirs: list[str], ccbin: str | None) -> list[str]:
    """nvcc on one .cu file, device code only.  No FMA contraction and IEEE division (nvcc's
    defaults but --fmad): the kernels round exactly like the CPU path."""
    werror = os.environ.get("COMFY_KITCHEN_C_WERROR") == "1"
    return [NVCC, "-std=c++17", "-O3", "--fmad=false", source, *[f"-I{d}" for d in include_dirs],
            *(["-ccbin", ccbin] if ccbin else []), *(["-Werror", "all-warnings"] if werror else [])]


def fatbin_commands(source: str, fatbin: str, include_dirs: list[str], ccbin: str | None = None) -> list[list[str]]:
    """The commands that make one .cu file's fatbin: per architecture SASS (a CUDA 12 ptxas's
    from lowered PTX where find_ptxas12() has one and knows the architecture, else nvcc's),
    the newest architecture's PTX, packed by fatbinary with LZ4 ("speed": every CUDA 12
    driver reads it; zstd needs 12.4).  Without line tables: the machine-code checks compile
    their own (benchmarks/gpu_model.py).  A step of the form ["lower", src, dst, isa] rewrites
    src's `.version` directive to isa."""
    base = nvcc_base(source, include_dirs, ccbin)
    work = fatbin + ".parts"
    stem = Path(source).stem
    archs, ptxas12 = toolchain_archs(), find_ptxas12()
    steps, images = [], []
    for a in archs:
        cubin = os.path.join(work, f"{stem}.sm_{a}.cubin")
        if ptxas12 and a in PTXAS12_ARCHS:
            ptx, lowered = os.path.join(work, f"{stem}.compute_{a}.ptx"), os.path.join(work, f"{stem}.sm_{a}.ptx")
            steps += [[*base, "-ptx", f"-arch=compute_{a}", "-o", ptx],
                      ["lower", ptx, lowered, PTXAS12_ISA[tool_version(ptxas12)]],
                      [ptxas12, "-O3", "--fmad=false", f"-arch=sm_{a}", lowered, "-o", cubin]]
        else:
            steps.append([*base, "-cubin", f"-arch=sm_{a}", "-o", cubin])
        images.append(f"--image3=kind=elf,sm={a},file={cubin}")
    newest_ptx = os.path.join(work, f"{stem}.compute_{archs[-1]}.ptx")
    if not any(s[-1] == newest_ptx for s in steps):
        steps.append([*base, "-ptx", f"-arch=compute_{archs[-1]}", "-o", newest_ptx])
    images.append(f"--image3=kind=ptx,sm={archs[-1]},file={newest_ptx}")
    return steps + [[fatbinary(), f"--create={fatbin}", "-64", "-compress-all", "--compress-mode=speed", *images]]


def lower_ptx_version(src: str, dst: str, isa: str) -> None:
    """src's PTX with its `.version` directive set to isa (the newest a CUDA 12 ptxas reads): the
    PTX nvcc 13 writes for these kernels uses nothing newer, and ptxas refuses what it does not
    know, so a kernel that did would fail the build, not run wrong."""
    text = Path(src).read_text()
    lowered, n = re.subn(r"^\.version \d+\.\d+$", f".version {isa}", text, count=1, flags=re.M)
    if n != 1:
        raise RuntimeError(f"{src}: no .version directive")
    Path(dst).write_text(lowered)


def run_step(step: list[str]) -> None:
    if step[0] == "lower":
        lower_ptx_version(*step[1:])
    else:
        subprocess.check_call(step, cwd=ROOT)


def fatbin_key(source: str, cmd: list[list[str]]) -> str:
    """What a fatbin depends on: its source, every header a kernel may include, nvcc's
    version and its command (the output path and -Werror left out)."""
    h = hashlib.sha256()
    for path in [ROOT / source] + sorted(p for folder in ("csrc", "kernels") for p in (ROOT / folder).rglob("*")
                                         if p.suffix in (".h", ".cuh")):
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    # warnings as errors changes no byte of a fatbin that compiles; paths are the build's own
    h.update(repr([[Path(c).name if os.sep in c or "/" in c else c for c in step[1:]
                    if c not in ("-Werror", "all-warnings")] for step in cmd]).encode())
    h.update(nvcc_version_text().encode())
    if find_ptxas12():
        h.update(str(tool_version(find_ptxas12())).encode())
    return h.hexdigest()[:16]


def compile_fatbin(source: str, fatbin: str, cmd: list[list[str]]) -> None:
    """Runs nvcc, or takes the fatbin from COMFY_KITCHEN_C_FATBIN_CACHE (a folder) where an
    earlier build of the same sources, headers and command left it: CI's builds (the
    editable install, the Linux and Windows wheels) compile the eight architectures once."""
    cache = os.environ.get("COMFY_KITCHEN_C_FATBIN_CACHE")
    cached = Path(cache) / f"{Path(source).stem}-{fatbin_key(source, cmd)}.fatbin" if cache else None
    if cached is not None and cached.exists():
        print(f"{source}: fatbin from {cached}")
        shutil.copyfile(cached, fatbin)
        return
    os.makedirs(fatbin + ".parts", exist_ok=True)
    for step in cmd:
        print(" ".join(step))
        run_step(step)
    shutil.rmtree(fatbin + ".parts", ignore_errors=True)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(fatbin, str(cached) + ".part")
        os.replace(str(cached) + ".part", cached)


def build_fatbins(folder: str, include_dirs: list[str], headers_mtime: float, force: bool = False,
                  ccbin: str | None = None) -> tuple[str, bool]:
    """Every kernels/*.cu compiled to a fatbin in folder (stale ones only), and the C file
    that holds them as data (folder/fatbins.c, csrc/gpu/fatbins.h); and whether it changed.
    Device code is the same for every host OS: tools/windows/build.py calls this too."""
    fatbins, stale = [], []
    for source in gpu_kernel_sources():
        fatbin = os.path.join(folder, Path(source).stem + ".fatbin")
        if force or is_stale(fatbin, source, headers_mtime):
            stale.append((source, fatbin, fatbin_commands(source, fatbin, include_dirs, ccbin)))
        fatbins.append(fatbin)
    # One nvcc per file, as many at once as there are cores: the sm_90 build on the H200
    # machine (16 cores) took 152 s one file after another, past gpu_check's budget.
    with concurrent.futures.ThreadPoolExecutor(max_workers=build_jobs()) as pool:
        jobs = [pool.submit(compile_fatbin, *job) for job in stale]
        try:
            for done in jobs:
                done.result()
        except BaseException:  # the first nvcc failure stops the build: no queued file starts
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    changed = bool(stale)
    generated = os.path.join(folder, "fatbins.c")
    ptxas12 = find_ptxas12()
    changed = write_fatbins_c(generated, fatbins, nvcc_version(), cuda_archs(),
                              tool_version(ptxas12) if ptxas12 else 0, sass_toolchains()) or changed
    return generated, changed


def build_jobs() -> int:
    """nvcc processes at once: COMFY_KITCHEN_C_BUILD_JOBS, else the cores this process may use."""
    wanted = os.environ.get("COMFY_KITCHEN_C_BUILD_JOBS")
    if wanted:
        return max(1, int(wanted))
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, cores or 1)


def gpu_kernel_sources():
    return sorted(rel(p) for p in (ROOT / "kernels").glob("*.cu"))


def emulated_device_sources():
    """GPU kernel sources and the emulator, compiled as C++ for _C_emu."""
    return gpu_kernel_sources() + ["csrc/emu/emu_runtime.cpp", "csrc/emu/emu_oplog.cpp",
                                   "csrc/emu/emu_streams.cpp", "csrc/emu/emu_graphs.cpp",
                                   "csrc/emu/emu_replay.cpp", "csrc/emu/emu_races.cpp",
                                   "csrc/emu/emu_hazards.cpp"]


def emulated_device_wanted(development: bool) -> bool:
    """Whether _C_emu (the emulated device: test code) is built.  For development only:
    in-place and editable builds (the README's `pip install -e .`), or
    COMFY_KITCHEN_C_EMULATED=1; never for a wheel or a plain `pip install .`.
    COMFY_KITCHEN_C_EMULATED=0 turns it off for every build; Windows has none yet."""
    setting = os.environ.get("COMFY_KITCHEN_C_EMULATED", "")
    if sys.platform == "win32":
        return False
    return setting == "1" if setting in ("0", "1") else development


def emu_races() -> bool:
    """COMFY_KITCHEN_C_EMU_RACES=1: _C_emu with the race detector, a configuration of its own
    (BuildExt.configuration: its objects differ)."""
    return os.environ.get("COMFY_KITCHEN_C_EMU_RACES") == "1"


def newest_header_mtime() -> float:
    """The newest header any source may include: a header change rebuilds every object
    (exact per-object dependencies would need each compiler's dependency files)."""
    return max(p.stat().st_mtime for folder in ("csrc", "kernels") for p in (ROOT / folder).rglob("*")
               if p.suffix in (".h", ".cuh"))


def is_stale(obj: str, source: str, headers_mtime: float) -> bool:
    try:
        built = os.path.getmtime(obj)
    except OSError:
        return True
    return built < max(os.path.getmtime(ROOT / source), headers_mtime)


class BuildExt(build_ext):
    """Compiler flags per language and per source set, and incremental builds: each
    extension keeps its objects in a folder of its own per build configuration
    (build/objects/<ext>-<hash of compilers, flags, macros, CUDA targets>), where an
    object is rebuilt only when its source or a header is newer, and the extension is
    relinked only when an object changed or another configuration linked it last
    (link_stamp).  A configuration change (CUDA or not, sanitizer, warnings: environment
    variables that file times cannot see) therefore builds into another folder, and
    switching back finds its objects still there and links them again."""

    KEEP_CONFIGURATIONS = 4  # per extension; older object folders are removed

    def finalize_options(self):
        global DEVELOPMENT
        super().finalize_options()
        DEVELOPMENT = bool(self.inplace or getattr(self, "editable_mode", False))
        if not emulated_device_wanted(DEVELOPMENT):
            self.extensions = [e for e in self.extensions if not e.name.endswith("_C_emu")]

    def build_extensions(self):
        werror = os.environ.get("COMFY_KITCHEN_C_WERROR") == "1"
        self.msvc = self.compiler.compiler_type == "msvc"
        if self.msvc:
            # _CRT_SECURE_NO_WARNINGS: the UCRT marks standard C functions the code uses on purpose
            # (getenv) deprecated (C4996), which /WX would make an error.
            common = ["/O2", "/W4", "/fp:precise", "/D_CRT_SECURE_NO_WARNINGS"] + (["/WX"] if werror else [])
            self.c_flags, self.cxx_flags = ["/std:c11"] + common, ["/std:c++17", "/TP", "/EHsc"] + common
        else:
            # No -ffast-math and no FMA contraction: kernels must round exactly like eager.
            # -fno-trapping-math only drops the assumption that FP exception flags are read,
            # which lets the compiler turn the kernels' selects into vector blends.
            common = ["-O3", "-Wall", "-Wextra", "-fno-math-errno", "-fno-trapping-math",
                      "-ffp-contract=off", "-fvisibility=hidden"] + (["-Werror"] if werror else [])
            self.c_flags, self.cxx_flags = ["-std=c11"] + common, ["-std=c++17"] + common
        sanitize = os.environ.get("COMFY_KITCHEN_C_SANITIZE")
        if sanitize and not self.msvc:
            flags = [f"-fsanitize={sanitize}", "-fno-omit-frame-pointer"]
            if "undefined" in sanitize:  # any report aborts the process (and fails CI)
                flags.append("-fno-sanitize-recover=all")
            self.c_flags, self.cxx_flags = self.c_flags + flags, self.cxx_flags + flags
            self.sanitizer_link = flags
        else:
            self.sanitizer_link = []
        self.compiler.src_extensions += [".cu", ".cpp"]
        self.headers_mtime = newest_header_mtime()
        super().build_extensions()

    def configuration(self, ext) -> str:
        """Everything besides the sources that an extension's objects depend on."""
        compiler = [getattr(self.compiler, a, None) for a in ("compiler_so", "compiler_cxx", "cc")]
        return repr([ext.name, sorted(ext.define_macros), ext.include_dirs, self.c_flags, self.cxx_flags,
                     self.sanitizer_link, emu_races() and ext.name.endswith("_C_emu"), compiler, NVCC,
                     (toolchain_archs(), find_ptxas12()) if NVCC else None, sys.version])

    def object_folder(self, ext) -> str:
        """build/objects/<ext>-<configuration hash>, marked as just used; the folders of
        configurations not used for longest beyond KEEP_CONFIGURATIONS go."""
        config = self.configuration(ext)
        folder = ROOT / "build" / "objects" / f"{ext.name}-{hashlib.sha256(config.encode()).hexdigest()[:12]}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "configuration.txt").write_text(config + "\n")
        siblings = sorted(folder.parent.glob(f"{ext.name}-*"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in siblings[self.KEEP_CONFIGURATIONS:]:
            shutil.rmtree(old, ignore_errors=True)
        return str(folder)

    @staticmethod
    def link_stamp(ext) -> Path:
        """build/objects/<ext>.linked: the object folder (configuration) that linked the
        extension last, and where to."""
        return ROOT / "build" / "objects" / f"{ext.name}.linked"

    def linked_here(self, ext, output: str) -> bool:
        """Whether `output` was linked last from this configuration's objects.  File times
        cannot say: switching back to a configuration finds its objects older than the other
        configuration's link, which would pass for "up to date"."""
        stamp = self.link_stamp(ext)
        return stamp.exists() and stamp.read_text() == f"{self.build_temp}\n{output}\n"

    def mark_linked(self, ext, output: str) -> None:
        self.link_stamp(ext).write_text(f"{self.build_temp}\n{output}\n")

    def copy_extensions_to_source(self):
        """--inplace: always copy build/lib's extension over the package's.  distutils copies
        only a newer file, and the package's may be a newer build of another configuration
        (`pip install -e .` with a sanitizer links it there directly), which then stayed."""
        forced, self.force = self.force, True
        try:
            super().copy_extensions_to_source()
        finally:
            self.force = forced

    def build_extension(self, ext):
        saved = self.build_temp
        self.build_temp = self.object_folder(ext)
        try:
            objects, rebuilt = self.compile_all(ext)
            output = self.get_ext_fullpath(ext.name)
            if not rebuilt and os.path.exists(output) and self.linked_here(ext, output) and all(
                    os.path.getmtime(o) <= os.path.getmtime(output) for o in objects):
                print(f"{ext.name}: up to date")
                return
            # distutils links the objects; it is left no source to compile
            sources, ext.sources = ext.sources, []
            ext.extra_objects, ext.extra_link_args = objects, list(self.sanitizer_link)
            if ext.name.endswith("_C_emu") and not self.msvc:
                ext.extra_link_args.append("-lstdc++")
            forced, self.force = self.force, True
            try:
                super().build_extension(ext)
                self.mark_linked(ext, output)
            finally:
                ext.sources, self.force = sources, forced
        finally:
            self.build_temp = saved

    def compile_all(self, ext) -> tuple[list[str], bool]:
        """Every object of ext, compiling the stale ones; and whether any was."""
        kind = "msvc" if self.msvc else "unix"
        groups = [(list(ext.sources), self.c_flags, None)]
        if is_x86_64():
            groups += [([source], self.c_flags + isa_flags[kind], None) for source, isa_flags in ISA_SOURCES.items()]
        if ext.name.endswith("_C_emu"):
            # .cu files are C++ to the host compiler (the flag must precede the source)
            groups += self.emulated_device_groups([] if self.msvc else ["-x", "c++"])
        objects, rebuilt = [], False
        for sources, flags, preargs in groups:
            outs = self.compiler.object_filenames(sources, output_dir=self.build_temp)
            stale = [s for s, o in zip(sources, outs) if self.force or is_stale(o, s, self.headers_mtime)]
            if stale:
                self.compiler.compile(stale, output_dir=self.build_temp, macros=ext.define_macros,
                                      include_dirs=ext.include_dirs, extra_preargs=preargs, extra_postargs=flags)
            objects += outs
            rebuilt = rebuilt or bool(stale)
        if NVCC and ("CKC_WITH_CUDA", "1") in ext.define_macros:
            generated, changed = self.fatbins_source(ext)
            obj = self.compiler.object_filenames([generated], output_dir=self.build_temp)[0]
            if changed or self.force or not os.path.exists(obj):
                self.compiler.compile([generated], output_dir=self.build_temp, macros=ext.define_macros,
                                      include_dirs=ext.include_dirs, extra_postargs=self.c_flags)
                rebuilt = True
            objects.append(obj)
        return objects, rebuilt

    def fatbins_source(self, ext) -> tuple[str, bool]:
        """The fatbins and the C file holding them (build_fatbins), in the object folder."""
        ccbin = None
        if self.msvc:
            # nvcc preprocesses with the host compiler: the cl.exe that compiles the C files
            # (nvcc finds none itself unless run from a Visual Studio developer prompt).
            if not self.compiler.initialized:
                self.compiler.initialize()
            ccbin = self.compiler.cc
        return build_fatbins(self.build_temp, ext.include_dirs, self.headers_mtime, self.force, ccbin)

    def emulated_device_groups(self, cxx) -> list:
        """_C_emu's C++ sources with their flags.  With COMFY_KITCHEN_C_EMU_RACES=1, the
        shared-memory race detector (csrc/emu/emu_races.cpp): the kernel sources get GCC's
        ThreadSanitizer instrumentation, whose calls the emulator implements itself (no TSan
        runtime is linked, so it combines with no other sanitizer)."""
        kernels = gpu_kernel_sources()
        runtime = [s for s in emulated_device_sources() if s not in kernels]
        if not emu_races():
            if self.msvc or os.environ.get("COMFY_KITCHEN_C_SANITIZE"):
                return [(emulated_device_sources(), self.cxx_flags, cxx)]  # UBSan's own alignment check, if any
            # A GPU faults on a misaligned access: the kernels check theirs, the runtime handles it
            # (csrc/emu/emu_runtime.cpp, CKC_EMU_ALIGNMENT_CHECK).
            checked = self.cxx_flags + ["-DCKC_EMU_ALIGNMENT_CHECK=1"]
            return [(kernels, checked + ["-fsanitize=alignment"], cxx), (runtime, checked, cxx)]
        if self.msvc or os.environ.get("COMFY_KITCHEN_C_SANITIZE"):
            raise RuntimeError("COMFY_KITCHEN_C_EMU_RACES=1 needs GCC and no COMFY_KITCHEN_C_SANITIZE")
        flags = self.cxx_flags + ["-DCKC_EMU_RACE_DETECT=1"]
        instrument = ["-fsanitize=thread", "-Wno-tsan", "--param=tsan-instrument-func-entry-exit=0"]
        return [(kernels, flags + instrument, cxx), (runtime, flags, cxx)]


def extension(name: str, device: str, macros: list):
    x86 = [("CKC_HAVE_X86_ISAS", "1")] if is_x86_64() else []
    # libm: the kernels' tanhf and expf, not left to whatever the interpreter happened to load
    return Extension(name, sources=c_sources(device), include_dirs=["csrc"],
                     define_macros=[("Py_LIMITED_API", LIMITED_API)] + x86 + macros, py_limited_api=True,
                     libraries=[] if sys.platform == "win32" else ["m"])


# What the "cuda" device's C is compiled with (tools/windows/build.py cross-builds it too).
CUDA_MACROS = [("CKC_WITH_GPU", "1"), ("CKC_WITH_CUDA", "1")]


def cuda_extension():
    """_C, with the CUDA kernels (fatbins) and the CUDA driver seam when nvcc is found.
    Links no CUDA library: the driver is opened at run time (libdl for dlopen where glibc
    keeps it apart)."""
    if not NVCC:
        return extension("comfy_kitchen_c._C", "none", [])
    ext = extension("comfy_kitchen_c._C", "cuda", CUDA_MACROS)
    ext.libraries += [] if sys.platform == "win32" else ["dl", "pthread"]
    return ext

def emulated_extension():
    """_C_emu: POSIX only for now (the emulator's threads are ucontext coroutines; a
    Windows port needs Fibers), so Windows installs build _C alone; and only for
    development builds (BuildExt.finalize_options, emulated_device_wanted)."""
    if sys.platform == "win32":
        return []
    return [extension("comfy_kitchen_c._C_emu", "emu",
                      [("CKC_EMULATED", "1"), ("CKC_WITH_GPU", "1")])]


setup(
    ext_modules=[cuda_extension(), *emulated_extension()],
    cmdclass={"build_ext": BuildExt},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
