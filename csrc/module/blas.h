/* SPDX-License-Identifier: Apache-2.0 */
/* The GEMM seam's Python face (module/blas.c), for module.c. */
#ifndef CKC_MODULE_BLAS_H
#define CKC_MODULE_BLAS_H

/* Adds blas_stats and blas_reset (and, in _C_emu, the fakes) to m; nothing
 * in a build without a GPU. */
int ckc_blas_add(PyObject *m);

#endif /* CKC_MODULE_BLAS_H */
