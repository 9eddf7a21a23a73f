/* comfy_kitchen_c._C: the Python face of the C ops.  Every op spec of
 * ckc_op_table becomes one function taking
 *     (op_name, tensor capsules..., ints..., stream, nthreads[, check])
 * which imports the DLPack capsules, checks dtypes and devices, runs the op
 * with the GIL released under the checks of `check` (diag/checked.h: 0 launch,
 * the default, 1 boundary, 2 op), hands the capsules' tensors back, and raises
 * the op-named exception for any failure.  Exceptions are created here once
 * (the CudaFault family in diag_module.c). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "cpu/kernels.h"
#include "cpu/parallel.h"
#include "blas_module.h"
#include "diag_module.h"
#include "dlpack.h"
#include "gpu/blas.h"
#include "gpu/runtime.h"
#include "ops/op.h"

#define CKC_MAX_OPS 32

static PyObject *KitchenError;
static PyObject *ArgumentError;
static PyObject *ArgumentTypeError;

static PyMethodDef op_defs[CKC_MAX_OPS];

static void
raise_error(const char *op, const ckc_error *err)
{
    PyObject *type;
    switch (err->status) {
    case CKC_ERR_VALUE:
        type = ArgumentError;
        break;
    case CKC_ERR_TYPE:
        type = ArgumentTypeError;
        break;
    case CKC_ERR_MEMORY:
        type = PyExc_MemoryError;
        break;
    default:
        type = PyExc_RuntimeError;
        break;
    }
    PyErr_Format(type, "%s: %s", op, err->message);
}

static void
describe_device(const ckc_tensor *t, char *buf, size_t cap)
{
    if (t->device == CKC_DEVICE_CPU) {
        PyOS_snprintf(buf, cap, "cpu");
    } else {
        PyOS_snprintf(buf, cap, "cuda:%d", (int)t->device_index);
    }
}

/* Tensors of one call must share a device; returns the index of the first. */
static ckc_status
check_devices(ckc_op_args *a, ckc_error *err)
{
    int first = -1;
    for (int k = 0; k < a->spec->n_tensors; k++) {
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
                            a->spec->tensors[k].name, dt, a->spec->tensors[first].name, df);
        }
    }
    return CKC_OK;
}

static ckc_status
import_tensors(PyObject *args, ckc_op_args *a, ckc_dlpack_hold *holds, ckc_error *err)
{
    const ckc_op_spec *spec = a->spec;
    for (int k = 0; k < spec->n_tensors; k++) {
        const ckc_tensor_arg *ta = &spec->tensors[k];
        PyObject *obj = PyTuple_GetItem(args, 1 + k);
        if (obj == Py_None) {
            if (!(ta->flags & CKC_ARG_OPTIONAL)) {
                return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s' is required", ta->name);
            }
            continue;
        }
        CKC_TRY(ckc_dlpack_import(obj, ta->name, (ta->flags & CKC_ARG_OUTPUT) != 0, &a->t[k], &holds[k], err));
        a->present[k] = 1;
        if (!(ta->dtypes & CKC_DTYPE_BIT(a->t[k].dtype))) {
            char allowed[128] = "";
            size_t used = 0;
            for (int d = 0; d < CKC_DTYPE_COUNT; d++) {
                if (ta->dtypes & CKC_DTYPE_BIT(d)) {
                    used += (size_t)PyOS_snprintf(allowed + used, sizeof allowed - used, "%s%s",
                                                  used ? ", " : "", ckc_dtype_name((ckc_dtype)d));
                }
            }
            return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s': expected dtype %s, got %s",
                            ta->name, allowed, ckc_dtype_name(a->t[k].dtype));
        }
    }
    return check_devices(a, err);
}

static ckc_status
parse_ints(PyObject *args, ckc_op_args *a, ckc_error *err)
{
    const ckc_op_spec *spec = a->spec;
    const Py_ssize_t base = 1 + spec->n_tensors;
    long long nthreads;
    for (int k = 0; k < spec->n_ints; k++) {
        a->i[k] = PyLong_AsLongLong(PyTuple_GetItem(args, base + k));
        if (a->i[k] == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return CKC_FAIL(err, CKC_ERR_TYPE, "argument '%s': expected an integer", spec->ints[k]);
        }
    }
    a->exec.stream = (uintptr_t)PyLong_AsUnsignedLongLong(PyTuple_GetItem(args, base + spec->n_ints));
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return CKC_FAIL(err, CKC_ERR_TYPE, "argument 'stream': expected a non-negative integer");
    }
    nthreads = PyLong_AsLongLong(PyTuple_GetItem(args, base + spec->n_ints + 1));
    if (nthreads < 1 || nthreads > 1024) {
        PyErr_Clear();
        return CKC_FAIL(err, CKC_ERR_VALUE, "argument 'nthreads': expected 1..1024");
    }
    a->exec.nthreads = (int)nthreads;
    return CKC_OK;
}

