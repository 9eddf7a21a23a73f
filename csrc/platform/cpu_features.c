/* SPDX-License-Identifier: Apache-2.0 */
/* CPUID queries, per compiler: MSVC intrinsics, or GCC/clang builtins. */
#include "cpu_features.h"

#if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#include <immintrin.h>
#include <intrin.h>

/* CPUID leaf 7's EBX, or 0 when the OS does not save the vector state whose
 * bits `xcr0` names (YMM: bits 1, 2; ZMM adds opmask and the upper ZMM halves:
 * bits 5, 6, 7). */
static int
leaf7_ebx(unsigned xcr0)
{
    int r[4];
    __cpuid(r, 0);
    if (r[0] < 7) {
        return 0;
    }
    __cpuid(r, 1);
    /* OSXSAVE, AVX and FMA (the AVX2 and AVX-512 kernels are built with it: RoPE's fmaf). */
    if (!((r[2] >> 27) & 1) || !((r[2] >> 28) & 1) || !((r[2] >> 12) & 1) || (_xgetbv(0) & xcr0) != xcr0) {
        return 0;
    }
    __cpuidex(r, 7, 0);
    return r[1];
}

int
ckc_cpu_has_avx2(void)
{
    return (leaf7_ebx(0x6) >> 5) & 1;
}

int
ckc_cpu_has_avx512(void)
{
    /* F (bit 16), DQ (17), BW (30), VL (31). */
    const unsigned need = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31);
    return ((unsigned)leaf7_ebx(0xE6) & need) == need;
}

#elif (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))

/* The builtins check the OS's saved state (XCR0) as well as CPUID. */
int
ckc_cpu_has_avx2(void)
{
    __builtin_cpu_init();
    /* FMA too: the AVX2 and AVX-512 kernels are built with it (RoPE's fmaf inlined and vectorized). */
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

int
ckc_cpu_has_avx512(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}

#else

int
ckc_cpu_has_avx2(void)
{
    return 0;
}

int
ckc_cpu_has_avx512(void)
{
    return 0;
}

#endif
