/* SPDX-License-Identifier: Apache-2.0 */
/* stochastic_rounding_fp8's CPU table over the 65536 float16 inputs: see
 * fp8_tables.c. */
#ifndef CKC_CPU_FP8_TABLES_H
#define CKC_CPU_FP8_TABLES_H

#include <stdint.h>

/* An entry that the table does not decide: compute the code directly. */
#define CKC_FP8_SR_DIRECT 0xFFFFFFFFu

/* The table of the format (e5m2: 0 e4m3fn, 1 e5m2), indexed by the bits of
 * x.half().  An entry is code_lo | code_hi << 8 | threshold << 16: the code for
 * a noise byte r is code_hi where r >= threshold (0..256), else code_lo; or
 * CKC_FP8_SR_DIRECT.  Built on first use (thread-safe), then read-only. */
const uint32_t *ckc_fp8_sr_table(int e5m2);

#endif /* CKC_CPU_FP8_TABLES_H */