static PyObject *
call_op(PyObject *self, PyObject *args)
{
    const ckc_op_spec *spec = PyCapsule_GetPointer(self, "comfy_kitchen_c.op");
    ckc_dlpack_hold holds[CKC_OP_MAX_TENSORS] = {{0}};
    ckc_op_args a;
    ckc_error err;
    ckc_fault fault;
    ckc_status status;
    const char *op;
    Py_ssize_t expected;
    long check = CKC_CHECK_LAUNCH;
    if (spec == NULL) {
        return NULL;
    }
    expected = 1 + spec->n_tensors + spec->n_ints + 2;
    if (PyTuple_Size(args) == expected + 1) { /* the optional checking mode */
        check = PyLong_AsLong(PyTuple_GetItem(args, expected));
        if (check < CKC_CHECK_LAUNCH || check > CKC_CHECK_OP) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_ValueError, "%s(): check must be 0 (launch), 1 (boundary) or 2 (op)",
                             spec->name);
            }
            return NULL;
        }
    } else if (PyTuple_Size(args) != expected) {
        PyErr_Format(PyExc_TypeError, "%s() takes %zd arguments (%zd given)", spec->name, expected,
                     PyTuple_Size(args));
        return NULL;
    }
    op = PyUnicode_AsUTF8AndSize(PyTuple_GetItem(args, 0), NULL);
    if (op == NULL) {
        return NULL;
    }
    memset(&a, 0, sizeof a);
    a.spec = spec;
    err.status = CKC_OK;
    err.device_error[0] = '\0';
    status = import_tensors(args, &a, holds, &err);
    if (status == CKC_OK) {
        status = parse_ints(args, &a, &err);
    }
    if (status == CKC_OK) {
        Py_BEGIN_ALLOW_THREADS
        status = ckc_checked_op(op, &a, (int)check, &err, &fault);
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < spec->n_tensors; k++) {
        ckc_dlpack_release(&holds[k]);
    }
    if (status != CKC_OK) {
        if (ckc_diag_is_fault(status)) {
            ckc_diag_raise(&err, &fault);
        } else {
            raise_error(op, &err);
        }
        return NULL;
    }
    Py_RETURN_NONE;
}

#if defined(CKC_EMULATED)
/* The emulated-device module raises the very classes of _C, so callers catch
 * one set of exceptions whichever module ran the op. */
static int
add_exceptions(PyObject *m)
{
    PyObject *c = PyImport_ImportModule("comfy_kitchen_c._C");
    if (c == NULL) {
        return -1;
    }
    KitchenError = PyObject_GetAttrString(c, "KitchenError");
    ArgumentError = PyObject_GetAttrString(c, "ArgumentError");
    ArgumentTypeError = PyObject_GetAttrString(c, "ArgumentTypeError");
    Py_DECREF(c);
    if (KitchenError == NULL || ArgumentError == NULL || ArgumentTypeError == NULL) {
        return -1;
    }
    (void)m;
    return 0;
}
#else
static int
add_exceptions(PyObject *m)
{
    PyObject *bases;
    KitchenError = PyErr_NewExceptionWithDoc(
        "comfy_kitchen_c.KitchenError", "Base class of every error comfy-kitchen-c raises.", NULL, NULL);
    if (KitchenError == NULL) {
        return -1;
    }
    bases = PyTuple_Pack(2, KitchenError, PyExc_ValueError);
    if (bases == NULL) {
        return -1;
    }
    ArgumentError = PyErr_NewExceptionWithDoc(
        "comfy_kitchen_c.ArgumentError",
        "An argument's shape, size or value is invalid for the op (a ValueError).", bases, NULL);
    Py_DECREF(bases);
    if (ArgumentError == NULL) {
        return -1;
    }
    bases = PyTuple_Pack(2, KitchenError, PyExc_TypeError);
    if (bases == NULL) {
        return -1;
    }
    ArgumentTypeError = PyErr_NewExceptionWithDoc(
        "comfy_kitchen_c.ArgumentTypeError",
        "An argument's type, dtype or device is invalid for the op (a TypeError).", bases, NULL);
    Py_DECREF(bases);
    if (ArgumentTypeError == NULL) {
        return -1;
    }
    /* The statics keep their own references; the module takes new ones. */
    if (PyModule_AddObjectRef(m, "KitchenError", KitchenError) < 0 ||
        PyModule_AddObjectRef(m, "ArgumentError", ArgumentError) < 0 ||
        PyModule_AddObjectRef(m, "ArgumentTypeError", ArgumentTypeError) < 0) {
        return -1;
    }
    return 0;
}
#endif

static int
add_ops(PyObject *m)
{
    PyObject *modname = PyModule_GetNameObject(m);
    int k;
    if (modname == NULL) {
        return -1;
    }
    for (k = 0; ckc_op_table[k] != NULL; k++) {
        const ckc_op_spec *spec = ckc_op_table[k];
        PyObject *self;
        PyObject *fn;
        if (k + 1 >= CKC_MAX_OPS) {
            PyErr_SetString(PyExc_RuntimeError, "too many ops for CKC_MAX_OPS");
            break;
        }
        op_defs[k].ml_name = spec->name;
        op_defs[k].ml_meth = call_op;
        op_defs[k].ml_flags = METH_VARARGS;
        op_defs[k].ml_doc = spec->doc;
        self = PyCapsule_New((void *)spec, "comfy_kitchen_c.op", NULL);
        if (self == NULL) {
            break;
        }
        fn = PyCFunction_NewEx(&op_defs[k], self, modname);
        Py_DECREF(self);
        if (fn == NULL) {
            break;
        }
        if (PyModule_AddObjectRef(m, spec->name, fn) < 0) {
            Py_DECREF(fn);
            break;
        }
        Py_DECREF(fn);
    }
    Py_DECREF(modname);
    return ckc_op_table[k] == NULL ? 0 : -1;
}

