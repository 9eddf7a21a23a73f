/* SPDX-License-Identifier: Apache-2.0 */
/* DLPack: the struct layouts of the DLPack specification (v0 "dltensor" and
 * v1 "dltensor_versioned" capsules), written from the spec, and the import of a
 * capsule into a validated ckc_tensor. */
#ifndef CKC_DLPACK_H
#define CKC_DLPACK_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "contract/status.h"
#include "contract/tensor.h"

/* ---- layouts from the DLPack specification ---- */

enum {
    CKC_DL_CPU = 1,
    CKC_DL_CUDA = 2,
    CKC_DL_CUDA_HOST = 3
};

enum {
    CKC_DL_INT = 0,
    CKC_DL_UINT = 1,
    CKC_DL_FLOAT = 2,
    CKC_DL_BFLOAT = 4
};

#define CKC_DL_FLAG_READ_ONLY (UINT64_C(1) << 0)

typedef struct {
    int32_t device_type;
    int32_t device_id;
} ckc_dl_device;

typedef struct {
    uint8_t code;
    uint8_t bits;
    uint16_t lanes;
} ckc_dl_dtype;

typedef struct {
    void *data;
    ckc_dl_device device;
    int32_t ndim;
    ckc_dl_dtype dtype;
    int64_t *shape;
    int64_t *strides;   /* NULL means compact row-major */
    uint64_t byte_offset;
} ckc_dl_tensor;

typedef struct ckc_dl_managed {
    ckc_dl_tensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct ckc_dl_managed *self);
} ckc_dl_managed;

typedef struct {
    uint32_t major;
    uint32_t minor;
} ckc_dl_version;

typedef struct ckc_dl_managed_versioned {
    ckc_dl_version version;
    void *manager_ctx;
    void (*deleter)(struct ckc_dl_managed_versioned *self);
    uint64_t flags;
    ckc_dl_tensor dl_tensor;
} ckc_dl_managed_versioned;

/* ---- import ---- */

/* What must be handed back to the producer once the op is done. */
typedef struct {
    void *managed;   /* ckc_dl_managed or ckc_dl_managed_versioned, NULL if none */
    int versioned;
} ckc_dlpack_hold;

/* Consumes `capsule` (renaming it "used_...", as the protocol requires) and fills
 * `out`.  Requires a compact row-major tensor of a supported dtype on CPU or
 * CUDA, aligned to its element size; `writable` additionally rejects read-only
 * tensors.  On return *hold owns the producer's tensor whether or not the
 * import succeeded; release it with ckc_dlpack_release (with the GIL held). */
ckc_status ckc_dlpack_import(PyObject *capsule, const char *arg, int writable,
                             ckc_tensor *out, ckc_dlpack_hold *hold, ckc_error *err);

/* Calls the producer's deleter exactly once. */
void ckc_dlpack_release(ckc_dlpack_hold *hold);

#endif /* CKC_DLPACK_H */
