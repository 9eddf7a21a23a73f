/* SPDX-License-Identifier: Apache-2.0 */
/* Tables of the transcendental activations of int8_linear's CPU pre-pass over
 * every 16-bit input (float16, bfloat16): see act_tables.c. */
#ifndef CKC_CPU_ACT_TABLES_H
#define CKC_CPU_ACT_TABLES_H

#include "math/float_bits.h"

/* The two tables of act (a ckc_act) for rows of kind, indexed by an input's
 * 16 bits: t[0] of the row's first half (gelu_tanh's value, swiglu's silu(gate),
 * situ's hidden factor), t[1] of its second half (situ's gate factor; else
 * NULL).  Both NULL where act has no table or kind is float32.  Built on first
 * use (thread-safe), then read-only. */
void ckc_act_tables(int act, ckc_float_kind kind, const float *t[2]);

#endif /* CKC_CPU_ACT_TABLES_H */
