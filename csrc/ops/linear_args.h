/* SPDX-License-Identifier: Apache-2.0 */
/* The argument parsers int8_linear (linear.c) shares with its CPU parts
 * (linear_parts.c): the activation's vectors and constants, the epilogue's
 * terms, read from a spec's tensors at the given indices into the op's
 * parameter block. */
#ifndef CKC_OPS_LINEAR_ARGS_H
#define CKC_OPS_LINEAR_ARGS_H

#include "op.h"

/* Reads p->act, p->k, p->kind; fills p->act_args. */
ckc_status ckc_linear_act_args_of(const ckc_op_args *a, int weight_idx, int modulation_idx, int64_t eps_arg,
                                  int64_t norm_kind, ckc_int8_linear_params *p, ckc_error *err);

/* Reads p->rows, p->n; fills p->terms (the residual's scale is the tensor after the residual). */
ckc_status ckc_linear_terms_of(const ckc_op_args *a, int bias_idx, int residual_idx, ckc_int8_linear_params *p,
                               ckc_error *err);

#endif /* CKC_OPS_LINEAR_ARGS_H */
