/* SPDX-License-Identifier: Apache-2.0 */
/* The op functions (module/calls.c), for module.c. */
#ifndef CKC_MODULE_CALLS_H
#define CKC_MODULE_CALLS_H

#include "state.h"

/* Adds one function per op of ops/op_list.h to m, and their names as OP_FUNCTIONS. */
int ckc_add_op_functions(PyObject *m, ckc_module_state *st);

#endif /* CKC_MODULE_CALLS_H */
