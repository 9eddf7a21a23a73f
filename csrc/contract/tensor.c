/* SPDX-License-Identifier: Apache-2.0 */
/* Names of the dtypes (contract/tensor.h), for messages and records. */
#include "contract/tensor.h"

static const char *const dtype_names[CKC_DTYPE_COUNT] = {
    "float32", "float16", "bfloat16", "uint8", "int8", "int32", "int64",
};

const char *
ckc_dtype_name(ckc_dtype d)
{
    return (d >= 0 && d < CKC_DTYPE_COUNT) ? dtype_names[d] : "unknown";
}
