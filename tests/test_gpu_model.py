# SPDX-License-Identifier: Apache-2.0
"""The limits of issue 11 on the memory-bound kernels' machine code, read by the performance
model (benchmarks/gpu_model.py) for sm_90 (H200) and sm_120 (RTX 5070 Ti), bfloat16 at
M = 4096, K = 14336 and 3072:

* at most 18 instructions per element for the plain int8 row quantizer and 26 for the
  rotated one (G = 256), each deterministic;
* every global load of a thread issued before the first use of any loaded value (one DRAM
  round trip per thread);
* no register spills, no stack frame, no local memory (in every kernel of kernels/*.cu, modelled
  or not), and element loads of 64 or 128 bits in the element kernels the model does not plan
  (gpu_model.VECTOR_KERNELS: FP8, RoPE and the later formats'), but for their scalar fallbacks;
* enough bytes in flight per SM to cover 800 ns of DRAM latency at the datasheet bandwidth
  (H200: 4.8 TB/s x 800 ns / 132 SMs = 29 KB; 5070 Ti: 896 GB/s x 800 ns / 70 = 10 KB);
* at most 48 registers for the plain row quantizer (issue 22, item 3: three blocks per SM).

Each check is shown to fail on a planted kernel that breaks it (test_each_limit_catches_...).
Needs nvcc and a cuobjdump (triton ships one), no GPU; the compiled code is cached under
build/gpu_model/."""
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_model as model  # noqa: E402
import sass_paths  # noqa: E402

pytestmark = pytest.mark.skipif(model.find_nvcc() is None or model.find_cuobjdump() is None,
                                reason="needs nvcc and cuobjdump")

GPUS = ("h200", "rtx5070ti")
SHAPES = ((4096, 14336), (4096, 3072))


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("m,k", SHAPES)
@pytest.mark.parametrize("op,limit", sorted(model.INSTRUCTION_LIMITS.items()))
def test_instructions_per_element(op, limit, gpu, m, k):
    for launch, kern, met in model.hot_launches(op, m, k, gpu):
        per_element = met["per_element"]["total"]
        assert per_element <= limit, f"{op} on sm_{kern.arch} ({kern.name}{kern.args}): {per_element:.1f} " \
                                     f"instructions per element, limit {limit}"


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("op,limit", sorted(model.REGISTER_LIMITS.items()))
def test_registers(op, limit, gpu):
    for launch, kern, met in model.hot_launches(op, 4096, 14336, gpu):
        assert not model.register_problems(op, kern), f"{kern.registers} registers, limit {limit}"
        assert met["blocks_per_sm"] * launch.threads >= 3 * 448, "three blocks of a 14336-value row per SM"


def test_the_register_limit_names_a_kernel_above_it():
    def kernel(registers):
        return model.Kernel("ckc_tile_rows_kernel__2_0_0_0", "ckc_tile_rows_kernel", (2, 0, 0, 0), "90",
                            "int8_tile.cu", [], registers=registers)

    assert model.register_problems("quantize_int8_rowwise", kernel(56)) == [
        "quantize_int8_rowwise: ckc_tile_rows_kernel(2, 0, 0, 0) on sm_90: 56 registers, limit 48"]
    assert model.register_problems("quantize_int8_rowwise", kernel(48)) == []


@pytest.mark.parametrize("commit,walk", [(None, True), (model.MEASURED_COMMIT, False)])
def test_plain_rows_past_one_pass_are_planned_where_the_launcher_sends_them(commit, walk):
    """Since the warp walk (31c267e) launch_tile.c sends a plain row of more than 32768 values to
    the general kernels; before, the tile kernel took it in segments.  Rotated rows stay tiled."""
    ks = model.kernels(commit)
    assert model.plain_rows_in_one_pass(commit) is walk
    for k, tiled in ((32768, True), (33024, not walk)):
        plan = model.plan_for("quantize_int8_rowwise", 4096, k, "bfloat16", 0, None, ks, "90", commit)
        assert [launch.name == "ckc_tile_rows_kernel" for launch in plan.launches] == [tiled], (k, plan)
    rotated = model.plan_for("quantize_and_rotate_rowwise", 4096, 33024, "bfloat16", 256, None, ks, "90", commit)
    assert [launch.name for launch in rotated.launches] == ["ckc_tile_rows_kernel"]


