/* SPDX-License-Identifier: Apache-2.0 */
/* ckc_tensor: the validated, backend-neutral view of one tensor argument that
 * every op receives (built from a DLPack capsule in module/dlpack.c). */
#ifndef CKC_CONTRACT_TENSOR_H
#define CKC_CONTRACT_TENSOR_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CKC_MAX_DIMS 8

/* Element types.  The float codes are also comfy_kitchen's output_dtype_code
 * numbering (0 float32, 1 float16, 2 bfloat16): comfy_kitchen_c reads them
 * from _C.DTYPES (with their names, ckc_dtype_name), so they stay as they are. */
typedef enum {
    CKC_DTYPE_FLOAT32 = 0,
    CKC_DTYPE_FLOAT16 = 1,
    CKC_DTYPE_BFLOAT16 = 2,
    CKC_DTYPE_UINT8 = 3,
    CKC_DTYPE_INT8 = 4,
    CKC_DTYPE_INT32 = 5,
    CKC_DTYPE_INT64 = 6,
    CKC_DTYPE_COUNT
} ckc_dtype;

/* Bit masks of dtypes, for "one of" checks. */
#define CKC_DTYPE_BIT(d) (1u << (d))
#define CKC_FLOATS (CKC_DTYPE_BIT(CKC_DTYPE_FLOAT32) | CKC_DTYPE_BIT(CKC_DTYPE_FLOAT16) | \
                    CKC_DTYPE_BIT(CKC_DTYPE_BFLOAT16))

typedef enum {
    CKC_DEVICE_CPU = 0,
    CKC_DEVICE_CUDA = 1
} ckc_device_type;

typedef struct {
    void *data;                    /* first element (DLPack byte_offset applied) */
    int64_t shape[CKC_MAX_DIMS];
    int64_t numel;
    int32_t ndim;
    ckc_dtype dtype;
    ckc_device_type device;
    int32_t device_index;
} ckc_tensor;

static inline int
ckc_dtype_size(ckc_dtype d)
{
    switch (d) {
    case CKC_DTYPE_INT64:
        return 8;
    case CKC_DTYPE_FLOAT32:
    case CKC_DTYPE_INT32:
        return 4;
    case CKC_DTYPE_FLOAT16:
    case CKC_DTYPE_BFLOAT16:
        return 2;
    default:
        return 1;
    }
}

const char *ckc_dtype_name(ckc_dtype d);

#ifdef __cplusplus
}
#endif

#endif /* CKC_CONTRACT_TENSOR_H */
