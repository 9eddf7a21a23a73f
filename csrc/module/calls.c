/* SPDX-License-Identifier: Apache-2.0 */
/* The op functions of _C and _C_emu: every op of the list (ops/op_list.h) becomes one
 * module function (METH_FASTCALL: no argument tuple per call) taking
 *     (op_name, tensor capsules..., ints..., stream, nthreads[, check])
 * which imports the DLPack capsules, checks dtypes and devices, runs the op
 * through the router with the GIL released under the checks of `check`
 * (diag/checked.h: 0 launch, the default, 1 boundary, 2 op), hands the
 * capsules' tensors back, and raises the op-named exception for any failure. */
#include "calls.h"
#include "contract/codes.h"
#include "dlpack.h"
#include "faults.h"
#include "ops/op.h"
#include "ops/op_list.h"
#include "ops/devices.h"
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
    if (check >= CKC_CALL_HOST_AS_DEVICE && (check & CKC_CALL_HOST_AS_DEVICE) && !ckc_devices_host_as_device()) {
        PyErr_Format(PyExc_ValueError, "%s(): host memory runs as device memory only under the test suite's "
                     "stand-in CUDA driver", spec->sig.name);
        return -1;
    }
    if ((check & ~(CKC_CALL_HOST_AS_DEVICE | (63L << CKC_CALL_DEVICE_SHIFT))) > CKC_CHECK_OP || check < 0) {
        if (!PyErr_Occurred()) {
            PyErr_Format(PyExc_ValueError, "%s(): check must be 0 (launch), 1 (boundary) or 2 (op)",
                         spec->sig.name);
        }
        return -1;
    }
    return check;
}

static PyObject *
call_op(PyObject *module, const ckc_op_spec *spec, PyObject *const *args, Py_ssize_t nargs)
{
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
    if (status == CKC_OK && (check & CKC_CALL_HOST_AS_DEVICE) && a.device == CKC_DEVICE_CPU) {
        a.device = CKC_DEVICE_CUDA;
        a.exec.device_index = (int)(check >> CKC_CALL_DEVICE_SHIFT);
    }
    if (status == CKC_OK) {
        Py_BEGIN_ALLOW_THREADS
        status = ckc_op_run(spec, op, &a, (int)(check & (CKC_CALL_HOST_AS_DEVICE - 1)), &err, &fault);
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

/* One C function per op of the list (ops/op_list.h), so a call finds its spec
 * without a lookup (self is the module, as for any module function). */
#define OP_FUNCTION(name)                                                                         \
    extern const ckc_op_spec ckc_op_##name;                                                       \
    static PyObject *op_function_##name(PyObject *m, PyObject *const *args, Py_ssize_t nargs)     \
    {                                                                                             \
        return call_op(m, &ckc_op_##name, args, nargs);                                           \
    }
CKC_OP_LIST(OP_FUNCTION)
#undef OP_FUNCTION

typedef PyObject *(*fastcall_fn)(PyObject *, PyObject *const *, Py_ssize_t);

typedef struct {
    const ckc_op_spec *spec;
    const char *name; /* the list's name, which the spec's signature must carry */
    fastcall_fn fn;
} op_function;

#define OP_ENTRY(name) {&ckc_op_##name, #name, op_function_##name},
static const op_function op_functions[] = {CKC_OP_LIST(OP_ENTRY)};
#undef OP_ENTRY

enum { N_OPS = (int)(sizeof op_functions / sizeof op_functions[0]) };
_Static_assert((int)N_OPS == (int)CKC_N_OPS, "module/state.h counts the same list");

int
ckc_add_op_functions(PyObject *m, ckc_module_state *st)
{
    PyObject *names = PyTuple_New(N_OPS);
    if (names == NULL) {
        return -1;
    }
    for (int k = 0; k < N_OPS; k++) {
        const op_function *f = &op_functions[k];
        PyObject *name = PyUnicode_FromString(f->name);
        if (name == NULL || strcmp(f->spec->sig.name, f->name) != 0) {
            Py_XDECREF(name);
            Py_DECREF(names);
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_RuntimeError, "op %s: its spec is named %s (ops/op_list.h)", f->name,
                             f->spec->sig.name);
            }
            return -1;
        }
        if (PyTuple_SetItem(names, k, name) < 0) { /* steals name */
            Py_DECREF(names);
            return -1;
        }
        st->op_defs[k].ml_name = f->name;
        st->op_defs[k].ml_meth = (PyCFunction)(void (*)(void))f->fn;
        st->op_defs[k].ml_flags = METH_FASTCALL;
        st->op_defs[k].ml_doc = f->spec->doc;
    }
    st->op_defs[N_OPS].ml_name = NULL; /* the sentinel */
    /* The names, for comfy_kitchen_c/op_list.py's check that every C op serves an op of its list */
    if (PyModule_AddObject(m, "OP_FUNCTIONS", names) < 0) {
        Py_DECREF(names);
        return -1;
    }
    return PyModule_AddFunctions(m, st->op_defs);
}
