# SPDX-License-Identifier: Apache-2.0
"""The stand-in driver reads fatbins as the driver does (tests/cuda_standin/standin_image.c):
what it reads of the project's fatbins (entries; each kernel's parameters, launch bounds,
registers, static shared memory) matches cuobjdump, a PTX entry lays its kernels' parameters
out as the cubin does, the driver's rules pick the entry a device and driver version get,
and no truncated or corrupted image makes it read out of bounds.

Built at test time with gcc (tests/cuda_standin/image_dump.c prints JSON); the fatbins of
the choice rules are made from kernels/flight.cu with nvcc 13 and fatbinary, the CUDA 12
cubins with a CUDA 12 ptxas (/tmp/cu129 or the nvidia-cuda-nvcc-cu12 package).  Each part
skips when its tools or the project's built fatbins are missing."""
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "tests" / "cuda_standin"
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_model  # noqa: E402

NVCC = gpu_model.find_nvcc()
CUOBJDUMP = gpu_model.find_cuobjdump()
needs_cuobjdump = pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump not found (nor triton's copy)")

CCS = [(7, 5), (8, 6), (8, 9), (9, 0), (10, 0), (11, 0), (12, 0), (12, 1)]
DRIVERS = [12020, 12040, 12080, 13000]
NO_BINARY, UNSUPPORTED_PTX, INVALID_IMAGE = 209, 222, 200


# ---- the tool ----------------------------------------------------------------------------------

def build_dump(folder: Path, name: str, flags: list[str]) -> Path:
    cc = shutil.which("gcc")
    out = folder / name
    subprocess.run([cc, "-std=c11", "-O1", "-Wall", "-Wextra", "-Werror", *flags, str(STANDIN / "standin_image.c"),
                    str(STANDIN / "image_dump.c"), "-ldl", "-lpthread", "-o", str(out)], check=True)
    return out


@pytest.fixture(scope="module")
def dump_tool(tmp_path_factory):
    """{"plain": image_dump, "checked": image_dump under ASan and UBSan (the plain one where
    the sanitizers are missing)}."""
    if shutil.which("gcc") is None or sys.platform != "linux":
        pytest.skip("builds image_dump with gcc on Linux")
    folder = tmp_path_factory.mktemp("image_dump")
    tools = {"plain": build_dump(folder, "image_dump", [])}
    try:
        tools["checked"] = build_dump(folder, "image_dump_checked",
                                      ["-g", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"])
    except subprocess.CalledProcessError:
        tools["checked"] = tools["plain"]
    return tools


def dump(tool: Path, files, choices=(), unsized=False, env=None, timeout=60) -> list[dict]:
    """image_dump's JSON objects, one per file."""
    args = [str(tool)] + (["--unsized"] if unsized else [])
    for (major, minor), driver in choices:
        args += ["--choose", f"{major}.{minor}@{driver}"]
    out = subprocess.run(args + [str(f) for f in files], capture_output=True, text=True, timeout=timeout,
                         env=dict(os.environ, **(env or {})))
    assert out.returncode == 0, out.stderr[-3000:]
    return [json.loads(line) for line in out.stdout.splitlines()]


# ---- the project's fatbins and cuobjdump ---------------------------------------------------------

def real_fatbins() -> list[Path]:
    """The fatbins of the newest build (build/objects holds one folder per configuration built)."""
    folders = [f for f in ROOT.glob("build/objects/comfy_kitchen_c._C-*") if any(f.glob("*.fatbin"))]
    if not folders:
        return []
    return sorted(max(folders, key=lambda f: f.stat().st_mtime).glob("*.fatbin"))


def cuobjdump(*args) -> str:
    return subprocess.run([CUOBJDUMP, *args], capture_output=True, text=True, check=True, timeout=60).stdout


def headers(path: Path) -> list[dict]:
    """cuobjdump's header of each entry, in order: kind, arch, version, compressed, options."""
    found = []
    for kind, body in re.findall(r"Fatbin (ptx|elf) code:\n=+\n(.*?)(?=\nFatbin |\Z)", cuobjdump(str(path)), re.S):
        fields = dict(re.findall(r"^(\w[\w ]*?) = ?(.*)$", body, re.M))
        major, minor = re.match(r"\[(\d+),(\d+)\]", fields["code version"]).groups()
        found.append({"kind": kind, "arch": int(fields["arch"].removeprefix("sm_")),
                      "version": [int(major), int(minor)],
                      "compressed": re.search(r"^compressed$", body, re.M) is not None,
                      "options": fields.get("ptxasOptions")})
    return found


def nv_info_blocks(text: str) -> dict[str, list[tuple[str, str]]]:
    """{kernel: [(attribute, value text)]} of cuobjdump -elf's .nv.info.<kernel> sections."""
    blocks = {}
    for name, body in re.findall(r"^\.nv\.info\.(\S+)\n(.*?)(?=\n\n(?!\t)|\Z)", text, re.M | re.S):
        blocks[name] = re.findall(r"Attribute:\t(\w+)\n(?:\tFormat:\t\w+\n)?(?:\tValue:\t(.*?))?(?=\n\t<|\Z)",
                                  body, re.S)
    return blocks


def elf_records(text: str) -> dict:
    """One ELF of cuobjdump -elf: its header fields and each kernel's records."""
    head = re.search(r"(?:ABI|abi)=(\d+), sm=(\d+), toolkit=([\d.]+)", text)
    abi, sm, toolkit = int(head[1]), int(head[2]), head[3]
    major, minor = toolkit.split(".") if "." in toolkit else (toolkit[:-1], toolkit[-1])
    shared = {m[2]: int(m[1], 16) for m in re.finditer(r"^\s+[0-9a-f]+\s+[0-9a-f]+\s+([0-9a-f]+)\s+(?:\S+\s+){6}"
                                                        r"\.nv\.shared\.(\S+)$", text, re.M)}
    kernels = {}
    for name, attrs in nv_info_blocks(text).items():
        params, rec = {}, {"max_threads": 0, "reqntid": [0, 0, 0], "max_registers": 0, "param_bytes": None}
        for attr, value in attrs:
            numbers = [int(v, 16) for v in re.findall(r"0x[0-9a-f]+", value)]
            if attr in ("EIATTR_KPARAM_INFO", "EIATTR_KPARAM_INFO_V2"):
                m = re.search(r"Ordinal\s*:\s*(0x[0-9a-f]+)\s+Offset\s*:\s*(0x[0-9a-f]+)\s+Size\s*:\s*(0x[0-9a-f]+)",
                              value)
                params[int(m[1], 16)] = (int(m[2], 16), int(m[3], 16))
            elif attr == "EIATTR_CBANK_PARAM_SIZE":
                rec["param_bytes"] = numbers[0]
            elif attr == "EIATTR_MAX_THREADS":
                rec["max_threads"] = numbers[0] * numbers[1] * numbers[2]
            elif attr == "EIATTR_REQNTID":
                rec["reqntid"] = numbers[:3]
                rec["max_threads"] = rec["max_threads"] or numbers[0] * numbers[1] * numbers[2]
            elif attr == "EIATTR_MAXREG_COUNT":
                rec["max_registers"] = 0 if numbers[0] >= 255 else numbers[0]
        rec["params"] = [params[i] for i in range(len(params))]
        rec["static_shared"] = shared.get(name, 0)
        kernels[name] = rec
    return {"abi": abi, "arch": sm, "cuda": 1000 * int(major) + 10 * int(minor), "kernels": kernels}


def res_usage(text: str) -> dict:
    """{kernel: (registers, static shared)} of one ELF's cuobjdump -res-usage block: the functions
    with a constant bank 0 (their parameters), which device functions lack."""
    return {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(
        r"Function (\S+):\n\s+REG:(\d+) STACK:\d+ SHARED:(\d+) LOCAL:\d+ [^\n]*CONSTANT\[0\]:\d+", text)}


def cuobjdump_view(path: Path) -> dict:
    """What cuobjdump says of a fatbin: its entries' headers, and per ELF (in order) its records."""
    elves = [elf_records(t) for t in cuobjdump("-elf", str(path)).split("Fatbin elf code:")[1:]]
    usage = [res_usage(t) for t in re.split(r"Fatbin (?:ptx|elf) code:", cuobjdump("-res-usage", str(path)))
             if "Resource usage" in t]
    for elf, use in zip(elves, usage, strict=True):
        for name, (registers, shared) in use.items():
            no_info = {"params": [], "param_bytes": None, "max_threads": 0, "reqntid": [0, 0, 0], "max_registers": 0,
                       "static_shared": 0}
            elf["kernels"].setdefault(name, no_info).update(registers=registers, shared_usage=shared)
        elf["names"] = set(use)
    return {"headers": headers(path), "elves": elves}


def compare_with_cuobjdump(mine: dict, view: dict) -> tuple[int, int]:
    """Asserts that image_dump's reading of a fatbin matches cuobjdump's; (kernels, parameters) compared."""
    assert mine["code"] == 0, mine["why"]
    entries = mine["entries"]
    assert [(e["kind"], e["arch"], e["version"], e["compression"] != "none") for e in entries] == \
        [(h["kind"], h["arch"], h["version"], h["compressed"]) for h in view["headers"]], mine["file"]
    for e, h in zip(entries, view["headers"]):
        if e["kind"] == "ptx":
            assert e["options"] == (h["options"] or ""), (e["options"], h["options"])
    kernels = params = 0
    for e, elf in zip([e for e in entries if e["kind"] == "elf"], view["elves"], strict=True):
        m = e["module"]
        assert m["code"] == 0, m["why"]
        assert (m["arch"], m["abi_version"], m["cuda_version"]) == (elf["arch"], elf["abi"], elf["cuda"])
        assert {f["name"] for f in m["functions"]} == elf["names"]
        for f in m["functions"]:
            rec = elf["kernels"][f["name"]]
            assert [(p["offset"], p["size"]) for p in f["params"]] == rec["params"], f["name"]
            expected_bytes = rec["param_bytes"] if rec["param_bytes"] is not None else 0
            assert (f["param_bytes"], f["max_threads"], f["reqntid"], f["max_registers"]) == \
                (expected_bytes, rec["max_threads"], rec["reqntid"], rec["max_registers"]), f["name"]
            assert (f["registers"], f["static_shared"]) == (rec["registers"], rec["static_shared"]), f["name"]
            assert f["static_shared"] == rec["shared_usage"], f["name"]
            kernels += 1
            params += len(f["params"])
    return kernels, params


def compare_ptx_with_cubin(mine: dict) -> int:
    """Asserts that the PTX entries' kernels lay parameters out as the cubins do; kernels compared."""
    by_kind = {}
    for e in mine["entries"]:
        assert e["module"]["code"] == 0, e["module"]["why"]
        by_kind.setdefault(e["kind"], []).append((e["arch"], {f["name"]: f for f in e["module"]["functions"]}))
    compared = 0
    for ptx_arch, ptx in by_kind.get("ptx", []):
        for elf_arch, elf in by_kind.get("elf", []):
            assert set(ptx) == set(elf), mine["file"]
            for name, p in ptx.items():
                e = elf[name]
                assert [(q["offset"], q["size"]) for q in p["params"]] == \
                    [(q["offset"], q["size"]) for q in e["params"]], name
                assert all(q["offset"] % q["align"] == 0 for q in p["params"]), name
                assert (p["param_bytes"], p["max_threads"], p["reqntid"]) == \
                    (e["param_bytes"], e["max_threads"], e["reqntid"]), name
                # ptxas may cap registers itself (from a minimum of blocks per SM): only .maxnreg carries over,
                # and only into the SASS of the PTX's own architecture (another's may be capped its own way:
                # Thor's plain quantizer, kernels/int8_tile.cu)
                if elf_arch == ptx_arch:
                    assert p["max_registers"] in (0, e["max_registers"]), name
                compared += 1
    return compared


@needs_cuobjdump
def test_the_project_fatbins_read_as_cuobjdump_reads_them(dump_tool):
    fatbins = real_fatbins()
    if not fatbins:
        pytest.skip("no fatbins built (build/objects/comfy_kitchen_c._C-*/*.fatbin)")
    kernels = params = 0
    for mine in dump(dump_tool["plain"], fatbins):
        k, p = compare_with_cuobjdump(mine, cuobjdump_view(Path(mine["file"])))
        kernels, params = kernels + k, params + p
    assert kernels >= len(fatbins) and params > kernels


def test_the_project_ptx_lays_parameters_out_as_its_cubin(dump_tool):
    fatbins = real_fatbins()
    if not fatbins:
        pytest.skip("no fatbins built (build/objects/comfy_kitchen_c._C-*/*.fatbin)")
    sized = dump(dump_tool["plain"], fatbins, choices=[((12, 0), 13000)])
    assert sum(compare_ptx_with_cubin(m) for m in sized) >= len(fatbins)
    # cuModuleLoadData's image has no length: read from its headers, it is the same
    unsized = dump(dump_tool["plain"], fatbins, choices=[((12, 0), 13000)], unsized=True)
    assert [m["entries"] for m in unsized] == [m["entries"] for m in sized]
    assert [m["choices"] for m in unsized] == [m["choices"] for m in sized]
    assert all(m["choices"][0]["code"] == 0 and m["entries"][m["choices"][0]["index"]]["kind"] == "elf"
               for m in sized)


# ---- fatbins made from a tiny kernel -------------------------------------------------------------

# Kernels whose records cover what the project's do not: a device function (no kernel), a
# weak template instance, shared memory, a register cap, a parameter too large for
# EIATTR_KPARAM_INFO (EIATTR_KPARAM_INFO_V2), bytes of padding between parameters, and (added
# to the PTX, which CUDA C++ has no spelling for) a required block shape.
FEATURES = r"""
extern "C" __device__ __noinline__ float helper(float *p, int i) { return p[i] * 2.0f; }
extern "C" __global__ void __launch_bounds__(128, 2) bounded(float *p, int n, double d, char c) {
    __shared__ float s[100]; s[threadIdx.x] = helper(p, n) + d + c; __syncthreads();
    p[threadIdx.x] = s[(threadIdx.x + 1) % 100]; }
extern "C" __global__ void __maxnreg__(40) capped(float4 v, short s, float *p) { p[0] = v.x + s; }
struct Big { char b[5000]; };
extern "C" __global__ void large(Big b, float *p) { p[0] = b.b[threadIdx.x]; }
template <int N> __global__ void __launch_bounds__(64) templated(int *p) { p[0] = N; }
template __global__ void templated<3>(int *);
extern "C" __global__ void padded(char a, short b, char c, double d, char e) { }
extern "C" __global__ void none() { }
"""


def run(*args):
    subprocess.run([str(a) for a in args], check=True, capture_output=True, timeout=120)


def nvcc(out: Path, mode: str, arch: str, source: Path) -> Path:
    run(NVCC, "-std=c++17", "-O3", "--fmad=false", mode, f"-I{ROOT / 'csrc'}", f"-arch={arch}", source, "-o", out)
    return out


def fatbin(out: Path, mode: str, images: list[tuple[str, int, Path]]) -> Path:
    compress = ["-compress-all", f"--compress-mode={mode}"] if mode != "none" else ["--compress-mode=none"]
    run(shutil.which("fatbinary") or Path(NVCC).parent / "fatbinary", f"--create={out}", "-64", *compress,
        *[f"--image3=kind={kind},sm={sm},file={path}" for kind, sm, path in images])
    return out


def cuda13():
    fatbinary = shutil.which("fatbinary") or (NVCC and Path(NVCC).parent / "fatbinary")
    if NVCC is None or not fatbinary or not Path(fatbinary).is_file():
        pytest.skip("needs nvcc and fatbinary")
    version = subprocess.run([NVCC, "--version"], capture_output=True, text=True).stdout
    if "release 13." not in version:
        pytest.skip("needs CUDA 13's nvcc (its PTX ISA 9.0 and ELF ABI 8)")


def find_ptxas12() -> Path | None:
    candidates = [Path("/tmp/cu129/nvidia/cuda_nvcc/bin/ptxas")]
    spec = importlib.util.find_spec("nvidia")
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "cuda_nvcc" / "bin" / "ptxas" for p in spec.submodule_search_locations]
    for ptxas in candidates:
        if ptxas.is_file():
            version = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
            if "release 12." in version:
                return ptxas
    return None


def with_isa(ptx: Path, isa: str, out: Path) -> Path:
    out.write_text(re.sub(r"^\.version 9\.0$", f".version {isa}", ptx.read_text(), flags=re.M))
    return out


@pytest.fixture(scope="module")
def made13(tmp_path_factory):
    """Fatbins from nvcc 13: {name: (path, [(kind, arch, cuda major or PTX ISA, compression)])}."""
    cuda13()
    d = tmp_path_factory.mktemp("made13")
    flight = ROOT / "kernels" / "flight.cu"
    (d / "features.cu").write_text(FEATURES)
    p120, c120 = nvcc(d / "p120.ptx", "-ptx", "compute_120", flight), nvcc(d / "c120.cubin", "-cubin", "sm_120", flight)
    p90 = nvcc(d / "p90.ptx", "-ptx", "compute_90", flight)
    run(Path(NVCC).parent / "ptxas", "--fmad=false", "-O3", "-arch=sm_110", p90, "-o", d / "c110.cubin")
    fp = nvcc(d / "features.ptx", "-ptx", "compute_90", d / "features.cu")
    fp.write_text(re.sub(r"(\.entry padded\([^)]*\))", r"\1\n.reqntid 32, 2, 1", fp.read_text()))
    run(Path(NVCC).parent / "ptxas", "--fmad=false", "-O3", "-arch=sm_90", fp, "-o", d / "features.cubin")
    fc = d / "features.cubin"
    return {"dir": d, "p90": p90, "p120": p120, "c120": c120, "c110": d / "c110.cubin",
            "project": (fatbin(d / "project.fatbin", "default", [("elf", 120, c120), ("ptx", 120, p120)]),
                        [("elf", 120, 13, "zstd"), ("ptx", 120, (9, 0), "zstd")]),
            "features": (fatbin(d / "features.fatbin", "speed", [("elf", 90, fc), ("ptx", 90, fp)]),
                         [("elf", 90, 13, "lz4"), ("ptx", 90, (9, 0), "lz4")])}


@pytest.fixture(scope="module")
def made12(made13):
    """Fatbins holding CUDA 12 cubins (ptxas 12) beside CUDA 13's, as made13."""
    ptxas = find_ptxas12()
    if ptxas is None:
        pytest.skip("needs a CUDA 12 ptxas (/tmp/cu129 or the nvidia-cuda-nvcc-cu12 package)")
    d = made13["dir"]
    p90 = with_isa(made13["p90"], "8.8", d / "p90_88.ptx")
    p75 = with_isa(nvcc(d / "p75.ptx", "-ptx", "compute_75", ROOT / "kernels" / "flight.cu"), "8.0", d / "p75_80.ptx")
    for arch, ptx in (("sm_90", p90), ("sm_100", p90), ("sm_86", p75)):
        run(ptxas, "--fmad=false", "-O3", f"-arch={arch}", ptx, "-o", d / f"c{arch[3:]}_12.cubin")
    c90, c100, c86 = d / "c90_12.cubin", d / "c100_12.cubin", d / "c86_12.cubin"
    c110, c120, p120 = made13["c110"], made13["c120"], made13["p120"]
    mixed = [("elf", 86, c86), ("elf", 90, c90), ("elf", 100, c100), ("elf", 110, c110), ("elf", 120, c120),
             ("ptx", 75, p75), ("ptx", 120, p120)]
    return {"dir": d, "c90": c90, "p75": p75,
            "sm90_lz4": (fatbin(d / "sm90_lz4.fatbin", "speed", [("elf", 90, c90)]), [("elf", 90, 12, "lz4")]),
            "sm90_zstd": (fatbin(d / "sm90_zstd.fatbin", "default", [("elf", 90, c90)]), [("elf", 90, 12, "zstd")]),
            "mixed": (fatbin(d / "mixed.fatbin", "none", mixed),
                      [("elf", 86, 12, "none"), ("elf", 90, 12, "none"), ("elf", 100, 12, "none"),
                       ("elf", 110, 13, "none"), ("elf", 120, 13, "none"), ("ptx", 75, (8, 0), "none"),
                       ("ptx", 120, (9, 0), "none")]),
            "blackwell": (fatbin(d / "blackwell.fatbin", "none", [("elf", 110, c110), ("elf", 100, c100),
                                                                   ("ptx", 120, p120)]),
                          [("elf", 110, 13, "none"), ("elf", 100, 12, "none"), ("ptx", 120, (9, 0), "none")])}


ISA_CUDA = {(8, 0): 12000, (9, 0): 13000}


def expected_choice(spec, cc, driver):
    """The rules, as the driver states them: (CUresult, index of the entry loaded or -1)."""
    def reads(zip_):
        return zip_ != "zstd" or driver >= 12040

    def best(indices):
        return max(indices, key=lambda i: (spec[i][1], -i))

    sass = [i for i, (kind, arch, cuda, zip_) in enumerate(spec) if kind == "elf" and arch // 10 == cc[0]
            and arch % 10 <= cc[1] and reads(zip_) and driver // 1000 >= cuda]
    if sass:
        return 0, best(sass)
    arch_ok = [i for i, (kind, arch, _, _) in enumerate(spec) if kind == "ptx" and arch <= 10 * cc[0] + cc[1]]
    ptx = [i for i in arch_ok if driver >= ISA_CUDA[spec[i][2]] and reads(spec[i][3])]
    if ptx:
        return 0, best(ptx)
    return (UNSUPPORTED_PTX if any(driver < ISA_CUDA[spec[i][2]] for i in arch_ok) else NO_BINARY), -1


def choices_of(dump_tool, made: dict, names: list[str]) -> dict[str, dict]:
    """{name: {(cc, driver): choice}} for every compute capability and driver of the matrix."""
    matrix = [(cc, driver) for cc in CCS for driver in DRIVERS]
    out = dump(dump_tool["plain"], [made[n][0] for n in names], choices=matrix)
    return {n: {(tuple(c["cc"]), c["driver"]): c for c in o["choices"]} for n, o in zip(names, out)}


def check_matrix(got: dict, made: dict):
    for name, choices in got.items():
        for (cc, driver), c in choices.items():
            assert (c["code"], c["index"]) == expected_choice(made[name][1], cc, driver), (name, cc, driver, c)


def test_the_choice_of_a_cuda13_fatbin(dump_tool, made13):
    got = choices_of(dump_tool, made13, ["project", "features"])
    check_matrix(got, made13)
    project = got["project"]
    refused = project[((11, 0), 13000)]
    assert refused["code"] == NO_BINARY
    assert "sm_120 SASS: compute capability 11.0 has another major" in refused["why"]
    assert "compute_120 PTX: compute capability 11.0 is lower" in refused["why"]
    old = project[((12, 1), 12080)]
    assert old["code"] == UNSUPPORTED_PTX
    assert "sm_120 SASS: built by CUDA 13.0 (ELF ABI 8), the driver is CUDA 12.8" in old["why"]
    assert "compute_120 PTX: PTX ISA 9.0 needs CUDA 13.0, the driver is CUDA 12.8" in old["why"]
    assert project[((12, 1), 13000)]["index"] == 0 and project[((12, 0), 13000)]["why"] == "sm_120 SASS"


def test_the_choice_among_cuda12_and_cuda13_images(dump_tool, made12):
    got = choices_of(dump_tool, made12, ["sm90_lz4", "sm90_zstd", "mixed", "blackwell"])
    check_matrix(got, made12)
    # zstd needs driver 550 (CUDA 12.4); LZ4 any
    assert got["sm90_lz4"][((9, 0), 12020)]["code"] == 0
    zstd_old = got["sm90_zstd"][((9, 0), 12020)]
    assert zstd_old["code"] == NO_BINARY
    assert "sm_90 SASS: zstd-compressed, which needs CUDA 12.4, the driver is CUDA 12.2" in zstd_old["why"]
    assert got["sm90_zstd"][((9, 0), 12040)]["code"] == 0
    # CUDA 12.9's ptxas writes ELF ABI 8 for sm_100 too: the toolkit, not the ABI, decides
    assert got["blackwell"][((10, 0), 12080)]["index"] == 1
    refused = got["blackwell"][((11, 0), 12080)]
    assert refused["code"] == NO_BINARY
    assert "sm_110 SASS: built by CUDA 13.0 (ELF ABI 8), the driver is CUDA 12.8" in refused["why"]
    assert "sm_100 SASS: compute capability 11.0 has another major" in refused["why"]
    # SASS first, of the highest usable arch; PTX only without one, of an ISA the driver reads
    assert got["mixed"][((8, 9), 12020)]["index"] == 0
    assert got["mixed"][((12, 1), 13000)]["index"] == 4
    assert got["mixed"][((12, 1), 12080)]["index"] == 5


@needs_cuobjdump
def test_made_fatbins_read_as_cuobjdump_reads_them(dump_tool, made13, made12):
    names = ["project", "features", "sm90_lz4", "mixed"]
    made = {**made13, **made12}
    for mine in dump(dump_tool["plain"], [made[n][0] for n in names]):
        compare_with_cuobjdump(mine, cuobjdump_view(Path(mine["file"])))
        compare_ptx_with_cubin(mine)
    features = {f["name"]: f for f in dump(dump_tool["plain"], [made["features"][0]])[0]["entries"][0]["module"]
                ["functions"]}
    assert set(features) == {"bounded", "capped", "large", "_Z9templatedILi3EEvPi", "padded", "none"}
    assert features["bounded"]["max_threads"] == 128 and features["bounded"]["static_shared"] >= 400
    assert features["capped"]["max_registers"] == 40
    assert [p["size"] for p in features["large"]["params"]] == [5000, 8]
    assert [p["offset"] for p in features["padded"]["params"]] == [0, 2, 4, 8, 16]
    assert features["padded"]["param_bytes"] == 17 and features["none"]["params"] == []
    assert features["padded"]["reqntid"] == [32, 2, 1] and features["padded"]["max_threads"] == 64


def test_bare_cubins_and_ptx_load_as_one_entry(dump_tool, made13):
    cubin, ptx = made13["c120"], made13["p120"]
    for mine, kind in zip(dump(dump_tool["plain"], [cubin, ptx], choices=[((12, 0), 13000)]), ("elf", "ptx")):
        assert mine["code"] == 0 and mine["entries"][0]["kind"] == kind, mine
        assert mine["choices"][0]["code"] == 0 and len(mine["entries"][0]["module"]["functions"]) == 2
    for mine in dump(dump_tool["plain"], [cubin, ptx], unsized=True):
        assert mine["code"] == 0 and mine["image_size"] == Path(mine["file"]).stat().st_size


def test_without_libzstd_a_zstd_entry_says_so(dump_tool, made13):
    mine = dump(dump_tool["plain"], [made13["project"][0]], choices=[((12, 0), 13000)],
                env={"CKCSI_LIBZSTD": "libzstd-missing.so.1"})[0]
    assert all(e["module"]["code"] == INVALID_IMAGE and "libzstd is missing" in e["module"]["why"]
               for e in mine["entries"])
    assert mine["choices"][0]["code"] == INVALID_IMAGE and "libzstd is missing" in mine["choices"][0]["why"]
    lz4 = dump(dump_tool["plain"], [made13["features"][0]], env={"CKCSI_LIBZSTD": "libzstd-missing.so.1"})[0]
    assert all(e["module"]["code"] == 0 for e in lz4["entries"])


# ---- corrupt images ----------------------------------------------------------------------------

def patched(data: bytes, at: int, value: bytes) -> bytes:
    return data[:at] + value + data[at + len(value):]


def test_corrupt_images_are_refused_with_a_reason(dump_tool, made13, tmp_path):
    project = made13["project"][0].read_bytes()
    entry = 16  # the first entry's header: its decompressed size at +56
    size = int.from_bytes(project[entry + 56:entry + 64], "little")
    cases = {
        "short": (project[:10], "container at byte 0: 10 bytes"),
        "magic": (patched(project, 0, b"\0\0\0\0"), "neither a fatbin nor a cubin, nor PTX text"),
        "truncated": (project[:-40], "bytes of entries, the image ends"),
        "inflated": (patched(project, entry + 56, (size + 1).to_bytes(8, "little")),
                     f"decompresses to {size} bytes, the header says {size + 1}"),
    }
    for name, (data, _) in cases.items():
        (tmp_path / f"{name}.bin").write_bytes(data)
    results = dump(dump_tool["checked"], [tmp_path / f"{n}.bin" for n in cases])
    for (name, (_, why)), mine in zip(cases.items(), results):
        whys = [mine["why"]] + [e["module"]["why"] for e in mine["entries"]]
        assert any(why in w for w in whys), (name, whys)
        assert mine["code"] == INVALID_IMAGE or any(e["module"]["code"] == INVALID_IMAGE for e in mine["entries"])


def mutants(data: bytes, rng: random.Random):
    """Truncations (every byte of the headers, then a spread) and flipped or overwritten bytes."""
    for n in sorted(set(range(1, min(len(data), 160))) | set(range(1, len(data), max(1, len(data) // 120)))):
        yield data[:n]
    for _ in range(250):
        at = rng.randrange(len(data))
        yield patched(data, at, bytes([data[at] ^ (1 << rng.randrange(8))]))
    for _ in range(80):
        at = rng.randrange(len(data))
        yield patched(data, at, rng.randbytes(4))[:len(data)]


def test_truncated_and_corrupted_images_never_read_out_of_bounds(dump_tool, made13, tmp_path):
    """Under ASan and UBSan where available: every mutant is read to an answer (an image, or
    CUDA_ERROR_INVALID_IMAGE), none crashes, none hangs."""
    seeds = [made13["project"][0], made13["features"][0], made13["c120"], made13["p120"]]
    rng = random.Random(20240601)
    files = []
    for seed in seeds:
        for data in mutants(seed.read_bytes(), rng):
            files.append(tmp_path / f"m{len(files)}{seed.suffix}")
            files[-1].write_bytes(data)
    results = dump(dump_tool["checked"], files, choices=[((12, 0), 13000), ((9, 0), 12020)], timeout=120)
    assert len(results) == len(files)
    for mine in results:
        assert mine["code"] in (0, INVALID_IMAGE), mine
        assert all(e["module"]["code"] in (0, INVALID_IMAGE) for e in mine["entries"]), mine
        assert all(c["code"] in (0, INVALID_IMAGE, NO_BINARY, UNSUPPORTED_PTX) for c in mine.get("choices", []))
        assert mine["code"] == 0 or mine["why"]
