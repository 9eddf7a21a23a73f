/* SPDX-License-Identifier: Apache-2.0 */
/* The module state's exceptions (state.h): making a class (or, in _C_emu,
 * taking _C's), and raising the one of an error's status.  module.c makes the
 * base classes, faults.c the CudaFault family, and the op functions (calls.c)
 * raise them: all three lean on this file, which leans on none of them. */
#include "state.h"

PyObject *
ckc_new_exception(PyObject *m, const char *name, const char *doc, PyObject *base1, PyObject *base2)
{
    char qualified[64];
    PyObject *bases = NULL;
    PyObject *cls;
    if (base1 != NULL) {
        bases = base2 != NULL ? PyTuple_Pack(2, base1, base2) : PyTuple_Pack(1, base1);
        if (bases == NULL) {
            return NULL;
        }
    }
    PyOS_snprintf(qualified, sizeof qualified, "comfy_kitchen_c.%s", name);
    cls = PyErr_NewExceptionWithDoc(qualified, doc, bases, NULL);
    Py_XDECREF(bases);
    if (cls != NULL && PyModule_AddObjectRef(m, name, cls) < 0) {
        Py_CLEAR(cls);
    }
    return cls;
}

int
ckc_take_from_c(const ckc_taken *taken, int n)
{
    PyObject *c = PyImport_ImportModule("comfy_kitchen_c._C");
    int rc = c != NULL ? 0 : -1;
    for (int k = 0; rc == 0 && k < n; k++) {
        *taken[k].slot = PyObject_GetAttrString(c, taken[k].name);
        rc = *taken[k].slot != NULL ? 0 : -1;
    }
    Py_XDECREF(c);
    return rc;
}

void
ckc_raise_error(ckc_module_state *st, const char *op, const ckc_error *err)
{
    PyObject *type;
    switch (err->status) {
    case CKC_ERR_VALUE:
        type = st->argument_error;
        break;
    case CKC_ERR_TYPE:
        type = st->argument_type_error;
        break;
    case CKC_ERR_MEMORY:
        type = PyExc_MemoryError;
        break;
    case CKC_ERR_CAPTURE:
        type = st->capture_error;
        break;
    default:
        type = PyExc_RuntimeError;
        break;
    }
    PyErr_Format(type, "%s: %s", op, err->message);
}
