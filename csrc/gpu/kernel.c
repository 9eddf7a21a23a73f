/* SPDX-License-Identifier: Apache-2.0 */
/* The search of a kernel table by template arguments, and the launch of what it finds (see kernel.h). */
#if defined(CKC_WITH_GPU)

#include "kernel.h"

ckc_kernel *
ckc_kernel_find(ckc_kernel *table, size_t n, int a0, int a1, int a2, int a3, ckc_error *err)
{
    for (size_t i = 0; i < n; i++) {
        const int *a = table[i].args;
        if (a[0] == a0 && a[1] == a1 && a[2] == a2 && a[3] == a3) {
            return &table[i];
        }
    }
    CKC_FAIL(err, CKC_ERR_RUNTIME, "no instance of %s<%d, %d, %d, %d> in this build's kernels",
             n > 0 ? table[0].family : "?", a0, a1, a2, a3);
    return NULL;
}

ckc_status
ckc_kernel_launch(ckc_kernel *table, size_t n, int a0, int a1, int a2, int a3, const ckc_launch_cfg *cfg,
                  const ckc_karg *args, size_t nargs, ckc_error *err)
{
    ckc_kernel *k = ckc_kernel_find(table, n, a0, a1, a2, a3, err);
    return k == NULL ? err->status : ckc_gpu_launch(k, cfg, args, nargs, err);
}

#endif /* CKC_WITH_GPU */
