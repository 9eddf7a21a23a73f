/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU kernels for the architecture's baseline instruction set (SSE2 on
 * x86-64, NEON on arm64): they run on every CPU. */
#define CKC_CPU_ISA baseline
#include "kernels_isa.h"
