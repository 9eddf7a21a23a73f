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

typedef struct {
    PyObject *kitchen_error;
    PyObject *argument_error;
    PyObject *argument_type_error;
    /* the CudaFault family (module/faults.c) */
    PyObject *cuda_fault;
    PyObject *launch_error;
    PyObject *kernel_fault;
    PyObject *staging_fault;
    PyObject *hang_suspected;
    PyObject *capture_error; /* CUDA-graph capture refusals (CKC_ERR_CAPTURE) */
    PyMethodDef op_defs[CKC_N_OPS + 1];
} ckc_module_state;

static inline ckc_module_state *
ckc_state(PyObject *module)
{
    return (ckc_module_state *)PyModule_GetState(module);
}

/* A new exception class comfy_kitchen_c.<name> deriving from base1 (and base2
 * when not NULL), or from Exception when base1 is NULL; also added to m. */
PyObject *ckc_new_exception(PyObject *m, const char *name, const char *doc, PyObject *base1, PyObject *base2);

/* Raises err (not a device fault) as the exception of its status, "op: message". */
void ckc_raise_error(ckc_module_state *st, const char *op, const ckc_error *err);

/* Adds one function per op of ops/op_list.h to m, and their names as OP_FUNCTIONS (module/calls.c). */
int ckc_add_op_functions(PyObject *m, ckc_module_state *st);

/* Adds the codes and limits shared with Python (contract/codes.h) and
 * int8_linear_plan to m (module/shared.c). */
int ckc_add_shared(PyObject *m);

#endif /* CKC_MODULE_STATE_H */
