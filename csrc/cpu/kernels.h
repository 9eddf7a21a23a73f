/* CPU kernels (C, multi-threaded).  Each takes a validated parameter block and
 * the thread count to use, and returns CKC_OK or an error it filled. */
#ifndef CKC_CPU_KERNELS_H
#define CKC_CPU_KERNELS_H

#include "ops/params.h"
#include "status.h"

ckc_status ckc_cpu_int8_rowwise(const ckc_int8_rowwise_params *p, int nthreads, ckc_error *err);
ckc_status ckc_cpu_int8_tensorwise(const ckc_int8_tensorwise_params *p, int nthreads, ckc_error *err);
ckc_status ckc_cpu_hadamard_rows(const ckc_hadamard_rows_params *p, int nthreads, ckc_error *err);
ckc_status ckc_cpu_int8_dequant(const ckc_int8_dequant_params *p, int nthreads, ckc_error *err);
ckc_status ckc_cpu_nvfp4_quant(const ckc_nvfp4_quant_params *p, int nthreads, ckc_error *err);
ckc_status ckc_cpu_nvfp4_dequant(const ckc_nvfp4_dequant_params *p, int nthreads, ckc_error *err);

#endif /* CKC_CPU_KERNELS_H */
