/* SPDX-License-Identifier: Apache-2.0 */
/* Shape and size checks shared by the ops' prepare functions. */
#include <stdio.h>

#include "math/hadamard.h"
#include "op.h"

static void
format_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t used = 0;
    used += (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < ndim && used < cap; d++) {
        used += (size_t)snprintf(buf + used, cap - used, d ? ", %lld" : "%lld", (long long)shape[d]);
    }
    if (used < cap) {
        snprintf(buf + used, cap - used, ")");
    }
}

ckc_status
ckc_check_shape(const ckc_op_args *a, int idx, int ndim, const int64_t *shape, ckc_error *err)
{
    const ckc_tensor *t = &a->t[idx];
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) {
        same = t->shape[d] == shape[d];
    }
    if (!same) {
        char want[160];
        char got[160];
        format_shape(want, sizeof want, ndim, shape);
        format_shape(got, sizeof got, t->ndim, t->shape);
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': expected shape %s, got %s",
                        a->sig->tensors[idx].name, want, got);
    }
    return CKC_OK;
}

ckc_status
ckc_check_numel(const ckc_op_args *a, int idx, int64_t numel, ckc_error *err)
{
    if (a->t[idx].numel != numel) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': expected %lld elements, got %lld",
                        a->sig->tensors[idx].name, (long long)numel, (long long)a->t[idx].numel);
    }
    return CKC_OK;
}

ckc_status
ckc_check_same_dtype(const ckc_op_args *a, int idx, int like, ckc_error *err)
{
    if (a->t[idx].dtype != a->t[like].dtype) {
        return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s': expected dtype %s (as '%s'), got %s",
                        a->sig->tensors[idx].name, ckc_dtype_name(a->t[like].dtype),
                        a->sig->tensors[like].name, ckc_dtype_name(a->t[idx].dtype));
    }
    return CKC_OK;
}

ckc_status
ckc_check_extent(const ckc_op_args *a, int idx, int64_t rows, int64_t cols, ckc_error *err)
{
    if (rows <= 0 || cols <= 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': empty tensor (%lld rows of %lld)",
                        a->sig->tensors[idx].name, (long long)rows, (long long)cols);
    }
    if (rows > CKC_MAX_EXTENT || cols > CKC_MAX_EXTENT) {
        return CKC_FAIL(err, CKC_ERR_VALUE,
                        "argument '%s': %lld rows of %lld elements; rows and row length must each be "
                        "below 2^31", a->sig->tensors[idx].name, (long long)rows, (long long)cols);
    }
    return CKC_OK;
}

ckc_status
ckc_check_rows(const ckc_op_args *a, int idx, int64_t *rows, int64_t *cols, ckc_error *err)
{
    const ckc_tensor *t = &a->t[idx];
    int64_t r = 1;
    if (t->ndim < 1) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': expected at least 1 dimension, got 0",
                        a->sig->tensors[idx].name);
    }
    /* The product of the leading dimensions rather than numel / cols, which an
     * empty row length would divide by zero.  It cannot overflow: its partial
     * products are the ones module/dlpack.c checked while computing numel. */
    for (int d = 0; d + 1 < t->ndim; d++) {
        r *= t->shape[d];
    }
    *rows = r;
    *cols = t->shape[t->ndim - 1];
    return ckc_check_extent(a, idx, r, *cols, err);
}

ckc_status
ckc_check_group(const char *arg, int64_t group, int64_t cols, ckc_error *err)
{
    if (ckc_hadamard_log4(group) < 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': group size %lld is not a power of 4 in [%d, %d]",
                        arg, (long long)group, CKC_HADAMARD_MIN_GROUP, CKC_HADAMARD_MAX_GROUP);
    }
    if (cols % group != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': row length %lld is not divisible by group size %lld",
                        arg, (long long)cols, (long long)group);
    }
    return CKC_OK;
}
