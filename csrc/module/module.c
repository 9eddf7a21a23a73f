/* SPDX-License-Identifier: Apache-2.0 */
/* comfy_kitchen_c._C (and _C_emu, the same sources on the emulated device):
 * the module itself.  Multi-phase init (PEP 489): the exec slot creates the
 * exception classes into the module state (module/state.c; _C_emu takes
 * _C's), adds the op functions (module/calls.c), the shared codes
 * (module/shared.c), the diagnostics (module/faults.c), the settings
 * (module/configure.c) and the functions below, which reach the devices only
 * through ops/devices.h. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "blas.h"
#include "calls.h"
#include "faults.h"
#include "hazards.h"
#include "ops/devices.h"
#include "configure.h"
#include "shared.h"
#include "state.h"

#if defined(CKC_EMULATED)
/* The emulated-device module raises the very classes of _C, so callers catch
 * one set of exceptions whichever module ran the op. */
static int
add_exceptions(PyObject *m, ckc_module_state *st)
{
    const ckc_taken taken[] = {{"KitchenError", &st->kitchen_error},
                               {"ArgumentError", &st->argument_error},
                               {"ArgumentTypeError", &st->argument_type_error}};
    (void)m;
    return ckc_take_from_c(taken, (int)(sizeof taken / sizeof taken[0]));
}
#else
static int
add_exceptions(PyObject *m, ckc_module_state *st)
{
    st->kitchen_error = ckc_new_exception(m, "KitchenError", "Base class of every error comfy-kitchen-c raises.",
                                      NULL, NULL);
    if (st->kitchen_error == NULL) {
        return -1;
    }
    st->argument_error = ckc_new_exception(
        m, "ArgumentError", "An argument's shape, size or value is invalid for the op (a ValueError).",
        st->kitchen_error, PyExc_ValueError);
    st->argument_type_error = ckc_new_exception(
        m, "ArgumentTypeError", "An argument's type, dtype or device is invalid for the op (a TypeError).",
        st->kitchen_error, PyExc_TypeError);
    return st->argument_error != NULL && st->argument_type_error != NULL ? 0 : -1;
}
#endif

static PyObject *
cpu_isa(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    return PyUnicode_FromString(ckc_devices_cpu_isa());
}

static PyObject *
cpu_threads(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    return PyUnicode_FromString(ckc_devices_cpu_threads());
}

static PyObject *
cpu_isas(PyObject *self, PyObject *args)
{
    const char *const *names = ckc_devices_cpu_isas();
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
    if (name == NULL) {
        return NULL;
    }
    if (!ckc_devices_select_cpu_isa(name)) {
        PyErr_Format(ckc_state(self)->argument_error, "set_cpu_isa: argument 'isa': '%s' is not available here",
                     name);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
set_blas_search_dirs(PyObject *self, PyObject *arg)
{
    const char *dirs = PyUnicode_AsUTF8AndSize(arg, NULL);
    (void)self;
    if (dirs == NULL) {
        return NULL;
    }
    ckc_devices_set_blas_search_dirs(dirs);
    Py_RETURN_NONE;
}

/* For `doctor`: (driver, runtime) CUDA versions, or None in a build without a GPU runtime. */
static PyObject *
cuda_versions(PyObject *self, PyObject *args)
{
    int driver = 0;
    int runtime = 0;
    ckc_error err;
    (void)args;
    if (!ckc_devices_have_gpu_runtime()) {
        Py_RETURN_NONE;
    }
    err.status = CKC_OK;
    if (ckc_devices_cuda_versions(&driver, &runtime, &err) != CKC_OK) {
        ckc_raise_error(ckc_state(self), "cuda_versions", &err);
        return NULL;
    }
    return Py_BuildValue("(ii)", driver, runtime);
}

/* For `doctor` and the selftest: None when the CUDA driver is usable, else why not. */
/* kernel_images(): one (module, kind, arch, version, zstd, driver) per image of the fatbins. */
static PyObject *
kernel_images(PyObject *self, PyObject *args)
{
    ckc_kernel_image images[256];
    const int n = ckc_devices_kernel_images(images, 256);
    PyObject *tuple = PyTuple_New(n < 256 ? n : 256);
    (void)self;
    (void)args;
    for (Py_ssize_t i = 0; tuple != NULL && i < PyTuple_Size(tuple); i++) {
        const ckc_kernel_image *x = &images[i];
        PyObject *item = Py_BuildValue("(ssi(ii)ii)", x->module, x->sass ? "sass" : "ptx", x->arch,
                                       x->version_major, x->version_minor, x->zstd, x->driver);
        if (item == NULL || PyTuple_SetItem(tuple, i, item) < 0) { /* SetItem takes item, even on failure */
            Py_CLEAR(tuple);
        }
    }
    return tuple;
}

static PyObject *
kernels_driver(PyObject *self, PyObject *arg)
{
    const long cc = PyLong_AsLong(arg);
    (void)self;
    if (cc == -1 && PyErr_Occurred()) {
        return NULL;
    }
    return PyLong_FromLong(cc == 0 ? ckc_devices_kernels_driver_min() : ckc_devices_kernels_driver_for((int)cc));
}

static PyObject *
kernel_image(PyObject *self, PyObject *arg)
{
    size_t bytes = 0;
    const char *name = PyUnicode_AsUTF8AndSize(arg, NULL);
    const unsigned char *data = name != NULL ? ckc_devices_kernel_image(name, &bytes) : NULL;
    (void)self;
    if (name == NULL) {
        return NULL;
    }
    if (data == NULL) {
        Py_RETURN_NONE;
    }
    return PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)bytes);
}

