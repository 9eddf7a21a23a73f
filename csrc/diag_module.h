/* The diagnostics wing's Python face (diag_module.c), for module.c. */
#ifndef CKC_DIAG_MODULE_H
#define CKC_DIAG_MODULE_H

#include "diag/checked.h"

/* Adds the CudaFault classes (or, in _C_emu, takes _C's), the flight ring and
 * the diagnostic functions to m.  Call after KitchenError exists. */
int ckc_diag_add(PyObject *m);

/* Whether status is a device fault (raised by ckc_diag_raise). */
int ckc_diag_is_fault(ckc_status status);

/* CaptureError (raised for CKC_ERR_CAPTURE). */
PyObject *ckc_diag_capture_error(void);

/* Sets the CudaFault subclass of err->status as the Python exception. */
void ckc_diag_raise(const ckc_error *err, const ckc_fault *fault);

#endif /* CKC_DIAG_MODULE_H */
