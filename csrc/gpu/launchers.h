/* SPDX-License-Identifier: Apache-2.0 */
/* What the launchers (gpu/launch_*.c) share among themselves: int8_linear's
 * row quantizer (launch_int8.c), the W4A8 decode (launch_w4a8.c) and the row-tile kernels' launchers
 * (launch_tile.c), which take the calls their kernels serve and leave the
 * others to the general kernels. */
#ifndef CKC_GPU_LAUNCHERS_H
#define CKC_GPU_LAUNCHERS_H

#include "contract/done_mark.h"
#include "contract/params.h"
#include "contract/status.h"
#include "kernel_args.h"

/* The row quantizer with int8_linear's layout (codes q_stride apart, the
 * activation fused into the load), under the caller's device guard; never the
 * op's last kernel. */
ckc_status ckc_gpu_int8_quantize_rows(const ckc_quantize_int8_rowwise_params *p, const ckc_row_layout *lay,
                                      uintptr_t stream, ckc_error *err);

/* The W4A8 / W6A8 decode kernel (launch_w4a8.c) on p's rows, under the
 * caller's device guard; done: the op's mark if it is the op's last kernel. */
ckc_status ckc_gpu_w4a8_decode(const ckc_dequantize_w4a8_int8_weight_params *p, uintptr_t stream, ckc_done_mark done,
                               ckc_error *err);

/* w4a8_linear's GEMV (kernels/w4a8.cu) of p's rows (at most
 * CKC_LINEAR_GEMV_ROWS, their codes in p->q) on the canonical codes in
 * p->decode, under the caller's device guard. */
ckc_status ckc_gpu_w4a8_gemv(const ckc_int8_linear_params *p, ckc_done_mark done, uintptr_t stream, ckc_error *err);

/* The row-tile launchers: 1 when their kernels take the call (*status: the
 * launch's), 0 when the general kernels must (nothing launched). */
int ckc_tile_quantize_rows(const ckc_quantize_int8_rowwise_params *p, const ckc_row_layout *lay, uintptr_t stream,
                           ckc_done_mark done, ckc_status *status, ckc_error *err);
int ckc_tile_hadamard_rows(const ckc_rotate_int8_convrot_weight_params *p, uintptr_t stream, ckc_done_mark done,
                           ckc_status *status, ckc_error *err);
int ckc_tile_dequant(const ckc_dequantize_int8_convrot_weight_dtype_params *p, uintptr_t stream, ckc_done_mark done,
                     ckc_status *status,
                     ckc_error *err);

#endif /* CKC_GPU_LAUNCHERS_H */
