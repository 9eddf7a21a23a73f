/* SPDX-License-Identifier: Apache-2.0 */
/* What Python reads from C instead of writing it again: the codes and limits
 * of contract/codes.h (and the math headers it lists) as module attributes,
 * the padded shapes (round_up, nvfp4_scale_shape: math/), and int8_linear's
 * plan (contract/linear_plan.h), which sizes the scratch with the very layout
 * the op layer carves it with. */
#include "contract/codes.h"
#include "contract/linear_plan.h"
#include "contract/tensor.h"
#include "shared.h"

/* d[key] = value, taking both references; -1 when either is NULL or the store fails. */
static int
put(PyObject *d, PyObject *key, PyObject *value)
{
    const int rc = key == NULL || value == NULL ? -1 : PyDict_SetItem(d, key, value);
    Py_XDECREF(key);
    Py_XDECREF(value);
    return rc;
}

/* {name: code} of a NULL-terminated table. */
static PyObject *
code_dict(const ckc_named_code *codes)
{
    PyObject *d = PyDict_New();
    for (int k = 0; d != NULL && codes[k].name != NULL; k++) {
        if (put(d, PyUnicode_FromString(codes[k].name), PyLong_FromLongLong(codes[k].value)) < 0) {
            Py_CLEAR(d);
        }
    }
    return d;
}

/* {activation code: input columns per activated column} (math/activation.h). */
static PyObject *
act_width_dict(void)
{
    PyObject *d = PyDict_New();
    for (int k = 0; d != NULL && ckc_activation_codes[k].name != NULL; k++) {
        const int64_t code = ckc_activation_codes[k].value;
        if (put(d, PyLong_FromLongLong(code), PyLong_FromLong(ckc_act_width((int)code))) < 0) {
            Py_CLEAR(d);
        }
    }
    return d;
}

/* {dtype name: code} of every dtype of contract/tensor.h. */
static PyObject *
dtype_dict(void)
{
    PyObject *d = PyDict_New();
    for (int k = 0; d != NULL && k < CKC_DTYPE_COUNT; k++) {
        if (put(d, PyUnicode_FromString(ckc_dtype_name((ckc_dtype)k)), PyLong_FromLong(k)) < 0) {
            Py_CLEAR(d);
        }
    }
    return d;
}

/* The group sizes the rotation takes in [lo, hi]: the powers of 4 (math/hadamard.h). */
static PyObject *
group_tuple(int64_t lo, int64_t hi)
{
    PyObject *list = PyList_New(0);
    PyObject *tuple;
    for (int64_t g = 1; list != NULL && g <= hi; g *= 4) {
        PyObject *v;
        if (g < lo || ckc_hadamard_log4(g) < 0) {
            continue;
        }
        v = PyLong_FromLongLong(g);
        if (v == NULL || PyList_Append(list, v) < 0) {
            Py_CLEAR(list);
        }
        Py_XDECREF(v);
    }
    if (list == NULL) {
        return NULL;
    }
    tuple = PyList_AsTuple(list);
    Py_DECREF(list);
    return tuple;
}

static int
add_new(PyObject *m, const char *name, PyObject *value)
{
    const int rc = value == NULL ? -1 : PyModule_AddObjectRef(m, name, value);
    Py_XDECREF(value);
    return rc;
}

static int
add_codes(PyObject *m)
{
    for (int k = 0; ckc_shared_ints[k].name != NULL; k++) {
        if (add_new(m, ckc_shared_ints[k].name, PyLong_FromLongLong(ckc_shared_ints[k].value)) < 0) {
            return -1;
        }
    }
    if (add_new(m, "INPUT_ACTS", code_dict(ckc_activation_codes)) < 0 ||
        add_new(m, "INPUT_ACT_WIDTHS", act_width_dict()) < 0 || add_new(m, "DTYPES", dtype_dict()) < 0 ||
        add_new(m, "HADAMARD_GROUPS", group_tuple(CKC_HADAMARD_MIN_GROUP, CKC_HADAMARD_MAX_GROUP)) < 0 ||
        add_new(m, "NVFP4_ROTATION_GROUPS", group_tuple(CKC_NVFP4_MIN_GROUP, CKC_NVFP4_MAX_GROUP)) < 0 ||
        add_new(m, "E4M3_MAX", PyFloat_FromDouble(CKC_E4M3_MAX)) < 0 ||
        add_new(m, "E2M1_MAX", PyFloat_FromDouble(CKC_E2M1_MAX)) < 0 ||
        add_new(m, "LINEAR_GEMV_ROWS", PyLong_FromLong(CKC_LINEAR_GEMV_ROWS)) < 0) {
        return -1;
    }
    return 0;
}

