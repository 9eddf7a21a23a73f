/* SPDX-License-Identifier: Apache-2.0 */
/* What Python reads from C (module/shared.c), for module.c. */
#ifndef CKC_MODULE_SHARED_H
#define CKC_MODULE_SHARED_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Adds the codes and limits shared with Python (contract/codes.h), the padded
 * shapes and int8_linear_plan to m. */
int ckc_add_shared(PyObject *m);

#endif /* CKC_MODULE_SHARED_H */
