/* SPDX-License-Identifier: Apache-2.0 */
/* The GEMM seam's Python face (blas_module.c), for module.c. */
#ifndef CKC_BLAS_MODULE_H
#define CKC_BLAS_MODULE_H

/* Adds blas_stats and blas_reset (and, in _C_emu, the fakes) to m; nothing
 * in a build without a GPU. */
int ckc_blas_add(PyObject *m);

#endif /* CKC_BLAS_MODULE_H */