/* v[0 .. want) = the int arguments of fn; -1 with TypeError (or OverflowError) set. */
static int
int_args(const char *fn, PyObject *const *args, Py_ssize_t nargs, int want, int64_t *v)
{
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s() takes %d arguments (%zd given)", fn, want, nargs);
        return -1;
    }
    for (int k = 0; k < want; k++) {
        v[k] = PyLong_AsLongLong(args[k]);
        if (v[k] == -1 && PyErr_Occurred()) {
            return -1;
        }
    }
    return 0;
}

/* Largest extent the shape helpers take: rounded up, it still fits int64. */
#define SHAPE_MAX (INT64_C(1) << 62)

/* A function of two extents: its name, its arguments' names and least values. */
typedef struct {
    const char *fn;
    const char *names[2];
    int64_t lo[2];
} two_extents;

static const two_extents round_up_args = {"round_up", {"v", "m"}, {0, 1}};
static const two_extents scale_shape_args = {"nvfp4_scale_shape", {"rows", "cols"}, {0, 0}};

/* v[0 .. 2) = the two int arguments of f, each in [f->lo[k], 2**62]; -1 with
 * the exception set. */
static int
take_extents(const two_extents *f, PyObject *const *args, Py_ssize_t nargs, int64_t v[2])
{
    if (int_args(f->fn, args, nargs, 2, v) < 0) {
        return -1;
    }
    for (int k = 0; k < 2; k++) {
        if (v[k] < f->lo[k] || v[k] > SHAPE_MAX) {
            PyErr_Format(PyExc_ValueError, "%s: argument '%s': expected %lld .. 2**62, got %lld", f->fn, f->names[k],
                         (long long)f->lo[k], (long long)v[k]);
            return -1;
        }
    }
    return 0;
}

/* round_up(v, m) -> v rounded up to a multiple of m (math/ckc_inline.h). */
static PyObject *
round_up(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t v[2];
    (void)self;
    if (take_extents(&round_up_args, args, nargs, v) < 0) {
        return NULL;
    }
    return PyLong_FromLongLong(ckc_round_up(v[0], v[1]));
}

/* nvfp4_scale_shape(rows, cols) -> the shape of the swizzled block-scale buffer
 * of a rows x cols NVFP4 tensor (math/nvfp4.h: whole 128 x 4 tiles of the
 * cols/16 block scales), the one the kernels and the op checks use. */
static PyObject *
nvfp4_scale_shape(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t v[2];
    (void)self;
    if (take_extents(&scale_shape_args, args, nargs, v) < 0) {
        return NULL;
    }
    return Py_BuildValue("(LL)", (long long)ckc_nvfp4_scale_rows(v[0]),
                         (long long)ckc_nvfp4_scale_cols(v[1] / CKC_NVFP4_BLOCK));
}

enum { PLAN_ROWS, PLAN_K, PLAN_N, PLAN_K_ALIGN, PLAN_N_ALIGN, PLAN_GPU, PLAN_ACT, PLAN_X_BYTES, PLAN_W_ALIGNED,
       PLAN_LIMIT, PLAN_DECODE_BYTES, PLAN_DECODE_GEMV, PLAN_ARGS };

