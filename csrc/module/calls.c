/* SPDX-License-Identifier: Apache-2.0 */
/* The op functions of _C and _C_emu: every op spec of ckc_op_table becomes one
 * module function (METH_FASTCALL: no argument tuple per call) taking
 *     (op_name, tensor capsules..., ints..., stream, nthreads[, check])
 * which imports the DLPack capsules, checks dtypes and devices, runs the op
 * through the router with the GIL released under the checks of `check`
 * (diag/checked.h: 0 launch, the default, 1 boundary, 2 op), hands the
 * capsules' tensors back, and raises the op-named exception for any failure. */
#include "calls.h"
#include "dlpack.h"
#include "faults.h"
#include "ops/op.h"
#include "state.h"

static void
describe_device(const ckc_tensor *t, char *buf, size_t cap)
{
    if (t->device == CKC_DEVICE_CPU) {
        PyOS_snprintf(buf, cap, "cpu");
    } else {
        PyOS_snprintf(buf, cap, "cuda:%d", (int)t->device_index);
    }
}

/* Tensors of one call must share a device; the first present one sets it. */
static ckc_status
check_devices(ckc_op_args *a, ckc_error *err)
{
    int first = -1;
    for (int k = 0; k < a->sig->n_tensors; k++) {
        const ckc_tensor *t;
        const ckc_tensor *f;
        if (!a->present[k]) {
            continue;
        }
        if (first < 0) {
            first = k;
            a->device = a->t[k].device;
            a->exec.device_index = a->t[k].device_index;
            continue;
        }
        t = &a->t[k];
        f = &a->t[first];
        if (t->device != f->device || (t->device == CKC_DEVICE_CUDA && t->device_index != f->device_index)) {
            char dt[32];
            char df[32];
            describe_device(t, dt, sizeof dt);
            describe_device(f, df, sizeof df);
            return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s' is on %s but '%s' is on %s",
                            a->sig->tensors[k].name, dt, a->sig->tensors[first].name, df);
        }
    }
    return CKC_OK;
}

static ckc_status
wrong_dtype(const ckc_tensor_arg *ta, ckc_dtype got, ckc_error *err)
{
    char allowed[128] = "";
    size_t used = 0;
    for (int d = 0; d < CKC_DTYPE_COUNT; d++) {
        if (ta->dtypes & CKC_DTYPE_BIT(d)) {
            used += (size_t)PyOS_snprintf(allowed + used, sizeof allowed - used, "%s%s", used ? ", " : "",
                                          ckc_dtype_name((ckc_dtype)d));
        }
    }
    return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s': expected dtype %s, got %s", ta->name, allowed,
                    ckc_dtype_name(got));
}

static ckc_status
import_tensors(PyObject *const *args, ckc_op_args *a, ckc_dlpack_hold *holds, ckc_error *err)
{
    const ckc_op_signature *sig = a->sig;
    for (int k = 0; k < sig->n_tensors; k++) {
        const ckc_tensor_arg *ta = &sig->tensors[k];
        PyObject *obj = args[1 + k];
        if (obj == Py_None) {
            if (!(ta->flags & CKC_ARG_OPTIONAL)) {
                return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s' is required", ta->name);
            }
            continue;
        }
        CKC_TRY(ckc_dlpack_import(obj, ta->name, (ta->flags & CKC_ARG_OUTPUT) != 0, &a->t[k], &holds[k], err));
        a->present[k] = 1;
        if (!(ta->dtypes & CKC_DTYPE_BIT(a->t[k].dtype))) {
            return wrong_dtype(ta, a->t[k].dtype, err);
        }
    }
    return check_devices(a, err);
}

static ckc_status
parse_ints(PyObject *const *args, ckc_op_args *a, ckc_error *err)
{
    const ckc_op_signature *sig = a->sig;
    const Py_ssize_t base = 1 + sig->n_tensors;
    long long nthreads;
    for (int k = 0; k < sig->n_ints; k++) {
        a->i[k] = PyLong_AsLongLong(args[base + k]);
        if (a->i[k] == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s': expected an integer", sig->ints[k]);
        }
    }
    a->exec.stream = (uintptr_t)PyLong_AsUnsignedLongLong(args[base + sig->n_ints]);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return CKC_FAIL(err, CKC_ERR_TYPE, "argument 'stream': expected a non-negative integer");
    }
    nthreads = PyLong_AsLongLong(args[base + sig->n_ints + 1]);
    if (nthreads < 1 || nthreads > 1024) {
        PyErr_Clear();
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'nthreads': expected 1..1024");
    }
    a->exec.nthreads = (int)nthreads;
    return CKC_OK;
}

/* The checking mode: the optional last argument, else CKC_CHECK_LAUNCH; -1 with
 * the Python exception set when the call has the wrong arity or mode. */