static PyObject *
cpu_isa(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    return PyUnicode_FromString(ckc_cpu()->isa);
}

static PyObject *
cpu_isas(PyObject *self, PyObject *args)
{
    const char *const *names = ckc_cpu_available();
    PyObject *list = PyList_New(0);
    (void)self;
    (void)args;
    for (int k = 0; list != NULL && names[k] != NULL; k++) {
        PyObject *name = PyUnicode_FromString(names[k]);
        if (name == NULL || PyList_Append(list, name) < 0) {
            Py_XDECREF(name);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(name);
    }
    return list;
}

static PyObject *
set_cpu_isa(PyObject *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8AndSize(arg, NULL);
    (void)self;
    if (name == NULL) {
        return NULL;
    }
    if (!ckc_cpu_select(name)) {
        PyErr_Format(ArgumentError, "set_cpu_isa: argument 'isa': '%s' is not available here", name);
        return NULL;
    }
    Py_RETURN_NONE;
}

#if defined(CKC_WITH_GPU)
static PyObject *
set_blas_search_dirs(PyObject *self, PyObject *arg)
{
    const char *dirs = PyUnicode_AsUTF8AndSize(arg, NULL);
    (void)self;
    if (dirs == NULL) {
        return NULL;
    }
    ckc_blas_set_search_dirs(dirs);
    Py_RETURN_NONE;
}
#endif
/* For `doctor`: (driver, runtime) CUDA versions, or None in a build without a GPU runtime. */
static PyObject *
cuda_versions(PyObject *self, PyObject *args)
{
#if defined(CKC_WITH_GPU)
    int driver = 0;
    int runtime = 0;
    ckc_error err;
    (void)self;
    (void)args;
    err.status = CKC_OK;
    if (ckc_gpu_versions(&driver, &runtime, &err) != CKC_OK) {
        raise_error("cuda_versions", &err);
        return NULL;
    }
    return Py_BuildValue("(ii)", driver, runtime);
#else
    (void)self;
    (void)args;
    Py_RETURN_NONE;
#endif
}

static PyMethodDef module_functions[] = {
    {"cpu_isa", cpu_isa, METH_NOARGS, "cpu_isa()\n--\n\nInstruction set of the CPU kernels in use."},
    {"cpu_isas", cpu_isas, METH_NOARGS,
     "cpu_isas()\n--\n\nInstruction sets this build can run on this CPU, best first."},
    {"set_cpu_isa", set_cpu_isa, METH_O,
     "set_cpu_isa(isa)\n--\n\nUse the CPU kernels built for isa (one of cpu_isas())."},
#if defined(CKC_WITH_GPU)
    {"set_blas_search_dirs", set_blas_search_dirs, METH_O,
     "set_blas_search_dirs(dirs)\n--\n\nDirectories (os.pathsep-separated) to search for cuBLASLt at first use."},
#endif
    {"cuda_versions", cuda_versions, METH_NOARGS,
     "cuda_versions()\n--\n\n(driver, runtime) CUDA versions as 1000*major + 10*minor (driver 0: none "
     "installed), or None in a build without CUDA."},
    {NULL, NULL, 0, NULL},
};

#if defined(CKC_EMULATED)
#define CKC_MODULE_NAME "_C_emu"
#define CKC_MODULE_INIT PyInit__C_emu
#define CKC_HAS_CUDA 0
#define CKC_MODULE_DOC "The ops of comfy-kitchen-c on the emulated GPU device (tests)."
#else
#define CKC_MODULE_NAME "_C"
#define CKC_MODULE_INIT PyInit__C
#if defined(CKC_WITH_GPU)
#define CKC_HAS_CUDA 1
#else
#define CKC_HAS_CUDA 0
#endif
#define CKC_MODULE_DOC "C kernels of comfy-kitchen-c.  Call them through comfy_kitchen_c.ops."
#endif

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = CKC_MODULE_NAME,
    .m_doc = CKC_MODULE_DOC,
    .m_size = -1,
    .m_methods = module_functions,
};

PyMODINIT_FUNC
CKC_MODULE_INIT(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    ckc_parallel_init();
    ckc_cpu_select_default();
#if defined(CKC_WITH_GPU)
    ckc_blas_init();
#endif
    if (add_exceptions(m) < 0 || ckc_diag_add(m) < 0 || ckc_blas_add(m) < 0 || add_ops(m) < 0 ||
        PyModule_AddIntConstant(m, "HAS_CUDA", CKC_HAS_CUDA) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
