/* SPDX-License-Identifier: Apache-2.0 */
/* What the CPU can run, for choosing the CPU kernels' instruction set. */
#ifndef CKC_PLATFORM_CPU_FEATURES_H
#define CKC_PLATFORM_CPU_FEATURES_H

/* 1 if the CPU and the OS support AVX2 (x86-64 only; 0 elsewhere). */
int ckc_cpu_has_avx2(void);

/* 1 if the CPU and the OS support AVX-512 F, BW, VL and DQ (x86-64 only; 0
 * elsewhere): Skylake-SP and later Xeons, Ice Lake and Tiger Lake, Zen 4. */
int ckc_cpu_has_avx512(void);

#endif /* CKC_PLATFORM_CPU_FEATURES_H */