@pytest.mark.parametrize("gpu", GPUS)
@pytest.mark.parametrize("m,k", SHAPES)
@pytest.mark.parametrize("op", model.HOT_OPS)
def test_memory_limits(op, gpu, m, k):
    """Loads before first use, no spills or local memory, bytes in flight per SM."""
    problems = [p for launch, kern, met in model.hot_launches(op, m, k, gpu)
                for p in model.limit_problems(launch, kern, met, model.GPUS[gpu])]
    assert not problems, "\n".join(problems)


# Planted regressions: each breaks one limit the way the kernels before issue 11's redesign did.
PLANTED = textwrap.dedent("""
    #include <stdint.h>
    #include "math/int8_quant.h"
    struct __align__(16) w4 { uint32_t w[4]; };
    __device__ __forceinline__ float lo(uint32_t w) { return __uint_as_float(w << 16); }
    __device__ __forceinline__ float hi(uint32_t w) { return __uint_as_float(w & 0xFFFF0000u); }

    /* codes by ckc_int8_code, dividing every value (the quantizer before the reciprocal):
       instructions */
    __global__ void __launch_bounds__(256) planted_divide(const w4 *x, w4 *q, float s) {
        const w4 a = x[2 * threadIdx.x], b = x[2 * threadIdx.x + 1];
        const uint32_t in[8] = {a.w[0], a.w[1], a.w[2], a.w[3], b.w[0], b.w[1], b.w[2], b.w[3]};
        w4 out;
        for (int i = 0; i < 4; i++) {
            const uint32_t c0 = (uint8_t)ckc_int8_code(lo(in[2 * i]), s, CKC_BF16);
            const uint32_t c1 = (uint8_t)ckc_int8_code(hi(in[2 * i]), s, CKC_BF16);
            const uint32_t c2 = (uint8_t)ckc_int8_code(lo(in[2 * i + 1]), s, CKC_BF16);
            const uint32_t c3 = (uint8_t)ckc_int8_code(hi(in[2 * i + 1]), s, CKC_BF16);
            out.w[i] = c0 | c1 << 8 | c2 << 16 | c3 << 24;
        }
        q[threadIdx.x] = out;
    }

    /* uses its first load before issuing the second (one chunk at a time): loads first */
    __global__ void __launch_bounds__(256) planted_late_load(const w4 *x, w4 *q) {
        const w4 a = x[2 * threadIdx.x];
        const uint32_t m = __shfl_xor_sync(0xffffffffu, a.w[0], 1);
        const w4 b = x[2 * threadIdx.x + 1 + (m & 1)];
        q[threadIdx.x] = w4{{a.w[0] ^ b.w[0], a.w[1] ^ b.w[1], a.w[2] ^ b.w[2], a.w[3] ^ b.w[3]}};
    }

    /* indexes a register array at run time: local memory */
    __global__ void __launch_bounds__(256) planted_local(const w4 *x, w4 *q, int k) {
        const w4 a = x[2 * threadIdx.x], b = x[2 * threadIdx.x + 1];
        uint32_t in[8] = {a.w[0], a.w[1], a.w[2], a.w[3], b.w[0], b.w[1], b.w[2], b.w[3]};
        in[k & 7] += 1;
        q[threadIdx.x] = w4{{in[k & 3], in[(k + 1) & 7], in[(k + 2) & 7], in[(k + 3) & 7]}};
    }

    /* one element per thread and load, in a kernel held to vector loads */
    __global__ void __launch_bounds__(256) planted_scalar(const uint16_t *x, uint16_t *q) {
        q[blockIdx.x * 256 + threadIdx.x] = x[blockIdx.x * 256 + threadIdx.x] ^ 1;
    }

    /* 4 bytes per thread: too little in flight */
    __global__ void __launch_bounds__(256) planted_thin(const uint32_t *x, w4 *q) {
        const uint32_t a = x[threadIdx.x];
        q[threadIdx.x] = w4{{a, a, a, a}};
    }
""")


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    tree = tmp_path_factory.mktemp("planted")
    (tree / "csrc" / "math").mkdir(parents=True)
    (tree / "kernels").mkdir()
    for header in ("int8_quant.h", "float_bits.h", "ckc_inline.h"):
        (tree / "csrc" / "math" / header).write_text((ROOT / "csrc" / "math" / header).read_text())
    source = tree / "kernels" / "planted.cu"
    source.write_text(PLANTED)
    return {arch: model.kernels_of(tree, [source], (arch,)) for arch in ("90", "120")}


