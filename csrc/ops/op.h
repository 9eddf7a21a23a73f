/* The shape of every op: a static spec (name, tensor arguments with their dtype
 * sets, integer arguments, and the function that runs it) and the validated
 * arguments of one call.  module.c turns each spec into a Python function;
 * csrc/ops/<family>.c define the specs and their run functions, which check
 * shapes and route to the device's kernels. */
#ifndef CKC_OPS_OP_H
#define CKC_OPS_OP_H

#include "math/float_bits.h"
#include "status.h"
#include "tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CKC_OP_MAX_TENSORS 12 /* int8_linear: 10 */
#define CKC_OP_MAX_INTS 8 /* int8_linear: 6 */

/* Flags of a tensor argument. */
#define CKC_ARG_OUTPUT 1u    /* written by the op */
#define CKC_ARG_OPTIONAL 2u  /* may be None */

typedef struct {
    const char *name;
    unsigned dtypes;         /* mask of CKC_DTYPE_BIT() */
    unsigned flags;
} ckc_tensor_arg;

/* Where and how a call runs. */
typedef struct {
    int nthreads;            /* CPU threads (torch.get_num_threads()) */
    uintptr_t stream;        /* CUDA stream of the caller, 0 for CPU */
    int device_index;        /* CUDA device of the tensors */
} ckc_exec;

struct ckc_op_spec;

typedef struct {
    const struct ckc_op_spec *spec;
    ckc_tensor t[CKC_OP_MAX_TENSORS];
    int present[CKC_OP_MAX_TENSORS];
    int64_t i[CKC_OP_MAX_INTS];
    ckc_device_type device;  /* common device of all tensor arguments */
    ckc_exec exec;
} ckc_op_args;

typedef struct ckc_op_spec {
    const char *name;
    const char *doc;
    int n_tensors;
    ckc_tensor_arg tensors[CKC_OP_MAX_TENSORS];
    int n_ints;
    const char *ints[CKC_OP_MAX_INTS];
    ckc_status (*run)(const ckc_op_args *a, ckc_error *err);
} ckc_op_spec;

/* All ops, NULL-terminated (ops/registry.c). */
extern const ckc_op_spec *const ckc_op_table[];

/* ---- checks shared by the run functions; messages name the argument ---- */

/* Largest row count and row length the kernels index (rows and columns each
 * stay below 2^31, so CUDA grids and in-row offsets fit 32 bits). */
#define CKC_MAX_EXTENT INT64_C(2147483647)

ckc_status ckc_check_shape(const ckc_op_args *a, int idx, int ndim, const int64_t *shape, ckc_error *err);
ckc_status ckc_check_numel(const ckc_op_args *a, int idx, int64_t numel, ckc_error *err);
ckc_status ckc_check_same_dtype(const ckc_op_args *a, int idx, int like, ckc_error *err);
ckc_status ckc_check_extent(const ckc_op_args *a, int idx, int64_t rows, int64_t cols, ckc_error *err);
/* The tensor seen as [rows, cols] = [numel / shape[-1], shape[-1]] (a compact
 * row-major tensor of any rank >= 1 is that matrix), within ckc_check_extent. */
ckc_status ckc_check_rows(const ckc_op_args *a, int idx, int64_t *rows, int64_t *cols, ckc_error *err);
ckc_status ckc_check_group(const char *arg, int64_t group, int64_t cols, ckc_error *err);
ckc_status ckc_unsupported_device(const ckc_op_args *a, ckc_error *err);

/* Whether a call runs on the GPU kernels: CUDA tensors in a CUDA build, every
 * call in the emulated-device build (its "device memory" is host memory). */
static inline int
ckc_on_gpu(const ckc_op_args *a)
{
#if defined(CKC_EMULATED)
    (void)a;
    return 1;
#else
    return a->device == CKC_DEVICE_CUDA;
#endif
}

static inline ckc_float_kind
ckc_float_kind_of(ckc_dtype d)
{
    return d == CKC_DTYPE_FLOAT16 ? CKC_F16 : (d == CKC_DTYPE_BFLOAT16 ? CKC_BF16 : CKC_F32);
}

#ifdef __cplusplus
}
#endif

#endif /* CKC_OPS_OP_H */
