/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU kernels for x86-64 with AVX2 (8-wide float vectors, vector rounding
 * and blends).  setup.py compiles this file alone with the AVX2 flags and only
 * for x86-64; it is used only when the CPU reports AVX2. */
#define CKC_CPU_ISA avx2
#include "kernels_isa.h"