static PyObject *
cuda_driver(PyObject *self, PyObject *args)
{
    char why[600];
    (void)self;
    (void)args;
    if (!ckc_devices_cuda_driver_problem(why, sizeof why)) {
        Py_RETURN_NONE;
    }
    return PyUnicode_FromString(why);
}

static PyMethodDef module_functions[] = {
    {"cpu_isa", cpu_isa, METH_NOARGS, "cpu_isa()\n--\n\nInstruction set of the CPU kernels in use."},
    {"cpu_threads", cpu_threads, METH_NOARGS,
     "cpu_threads()\n--\n\nWho runs the CPU kernels' parallel loops: 'openmp' (torch's OpenMP team) or 'pool' (ours)."},
    {"cpu_isas", cpu_isas, METH_NOARGS,
     "cpu_isas()\n--\n\nInstruction sets this build can run on this CPU, best first."},
    {"set_cpu_isa", set_cpu_isa, METH_O,
     "set_cpu_isa(isa)\n--\n\nUse the CPU kernels built for isa (one of cpu_isas())."},
    {"cuda_versions", cuda_versions, METH_NOARGS,
     "cuda_versions()\n--\n\n(driver, runtime) CUDA versions as 1000*major + 10*minor (driver 0: none "
     "installed or usable), or None in a build without CUDA; runtime: the CUDA of the nvcc that built the "
     "kernels."},
    {"kernel_images", kernel_images, METH_NOARGS,
     "kernel_images()\n--\n\nThe GPU kernels' images: (fatbin, 'sass' or 'ptx', architecture (90: 9.0), "
     "(version major, minor): the PTX ISA or the cubin's ELF version, zstd-compressed, the oldest CUDA driver "
     "that reads it), one per image of each fatbin; [] without CUDA kernels."},
    {"kernels_driver", kernels_driver, METH_O,
     "kernels_driver(cc)\n--\n\nThe oldest CUDA driver (12080: CUDA 12.8) under which every fatbin loads on a "
     "GPU of compute capability cc (10 * major + minor), 0 when no driver can; cc 0: on any GPU."},
    {"kernel_image", kernel_image, METH_O,
     "kernel_image(name)\n--\n\nThe bytes of fatbin `name` (\"int8\"), None when the build has none."},
    {"cuda_driver", cuda_driver, METH_NOARGS,
     "cuda_driver()\n--\n\nNone when the CUDA driver can run this build's kernels (or the build has none), "
     "else why it cannot (no driver, a driver too old, no GPU)."},
    {NULL, NULL, 0, NULL},
};

/* Only where a GPU runtime loads cuBLASLt (comfy_kitchen_c.ops looks for the attribute). */
static PyMethodDef blas_functions[] = {
    {"set_blas_search_dirs", set_blas_search_dirs, METH_O,
     "set_blas_search_dirs(dirs)\n--\n\nDirectories (os.pathsep-separated) to search for cuBLASLt at first use."},
    {NULL, NULL, 0, NULL},
};

static int
module_exec(PyObject *m)
{
    ckc_module_state *st = ckc_state(m);
    ckc_devices_init();
    if (add_exceptions(m, st) < 0 || ckc_diag_add(m, st) < 0 || ckc_blas_add(m) < 0 ||
        ckc_add_op_functions(m, st) < 0 || ckc_add_shared(m) < 0 || PyModule_AddFunctions(m, module_functions) < 0 ||
        ckc_add_hazard_functions(m) < 0 ||
        (ckc_devices_have_gpu_runtime() && PyModule_AddFunctions(m, blas_functions) < 0) ||
        PyModule_AddIntConstant(m, "HAS_CUDA", ckc_devices_have_cuda()) < 0 ||
        ckc_configure_add(m) < 0) { /* last: the settings, once everything they reach is there */
        return -1;
    }
    return 0;
}

static int
module_traverse(PyObject *m, visitproc visit, void *arg)
{
    ckc_module_state *st = ckc_state(m);
#define VISIT_CLASS(name) Py_VISIT(st->name);
    CKC_STATE_CLASSES(VISIT_CLASS)
#undef VISIT_CLASS
    return 0;
}

static int
module_clear(PyObject *m)
{
    ckc_module_state *st = ckc_state(m);
#define CLEAR_CLASS(name) Py_CLEAR(st->name);
    CKC_STATE_CLASSES(CLEAR_CLASS)
#undef CLEAR_CLASS
    return 0;
}

static void
module_free(void *m)
{
    (void)module_clear((PyObject *)m);
}

#if defined(CKC_EMULATED)
#define CKC_MODULE_NAME "_C_emu"
#define CKC_MODULE_INIT PyInit__C_emu
#define CKC_MODULE_DOC "The ops of comfy-kitchen-c on the emulated GPU device (tests)."
#else
#define CKC_MODULE_NAME "_C"
#define CKC_MODULE_INIT PyInit__C
#define CKC_MODULE_DOC "C kernels of comfy-kitchen-c.  Call them through comfy_kitchen_c.ops."
#endif

/* The slot's value is a void *: the exec function goes through an integer, as
 * ISO C has no direct conversion between function and object pointers. */
static PyModuleDef_Slot module_slots[] = {
    {Py_mod_exec, (void *)(uintptr_t)module_exec},
    {0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = CKC_MODULE_NAME,
    .m_doc = CKC_MODULE_DOC,
    .m_size = sizeof(ckc_module_state),
    .m_slots = module_slots,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC
CKC_MODULE_INIT(void)
{
    return PyModuleDef_Init(&module_def);
}
