/* SPDX-License-Identifier: Apache-2.0 */
/* The diagnostics wing's Python face (module/faults.c), for the module. */
#ifndef CKC_MODULE_FAULTS_H
#define CKC_MODULE_FAULTS_H

#include "diag/checked.h"
#include "state.h"

/* Adds the CudaFault classes into st (or, in _C_emu, takes _C's), the flight
 * ring and the diagnostic functions to m.  Call after st->kitchen_error exists. */
int ckc_diag_add(PyObject *m, ckc_module_state *st);

/* Whether status is a device fault (raised by ckc_diag_raise). */
int ckc_diag_is_fault(ckc_status status);

/* Sets the CudaFault subclass of err->status as the Python exception. */
void ckc_diag_raise(ckc_module_state *st, const ckc_error *err, const ckc_fault *fault);

#endif /* CKC_MODULE_FAULTS_H */
