/* SPDX-License-Identifier: Apache-2.0 */
/* What the GEMM seam (csrc/gpu/blas_plan.c) reports, and what the tests tell
 * the emulated device's heuristic: shared by the GPU layer and the module,
 * which shows them to Python (blas_stats, blas_fake_heuristic) through the
 * devices' facade (ops/devices.h). */
#ifndef CKC_CONTRACT_BLAS_REPORT_H
#define CKC_CONTRACT_BLAS_REPORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Slots of the GEMM plan cache at most. */
#define CKC_BLAS_CACHE_MAX 256

/* Candidates the emulated device's heuristic answers with at most. */
#define CKC_BLAS_EMU_CANDIDATES 16

/* Bugs the tests plant in the emulated int8 GEMM, to show that its comparison with
 * the CPU path fails on one (tests/test_linear_gpu_path.py). */
enum { CKC_BLAS_EMU_BUG_NONE = 0, CKC_BLAS_EMU_BUG_LAST_TERM = 1, CKC_BLAS_EMU_BUG_COUNT = 2 };

/* What the algorithm filter reads of one of the heuristic's answers. */
typedef struct {
    int ok;              /* the heuristic's state for it is success */
    size_t workspace;    /* bytes it needs */
    int32_t split_k;     /* its SPLITK_NUM (0 or 1: K not split) */
    uint32_t reduction;  /* its REDUCTION_SCHEME (0: none) */
} ckc_blas_candidate;

/* Bytes of an algorithm as the GEMM seam keeps it (cuBLASLt's cublasLtMatmulAlgo_t;
 * the emulated device's candidate index in the first four). */
#define CKC_BLAS_ALGO_BYTES 64

/* Where the algorithm of a shape class came from (gpu/blas_tune.h). */
enum { CKC_BLAS_FROM_HEURISTIC = 0, CKC_BLAS_FROM_TIMING = 1, CKC_BLAS_FROM_FILE = 2 };

/* One shape class's choice, as blas_choices() reports it. */
typedef struct {
    int device;
    int64_t m_bucket, n, k; /* the class: rows up to m_bucket (a power of two), n, k */
    int index;              /* the chosen candidate's place in the heuristic's answer when chosen */
    int candidates;         /* how many were eligible (timed, when timing chose) */
    float us;               /* its time per GEMM when timed (0: not timed) */
    int source;             /* CKC_BLAS_FROM_* */
} ckc_blas_choice;

/* Counters of the GEMM plans, for tests and gpu_check. */
typedef struct {
    long hits;           /* GEMMs whose plan was cached */
    long misses;         /* GEMMs that asked the heuristic */
    long evictions;      /* plans freed to make room */
    long uncached;       /* plans used once and freed: their slot, or every slot, was busy */
    long rejected;       /* candidates skipped by the filter */
    int last_choice;     /* index of the last chosen candidate, -1 before any */
    int entries;         /* plans cached now */
    int capacity;        /* slots */
    size_t last_workspace; /* bytes of workspace the last GEMM was given (0: none) */
    long timed;          /* GEMMs run to time candidates (gpu/blas_tune.c) */
    long tunings;        /* shape classes chosen by timing */
    long from_file;      /* plans whose algorithm came from COMFY_KITCHEN_C_GEMM_CACHE's file */
} ckc_blas_stats;

#ifdef __cplusplus
}
#endif

#endif /* CKC_CONTRACT_BLAS_REPORT_H */