/* int8_linear_plan(rows, k, n, k_align, n_align, gpu, act, x_bytes, w_aligned16, limit, decode_bytes,
 *                  decode_gemv)
 * -> (scratch_bytes, padded): padded is None when the op reads the [n, k] weight
 * as it is, else the (n_pad, k_pad) shape of the zero-padded copy it needs.  The
 * scratch then holds as many rows as fit limit, less that copy's bytes (at least
 * one block of rows).  decode_bytes > 0: w4a8_linear's plan (the weight as codes,
 * decoded within that many bytes at a time: never padded; decode_gemv: its GEMV
 * reads the codes' layout). */
static PyObject *
int8_linear_plan(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t v[PLAN_ARGS];
    ckc_linear_layout l;
    int64_t budget;
    (void)self;
    if (int_args("int8_linear_plan", args, nargs, PLAN_ARGS, v) < 0) {
        return NULL;
    }
    if (v[PLAN_ROWS] < 1 || v[PLAN_K] < 1 || v[PLAN_N] < 1 || v[PLAN_ROWS] > CKC_MAX_EXTENT ||
        v[PLAN_K] > CKC_MAX_EXTENT || v[PLAN_N] > CKC_MAX_EXTENT || v[PLAN_K_ALIGN] < 1 || v[PLAN_K_ALIGN] > 256 ||
        v[PLAN_N_ALIGN] < 1 || v[PLAN_N_ALIGN] > 256 || v[PLAN_X_BYTES] < 1 || v[PLAN_X_BYTES] > 8 ||
        v[PLAN_DECODE_BYTES] < 0) {
        PyErr_SetString(PyExc_ValueError, "int8_linear_plan: a size out of range");
        return NULL;
    }
    l = ckc_linear_layout_of(v[PLAN_ROWS], v[PLAN_K], v[PLAN_N], v[PLAN_K_ALIGN], v[PLAN_N_ALIGN],
                             v[PLAN_GPU] != 0, (int)v[PLAN_ACT], v[PLAN_X_BYTES], v[PLAN_DECODE_BYTES],
                             v[PLAN_DECODE_GEMV] != 0);
    if (v[PLAN_DECODE_BYTES] > 0 || !ckc_linear_pads_weight(&l, v[PLAN_K], v[PLAN_N], v[PLAN_W_ALIGNED] != 0)) {
        return Py_BuildValue("(LO)", (long long)ckc_linear_scratch_bytes(&l, v[PLAN_ROWS], v[PLAN_LIMIT]), Py_None);
    }
    budget = v[PLAN_LIMIT] - l.n_pad * l.k_pad;
    return Py_BuildValue("(L(LL))", (long long)ckc_linear_scratch_bytes(&l, v[PLAN_ROWS], budget),
                         (long long)l.n_pad, (long long)l.k_pad);
}

static PyMethodDef shared_functions[] = {
    {"int8_linear_plan", (PyCFunction)(void (*)(void))int8_linear_plan, METH_FASTCALL,
     "int8_linear_plan(rows, k, n, k_align, n_align, gpu, act, x_bytes, w_aligned16, limit, decode_bytes,\n"
     "                 decode_gemv)\n--\n\n"
     "(scratch bytes, None or the (n_pad, k_pad) shape of the zero-padded weight copy the GEMM needs) of an "
     "int8_linear call, within the memory limit; decode_bytes > 0: of a w4a8_linear call (decode_gemv: "
     "its GEMV reads the codes)."},
    {"round_up", (PyCFunction)(void (*)(void))round_up, METH_FASTCALL,
     "round_up(v, m)\n--\n\nv rounded up to a multiple of m (the C helper every padded extent uses)."},
    {"nvfp4_scale_shape", (PyCFunction)(void (*)(void))nvfp4_scale_shape, METH_FASTCALL,
     "nvfp4_scale_shape(rows, cols)\n--\n\n(rows, cols) of the swizzled block-scale buffer of a rows x cols NVFP4 "
     "tensor: rows rounded up to 128, cols/16 rounded up to 4."},
    {NULL, NULL, 0, NULL},
};

int
ckc_add_shared(PyObject *m)
{
    if (add_codes(m) < 0) {
        return -1;
    }
    return PyModule_AddFunctions(m, shared_functions);
}
