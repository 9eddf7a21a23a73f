/* SPDX-License-Identifier: Apache-2.0 */
/* Scalar math of gemv_awq_w4a16, shared by the CPU and CUDA kernels.
 *
 * The weight: eager forms W[n, k] = (q - 8) * wscales[k/G, n] + wzeros[k/G, n]
 * with two torch ops in the compute dtype (no fusion: an FMA would round once,
 * and eager's bits are those of the multiply rounded, then the add rounded;
 * tests/test_awq_parity.py checks the 16 values of every group against eager's
 * dequantized weight).  (q - 8) * s is exact in float32 (4 bits times at most
 * 24), so rounding it to the compute type is eager's product; the sum of two
 * values of the compute type rounded to float32 then to the compute type is
 * eager's add (torch computes 16-bit adds in float32).
 *
 * The output: y = round_c(sum_k x[k] W[n, k]), then, with a bias, round_out(y +
 * bias) in float32 (out: torch's promotion of the compute type and bias's).
 * The sum is float32 in the kernels' order, not eager's: the parity is the
 * bound of docs/parity.md (see cpu/awq_impl.h), not the bits. */
#ifndef CKC_MATH_AWQ_H
#define CKC_MATH_AWQ_H

#include "float_bits.h"

/* The 4-bit code of column k of a packed row: low nibble even columns. */
CKC_HD unsigned
ckc_awq_nibble(const uint8_t *row, int64_t k)
{
    return (unsigned)(row[k >> 1] >> ((k & 1) * 4)) & 15u;
}

/* One weight value, rounded as eager rounds it (exact float32 of the compute type). */
CKC_HD float
ckc_awq_weight(unsigned q, float scale, float zero, ckc_float_kind kind)
{
    const float step = ckc_round_to_kind((float)((int)q - 8) * scale, kind);
    return ckc_round_to_kind(step + zero, kind);
}

/* The output value from the float32 sum: rounded to the compute type, then the
 * bias added as eager adds it (has_bias 0: no bias). */
CKC_HD float
ckc_awq_output(float acc, int has_bias, float bias, ckc_float_kind kind, ckc_float_kind out_kind)
{
    const float y = ckc_round_to_kind(acc, kind);
    return has_bias ? ckc_round_to_kind(y + bias, out_kind) : y;
}

#endif /* CKC_MATH_AWQ_H */
