/* SPDX-License-Identifier: Apache-2.0 */
/* The W4A8 / W6A8 codes as an op argument: the check the decoder
 * (dequantize_w4a8_int8_weight, w4a8.c) and w4a8_linear (linear.c) share. */
#ifndef CKC_OPS_W4A8_SOURCE_H
#define CKC_OPS_W4A8_SOURCE_H

#include "op.h"

/* The codes of an [n, k] weight at the spec's tensors q_idx (codes), s_rel_idx
 * and codebook_idx, and its four ints from first_int on (group_size, bits,
 * packed, s_e4m3), checked into d as an int8 decode (d->out left NULL);
 * shape_from: the argument whose shape gave n and k (named in their errors). */
ckc_status ckc_w4a8_source_of(const ckc_op_args *a, int q_idx, int s_rel_idx, int codebook_idx, int first_int,
                              const char *shape_from, int64_t n, int64_t k, ckc_dequantize_w4a8_int8_weight_params *d,
                              ckc_error *err);

#endif /* CKC_OPS_W4A8_SOURCE_H */
