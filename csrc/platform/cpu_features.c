/* CPUID queries, per compiler: MSVC intrinsics, or GCC/clang builtins. */
#include "cpu_features.h"

#if defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
#include <immintrin.h>
#include <intrin.h>

int
ckc_cpu_has_avx2(void)
{
    int r[4];
    __cpuid(r, 0);
    if (r[0] < 7) {
        return 0;
    }
    __cpuid(r, 1);
    /* OSXSAVE and AVX, then the OS must save the YMM state (XCR0 bits 1, 2). */
    if (!((r[2] >> 27) & 1) || !((r[2] >> 28) & 1) || (_xgetbv(0) & 6) != 6) {
        return 0;
    }
    __cpuidex(r, 7, 0);
    return (r[1] >> 5) & 1;
}

#elif (defined(__GNUC__) || defined(__clang__)) && (defined(__x86_64__) || defined(__i386__))

int
ckc_cpu_has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
}

#else

int
ckc_cpu_has_avx2(void)
{
    return 0;
}

#endif
