/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU kernels for x86-64 with AVX-512 (F, BW, VL and DQ: 16-wide float
 * vectors, 16-bit element masks, down-converts).  setup.py compiles this file
 * alone with those flags and only for x86-64; it is used only when the CPU and
 * the OS support them.  Code written for AVX2 applies here too. */
#define CKC_CPU_ISA avx512
#include "kernels_isa.h"
