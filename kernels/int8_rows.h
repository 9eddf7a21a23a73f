/* SPDX-License-Identifier: Apache-2.0 */
/* The GPU row quantizer of kernels/int8.cu as other launchers use it
 * (kernels/linear.cu): rows read with their own stride and an optional input
 * activation fused into the load, codes written with a padded stride. */
#ifndef CKC_INT8_ROWS_H
#define CKC_INT8_ROWS_H

#include "contract/params.h"
#include "contract/status.h"

typedef struct {
    int64_t x_stride; /* elements from one input row to the next (2k for swiglu and situ) */
    int64_t q_stride; /* codes per output row: cols .. roundup(cols, 16), the rest zeros */
    int act;          /* ckc_act (kernels/math/activation.h) */
    ckc_act_args args; /* its arguments; args.row_factor one per row of the launch (rms_norm) */
} ckc_row_layout;

/* Row-wise quantization of p->rows rows (p->group > 0: rotated; p->noise must be
 * NULL unless x_stride == cols) on `stream`, under the caller's device guard.
 * With an activation, rows take the one-chunk kernel (longer rows loop over
 * segments): the activation's registers would not fit beside more chunks. */
ckc_status ckc_gpu_int8_quantize_rows(const ckc_int8_rowwise_params *p, const ckc_row_layout *lay,
                                      uintptr_t stream, ckc_error *err);

#endif /* CKC_INT8_ROWS_H */
