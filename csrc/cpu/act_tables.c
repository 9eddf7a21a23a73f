/* SPDX-License-Identifier: Apache-2.0 */
/* The transcendental activations of int8_linear's CPU pre-pass, tabulated over
 * the 65536 values of a 16-bit row type.  gelu_tanh, swiglu's silu(gate) and
 * situ's two factors are each rounded to the row's type and depend on one
 * input value (csrc/math/activation.h), so a table of the function computed
 * once, by the same expression, gives the same bits as computing it per value:
 * one load in place of a libm tanhf/expf (~40 ns for glibc 2.36's tanhf, which
 * made the gelu_tanh pre-pass slower than oneDNN's whole GEMM).  256 KiB per
 * table, in static storage (the kernels do not allocate). */
#include <stddef.h>
#include <stdint.h>

#include "act_tables.h"
#include "math/activation.h"
#include "platform/threads.h"

enum { T_GELU, T_SILU, T_SITU_HIDDEN, T_SITU_GATE, T_COUNT };
#define T_SIZE 65536

static float tables[T_COUNT][2][T_SIZE]; /* [table][float16, bfloat16][bits] */
static ckc_atomic_counter ready[T_COUNT][2];
static ckc_mutex build_lock = CKC_MUTEX_INIT;

static float
table_value(int t, float v, ckc_float_kind kind)
{
    switch (t) {
    case T_GELU:
        return ckc_gelu_tanh_value(v, kind);
    case T_SILU:
        return ckc_silu_value(v, kind);
    case T_SITU_HIDDEN:
        return ckc_situ_hidden(v, kind);
    default:
        return ckc_situ_gate(v, kind);
    }
}

/* Table t for kind (CKC_F16 or CKC_BF16), built under the lock the first time;
 * the release store of its ready flag publishes it to readers' acquire load. */
static const float *
table(int t, ckc_float_kind kind)
{
    const int slot = kind == CKC_BF16;
    if (ckc_atomic_load(&ready[t][slot]) == 0) {
        ckc_mutex_lock(&build_lock);
        if (ckc_atomic_load(&ready[t][slot]) == 0) {
            for (uint32_t bits = 0; bits < T_SIZE; bits++) {
                const uint16_t b = (uint16_t)bits;
                const float v = kind == CKC_BF16 ? ckc_bf16_to_f32(b) : ckc_f16_to_f32(b);
                tables[t][slot][bits] = table_value(t, v, kind);
            }
            ckc_atomic_store(&ready[t][slot], 1);
        }
        ckc_mutex_unlock(&build_lock);
    }
    return tables[t][slot];
}

void
ckc_act_tables(int act, ckc_float_kind kind, const float *t[2])
{
    t[0] = NULL;
    t[1] = NULL;
    if (kind != CKC_F16 && kind != CKC_BF16) {
        return;
    }
    if (act == CKC_ACT_GELU_TANH) {
        t[0] = table(T_GELU, kind);
    } else if (act == CKC_ACT_SWIGLU) {
        t[0] = table(T_SILU, kind);
    } else if (act == CKC_ACT_SITU) {
        t[0] = table(T_SITU_HIDDEN, kind);
        t[1] = table(T_SITU_GATE, kind);
    }
}
