/* SPDX-License-Identifier: Apache-2.0 */
/* Import of DLPack capsules (see dlpack.h for the contract). */
#include "dlpack.h"

/* DLPack's (code, bits) of each dtype we take: a table, not a chain of ifs. */
static const struct {
    int code;
    int bits;
    ckc_dtype dtype;
} dl_dtypes[] = {
    {CKC_DL_FLOAT, 32, CKC_DTYPE_FLOAT32}, {CKC_DL_FLOAT, 16, CKC_DTYPE_FLOAT16},
    {CKC_DL_BFLOAT, 16, CKC_DTYPE_BFLOAT16}, {CKC_DL_UINT, 8, CKC_DTYPE_UINT8},
    {CKC_DL_INT, 8, CKC_DTYPE_INT8}, {CKC_DL_INT, 32, CKC_DTYPE_INT32}, {CKC_DL_INT, 64, CKC_DTYPE_INT64},
};

static int
map_dtype(ckc_dl_dtype t, ckc_dtype *out)
{
    for (size_t k = 0; t.lanes == 1 && k < sizeof dl_dtypes / sizeof dl_dtypes[0]; k++) {
        if (t.code == dl_dtypes[k].code && t.bits == dl_dtypes[k].bits) {
            *out = dl_dtypes[k].dtype;
            return 1;
        }
    }
    return 0;
}

/* Takes ownership of the capsule's tensor; returns its DLTensor and flags. */
static ckc_status
take_capsule(PyObject *capsule, const char *arg, ckc_dlpack_hold *hold,
             ckc_dl_tensor **dl, uint64_t *flags, ckc_error *err)
{
    if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
        ckc_dl_managed_versioned *m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
        if (m == NULL || PyCapsule_SetName(capsule, "used_dltensor_versioned") != 0) {
            PyErr_Clear();
            return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s': unreadable DLPack capsule", arg);
        }
        hold->managed = m;
        hold->versioned = 1;
        if (m->version.major != 1) {
            return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s': unsupported DLPack version %u.%u",
                            arg, m->version.major, m->version.minor);
        }
        *dl = &m->dl_tensor;
        *flags = m->flags;
        return CKC_OK;
    }
    if (PyCapsule_IsValid(capsule, "dltensor")) {
        ckc_dl_managed *m = PyCapsule_GetPointer(capsule, "dltensor");
        if (m == NULL || PyCapsule_SetName(capsule, "used_dltensor") != 0) {
            PyErr_Clear();
            return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s': unreadable DLPack capsule", arg);
        }
        hold->managed = m;
        hold->versioned = 0;
        *dl = &m->dl_tensor;
        *flags = 0;
        return CKC_OK;
    }
    return CKC_FAIL(err, CKC_ERR_TYPE,
                    "argument '%s': expected an unconsumed DLPack capsule (tensor.__dlpack__())", arg);
}

ckc_status
ckc_dlpack_import(PyObject *capsule, const char *arg, int writable,
                  ckc_tensor *out, ckc_dlpack_hold *hold, ckc_error *err)
{
    ckc_dl_tensor *dl = NULL;
    uint64_t flags = 0;
    int64_t numel = 1;
    int64_t expected_stride = 1;
    int elem;
    hold->managed = NULL;
    hold->versioned = 0;
    CKC_TRY(take_capsule(capsule, arg, hold, &dl, &flags, err));

    if (dl->device.device_type == CKC_DL_CPU || dl->device.device_type == CKC_DL_CUDA_HOST) {
        out->device = CKC_DEVICE_CPU;
    } else if (dl->device.device_type == CKC_DL_CUDA) {
        out->device = CKC_DEVICE_CUDA;
    } else {
        return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s': unsupported device type %d (cpu or cuda only)",
                        arg, (int)dl->device.device_type);
    }
    out->device_index = dl->device.device_id;
    if (!map_dtype(dl->dtype, &out->dtype)) {
        return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s': unsupported dtype (code %u, %u bits, %u lanes)",
                        arg, dl->dtype.code, dl->dtype.bits, dl->dtype.lanes);
    }
    if (dl->ndim < 0 || dl->ndim > CKC_MAX_DIMS) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': %d dimensions (at most %d)",
                        arg, (int)dl->ndim, CKC_MAX_DIMS);
    }
    if (writable && (flags & CKC_DL_FLAG_READ_ONLY)) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': output tensor is read-only", arg);
    }
    out->ndim = dl->ndim;
    for (int d = 0; d < dl->ndim; d++) {
        const int64_t n = dl->shape[d];
        if (n < 0) {
            return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': negative size in dimension %d", arg, d);
        }
        if (n != 0 && numel > INT64_MAX / n) {
            return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': element count overflows 64 bits", arg);
        }
        numel *= n;
        out->shape[d] = n;
    }
    out->numel = numel;
    /* Compact row-major, ignoring strides of size-1 dimensions (any value is valid there). */
    if (dl->strides != NULL && numel > 0) {
        for (int d = dl->ndim - 1; d >= 0; d--) {
            if (dl->shape[d] != 1 && dl->strides[d] != expected_stride) {
                return CKC_FAIL(err, CKC_ERR_VALUE,
                                "argument '%s': tensor is not contiguous (stride %lld in dimension %d, "
                                "expected %lld)", arg, (long long)dl->strides[d], d,
                                (long long)expected_stride);
            }
            expected_stride *= dl->shape[d];
        }
    }
    elem = ckc_dtype_size(out->dtype);
    out->data = (char *)dl->data + dl->byte_offset;
    if (numel > 0 && ((uintptr_t)out->data % (uintptr_t)elem) != 0) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': data pointer is not aligned to its %d-byte elements",
                        arg, elem);
    }
    if (numel > 0 && out->data == NULL) {
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument '%s': null data pointer", arg);
    }
    return CKC_OK;
}

void
ckc_dlpack_release(ckc_dlpack_hold *hold)
{
    if (hold->managed == NULL) {
        return;
    }
    if (hold->versioned) {
        ckc_dl_managed_versioned *m = hold->managed;
        if (m->deleter != NULL) {
            m->deleter(m);
        }
    } else {
        ckc_dl_managed *m = hold->managed;
        if (m->deleter != NULL) {
            m->deleter(m);
        }
    }
    hold->managed = NULL;
}
