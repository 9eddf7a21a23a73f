/* SPDX-License-Identifier: Apache-2.0 */
/* The emulated device's cross-stream hazard detector, for the tests (module/hazards.c). */
#ifndef CKC_MODULE_HAZARDS_H
#define CKC_MODULE_HAZARDS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Adds hazards_track, hazard_record, hazard_wait and hazards_take to the
 * emulated-device module (nothing to _C); -1 with an exception on failure. */
int ckc_add_hazard_functions(PyObject *m);

#endif /* CKC_MODULE_HAZARDS_H */
