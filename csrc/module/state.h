/* SPDX-License-Identifier: Apache-2.0 */
/* The module state of _C and _C_emu (multi-phase init, PEP 489): the exception
 * classes every function raises and the method table of the op functions.
 * _C creates the classes; _C_emu holds references to _C's, so that callers
 * catch one set of exceptions whichever module ran the op.  What is one per
 * process on purpose (the flight record, the CPU thread pool and instruction
 * set) stays with the layers that own it. */
#ifndef CKC_MODULE_STATE_H
#define CKC_MODULE_STATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "contract/status.h"
#include "ops/op_list.h"

/* The op functions a module holds (module/calls.c): one per op of the list */
#define CKC_COUNT_OP(name) +1
enum { CKC_N_OPS = 0 CKC_OP_LIST(CKC_COUNT_OP) };
#undef CKC_COUNT_OP

/* The state's exception classes, listed once for the struct and for the
 * module's traverse and clear (module.c), so none is ever left out of either:
 * the base classes (module.c), then the CudaFault family (module/faults.c),
 * capture_error the CUDA-graph capture refusals (CKC_ERR_CAPTURE). */
#define CKC_STATE_CLASSES(X)                                                                                     \
    X(kitchen_error) X(argument_error) X(argument_type_error) X(cuda_fault) X(launch_error) X(kernel_fault)      \
    X(staging_fault) X(hang_suspected) X(capture_error)

#define CKC_STATE_FIELD(name) PyObject *name;
typedef struct {
    CKC_STATE_CLASSES(CKC_STATE_FIELD)
    PyMethodDef op_defs[CKC_N_OPS + 1];
} ckc_module_state;
#undef CKC_STATE_FIELD

static inline ckc_module_state *
ckc_state(PyObject *module)
{
    return (ckc_module_state *)PyModule_GetState(module);
}

/* A new exception class comfy_kitchen_c.<name> deriving from base1 (and base2
 * when not NULL), or from Exception when base1 is NULL; also added to m. */
PyObject *ckc_new_exception(PyObject *m, const char *name, const char *doc, PyObject *base1, PyObject *base2);

/* A class (or object) of _C that _C_emu takes for its own: _C's attribute
 * `name` goes into *slot. */
typedef struct {
    const char *name;
    PyObject **slot;
} ckc_taken;

/* _C_emu's share of _C: imports _C and takes each of taken[0 .. n); 0, or -1
 * with the exception set when _C or one of them is missing. */
int ckc_take_from_c(const ckc_taken *taken, int n);

/* Raises err (not a device fault) as the exception of its status, "op: message". */
void ckc_raise_error(ckc_module_state *st, const char *op, const ckc_error *err);

#endif /* CKC_MODULE_STATE_H */
