/* SPDX-License-Identifier: Apache-2.0 */
/* One op call as it crosses the layers: the op's signature (its tensor and
 * integer arguments, as Python passes them) and the validated arguments of one
 * call.  The module builds it from the Python arguments, the op layer checks
 * and routes it, the diagnostics describe it in the flight record and in fault
 * reports; none of them needs another's insides for that. */
#ifndef CKC_CONTRACT_CALL_H
#define CKC_CONTRACT_CALL_H

#include <stdint.h>

#include "contract/exec.h"
#include "contract/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKC_OP_MAX_TENSORS 14 /* w4a8_linear: 13 */
#define CKC_OP_MAX_INTS 12 /* w4a8_linear: 11 */

/* Flags of a tensor argument. */
#define CKC_ARG_OUTPUT 1u    /* written by the op */
#define CKC_ARG_OPTIONAL 2u  /* may be None */
#define CKC_ARG_WORKSPACE 4u /* the GEMMs' workspace: device memory of the caller's allocator (exec.h) */

typedef struct {
    const char *name;
    unsigned dtypes;         /* mask of CKC_DTYPE_BIT() */
    unsigned flags;
} ckc_tensor_arg;

/* What an op takes: op(name, tensors..., ints..., stream, nthreads[, check]). */
typedef struct {
    const char *name;
    int n_tensors;
    ckc_tensor_arg tensors[CKC_OP_MAX_TENSORS];
    int n_ints;
    const char *ints[CKC_OP_MAX_INTS];
} ckc_op_signature;

typedef struct {
    const ckc_op_signature *sig;
    ckc_tensor t[CKC_OP_MAX_TENSORS];
    int present[CKC_OP_MAX_TENSORS];
    int64_t i[CKC_OP_MAX_INTS];
    ckc_device_type device;  /* common device of all tensor arguments */
    ckc_exec exec;
} ckc_op_args;

#ifdef __cplusplus
}
#endif

#endif /* CKC_CONTRACT_CALL_H */
