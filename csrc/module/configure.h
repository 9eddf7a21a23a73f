/* SPDX-License-Identifier: Apache-2.0 */
/* The settings' one way into C (module/configure.c), for module.c. */
#ifndef CKC_MODULE_CONFIGURE_H
#define CKC_MODULE_CONFIGURE_H

/* Adds configure(settings) to m and puts the package's settings in force
 * (comfy_kitchen_c.settings.apply). */
int ckc_configure_add(PyObject *m);

#endif /* CKC_MODULE_CONFIGURE_H */