static long
check_mode(const ckc_op_spec *spec, PyObject *const *args, Py_ssize_t nargs)
{
    const Py_ssize_t expected = 1 + spec->sig.n_tensors + spec->sig.n_ints + 2;
    long check;
    if (nargs == expected) {
        return CKC_CHECK_LAUNCH;
    }
    if (nargs != expected + 1) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", spec->sig.name, expected, nargs);
        return -1;
    }
    check = PyLong_AsLong(args[expected]);
    if (check < CKC_CHECK_LAUNCH || check > CKC_CHECK_OP) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_ValueError, "%s(): check must be 0 (launch), 1 (boundary) or 2 (op)",
                         spec->sig.name);
        }
        return -1;
    }
    return check;
}

static PyObject *
call_op(PyObject *module, int index, PyObject *const *args, Py_ssize_t nargs)
{
    const ckc_op_spec *spec = ckc_op_table[index];
    ckc_dlpack_hold holds[CKC_OP_MAX_TENSORS] = {{0}};
    const long check = check_mode(spec, args, nargs);
    const char *op;
    ckc_op_args a;
    ckc_error err;
    ckc_fault fault;
    ckc_status status;
    if (check < 0) {
        return NULL;
    }
    op = PyUnicode_AsUTF8AndSize(args[0], NULL);
    if (op == NULL) {
        return NULL;
    }
    memset(&a, 0, sizeof a);
    a.sig = &spec->sig;
    err.status = CKC_OK;
    err.device_error[0] = '\0';
    status = import_tensors(args, &a, holds, &err);
    if (status == CKC_OK) {
        status = parse_ints(args, &a, &err);
    }
    if (status == CKC_OK) {
        Py_BEGIN_ALLOW_THREADS
        status = ckc_op_run(spec, op, &a, (int)check, &err, &fault);
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < spec->sig.n_tensors; k++) {
        ckc_dlpack_release(&holds[k]);
    }
    if (status != CKC_OK) {
        if (ckc_diag_is_fault(status)) {
            ckc_diag_raise(ckc_state(module), &err, &fault);
        } else {
            ckc_raise_error(ckc_state(module), op, &err);
        }
        return NULL;
    }
    Py_RETURN_NONE;
}

/* One C function per table index (self is the module, as for any module
 * function), so a call finds its spec without a lookup. */
#define OP_FUNCTION(k)                                                                   \
    static PyObject *op_function_##k(PyObject *m, PyObject *const *args, Py_ssize_t nargs) \
    {                                                                                    \
        return call_op(m, k, args, nargs);                                               \
    }
OP_FUNCTION(0) OP_FUNCTION(1) OP_FUNCTION(2) OP_FUNCTION(3) OP_FUNCTION(4) OP_FUNCTION(5) OP_FUNCTION(6)
OP_FUNCTION(7) OP_FUNCTION(8) OP_FUNCTION(9) OP_FUNCTION(10) OP_FUNCTION(11) OP_FUNCTION(12) OP_FUNCTION(13)
OP_FUNCTION(14) OP_FUNCTION(15) OP_FUNCTION(16) OP_FUNCTION(17) OP_FUNCTION(18) OP_FUNCTION(19)
OP_FUNCTION(20) OP_FUNCTION(21) OP_FUNCTION(22) OP_FUNCTION(23) OP_FUNCTION(24) OP_FUNCTION(25)
OP_FUNCTION(26) OP_FUNCTION(27) OP_FUNCTION(28) OP_FUNCTION(29) OP_FUNCTION(30) OP_FUNCTION(31)

typedef PyObject *(*fastcall_fn)(PyObject *, PyObject *const *, Py_ssize_t);

static const fastcall_fn op_functions[CKC_MAX_OPS] = {
    op_function_0, op_function_1, op_function_2, op_function_3, op_function_4, op_function_5,
    op_function_6, op_function_7, op_function_8, op_function_9, op_function_10, op_function_11,
    op_function_12, op_function_13, op_function_14, op_function_15, op_function_16, op_function_17,
    op_function_18, op_function_19, op_function_20, op_function_21, op_function_22, op_function_23,
    op_function_24, op_function_25, op_function_26, op_function_27, op_function_28, op_function_29,
    op_function_30, op_function_31,
};

int
ckc_add_op_functions(PyObject *m, ckc_module_state *st)
{
    int k;
    for (k = 0; ckc_op_table[k] != NULL; k++) {
        if (k >= CKC_MAX_OPS) {
            PyErr_SetString(PyExc_RuntimeError, "more ops than CKC_MAX_OPS (module/state.h)");
            return -1;
        }
        st->op_defs[k].ml_name = ckc_op_table[k]->sig.name;
        st->op_defs[k].ml_meth = (PyCFunction)(void (*)(void))op_functions[k];
        st->op_defs[k].ml_flags = METH_FASTCALL;
        st->op_defs[k].ml_doc = ckc_op_table[k]->doc;
    }
    st->op_defs[k].ml_name = NULL; /* the sentinel */
    return PyModule_AddFunctions(m, st->op_defs);
}
