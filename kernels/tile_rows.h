/* SPDX-License-Identifier: Apache-2.0 */
/* The row-tile launchers (kernels/int8_tile.cu) as the int8 launchers
 * (kernels/int8.cu) call them first: each launches its tile kernel on `stream`
 * and returns the kernel's name, or returns NULL, launching nothing, when the
 * tile kernels do not take the call (a row length that is not a multiple of 32,
 * an unaligned tensor, a group size of 4 or 16, a full dequantization scale);
 * the caller then launches its general kernel, with the same mark. */
#ifndef CKC_TILE_ROWS_H
#define CKC_TILE_ROWS_H

#include "int8_rows.h"

#include "contract/done_mark.h"
#include "contract/params.h"

const char *ckc_tile_quantize_rows(const ckc_int8_rowwise_params *p, const ckc_row_layout *lay, uintptr_t stream,
                                   ckc_done_mark done);
const char *ckc_tile_hadamard_rows(const ckc_hadamard_rows_params *p, uintptr_t stream, ckc_done_mark done);
const char *ckc_tile_dequant(const ckc_int8_dequant_params *p, uintptr_t stream, ckc_done_mark done);

#endif /* CKC_TILE_ROWS_H */