def planted_metrics(planted, name, gpu):
    g = model.GPUS[gpu]
    kern = model.find_kernel(planted[g.arch], g.arch, name)
    launch = model.Launch(name, (), 256, 4096, 16, 2, 1, load_bytes=32 if name != "planted_thin" else 0)
    return launch, kern, model.launch_metrics(launch, kern, g)


@pytest.mark.parametrize("gpu", GPUS)
def test_each_limit_catches_a_planted_regression(planted, gpu):
    g = model.GPUS[gpu]
    _, _, met = planted_metrics(planted, "planted_divide", gpu)
    assert met["per_element"]["total"] > model.INSTRUCTION_LIMITS["quantize_int8_rowwise"], met["per_element"]
    expected = {"planted_late_load": "loads", "planted_local": "local", "planted_thin": "in flight"}
    for name, word in expected.items():
        problems = model.limit_problems(*planted_metrics(planted, name, gpu), g)
        assert any(word in p for p in problems), f"{name} on sm_{g.arch}: {problems}"
    # and the kernel that breaks nothing but its instruction count passes the memory limits
    assert not model.limit_problems(*planted_metrics(planted, "planted_divide", gpu), g)


def test_hot_path_of_a_planted_kernel_is_what_the_thread_runs(planted):
    """The path the model counts on: both loads of planted_divide, its store, no division slow path."""
    kern = model.find_kernel(planted["90"], "90", "planted_divide")
    path = [ins for b in sass_paths.hot_path(kern.instrs, 32) for ins in b.instrs]
    assert sum(ins.is_global_load() and ins.width() == 128 for ins in path) == 2
    assert sum(ins.is_global_store() and ins.width() == 128 for ins in path) == 1
    assert not any(ins.base == "CALL" for ins in path)


def test_every_kernel_is_held_to_the_limits_without_a_model():
    """Spills, stack, local memory: every kernel of kernels/*.cu; vector element loads: the
    element kernels of the formats the model does not plan (VECTOR_KERNELS)."""
    problems = [p for kern in model.kernels().values() for p in model.kernel_problems(kern)]
    assert not problems, "\n".join(problems)
    names = {kern.name for kern in model.kernels().values()}
    assert model.VECTOR_KERNELS <= names, f"listed but not built: {model.VECTOR_KERNELS - names}"


def test_the_every_kernel_limits_catch_planted_kernels(planted, monkeypatch):
    monkeypatch.setattr(model, "VECTOR_KERNELS", model.VECTOR_KERNELS | {"planted_scalar", "planted_divide"})
    for arch in ("90", "120"):
        assert any("local memory" in p for p in model.kernel_problems(model.find_kernel(planted[arch], arch,
                                                                                           "planted_local")))
        assert any("not vectorized" in p for p in model.kernel_problems(model.find_kernel(planted[arch], arch,
                                                                                            "planted_scalar")))
        assert not model.kernel_problems(model.find_kernel(planted[arch], arch, "planted_divide"))
