/* SPDX-License-Identifier: Apache-2.0 */
/* The int8 GEMM's algorithm chosen by timing, once per shape class (issue 22,
 * item 1).  cuBLASLt's heuristic ranks its algorithms by a model of the GPU;
 * its first answer is often not the fastest (the H200 run at 8a578f0 reached
 * a few hundred of ~1,979 dense int8 TOPS), so at the first GEMM of a shape class
 * outside a CUDA-graph capture every eligible candidate (blas_plan.h's filter:
 * no split-K, no reduction scheme, workspace that fits) is run on the
 * caller's stream and timed, and the fastest is kept for the process.
 *
 * A shape class is the plan key (blas_plan.h) with M rounded up to a power
 * of two: a model's steps vary M (batch and tokens) more than anything, and
 * an algorithm serves every M (the backend checks it for the exact problem
 * before use, else falls back to the heuristic).  With
 * COMFY_KITCHEN_C_GEMM_CACHE naming a file, each choice is appended there
 * with the GPU's name, the driver's and the library's versions, and read back
 * by later processes on the same GPU, driver and library: a restart does not
 * time again.  Inside a capture, or with COMFY_KITCHEN_C_GEMM_TUNING=0,
 * nothing is timed: a known choice is used, else the heuristic's first
 * eligible answer.
 *
 * No device runtime here: the backends (blas_cublaslt.c, blas_emu.c) lend
 * ckc_blas_pick, the one policy, a candidate's algorithm bytes, a check of a
 * known algorithm and the timing of one candidate, so the emulated device runs
 * the very logic cuBLASLt's backend runs, with timings the tests make up. */
#ifndef CKC_GPU_BLAS_TUNE_H
#define CKC_GPU_BLAS_TUNE_H

#include <stddef.h>
#include <stdint.h>

#include "blas_plan.h"
#include "contract/blas_report.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a file entry is valid for: the same GPU model, driver and library. */
typedef struct {
    char gpu[96];
    int driver;
    size_t library;
} ckc_blas_identity;

/* m rounded up to a power of two (1 for m <= 1). */
int64_t ckc_blas_m_bucket(int64_t m);

/* The class of a plan key (ckc_blas_int8_key): its M, key.v[2], bucketed. */
ckc_blas_key ckc_blas_class_of(const ckc_blas_key *plan_key);

/* Whether a GEMM may be timed now: tuning on (COMFY_KITCHEN_C_GEMM_TUNING,
 * or ckc_blas_tune_configure) and the stream not being captured. */
int ckc_blas_tuning_allowed(int capturing);

/* The known choice of cls for id (made by timing in this process, or read
 * from the cache file, which is read at the first call): 1 with its algorithm
 * bytes, source and index (its place in the heuristic's answer it was chosen
 * from), else 0. */
int ckc_blas_known(const ckc_blas_identity *id, const ckc_blas_key *cls, unsigned char algo[CKC_BLAS_ALGO_BYTES],
                   int *source, int *index);

/* Times each of the count eligible candidates (indices into the heuristic's
 * answer) with time_one, which runs candidate i and returns 0 with its time
 * in *us, or nonzero when it could not (that candidate is passed over).
 * Returns the position in eligible of the fastest (ties: the earlier, i.e.
 * the heuristic's order), -1 when none could be timed; *best_us its time. */
int ckc_blas_time_candidates(const int *eligible, int count, int (*time_one)(void *ctx, int i, float *us), void *ctx,
                             float *best_us);

/* Keeps the choice of cls (and appends it to the cache file when one is set
 * and source is CKC_BLAS_FROM_TIMING).  index: the candidate's place in the
 * heuristic's answer; candidates: how many were eligible. */
void ckc_blas_remember(const ckc_blas_identity *id, const ckc_blas_key *cls,
                       const unsigned char algo[CKC_BLAS_ALGO_BYTES], int index, int candidates, float us,
                       int source);

/* What a backend lends ckc_blas_pick, each with ctx. */
typedef struct {
    /* Candidate i's algorithm bytes (i: its place in the heuristic's answer). */
    void (*algo_of)(void *ctx, int i, unsigned char algo[CKC_BLAS_ALGO_BYTES]);
    /* Whether a known algorithm serves this exact problem: its place in this
     * heuristic's answer, else chosen_at (its place in the answer it came from)
     * when it serves all the same, else -1 (the class is chosen again). */
    int (*accepts)(void *ctx, const unsigned char algo[CKC_BLAS_ALGO_BYTES], int chosen_at);
    /* ckc_blas_time_candidates' time_one. */
    int (*time_one)(void *ctx, int i, float *us);
    void *ctx;
} ckc_blas_backend;

/* The algorithm of a new plan, the one policy of both backends, into algo:
 * the class's known choice where the backend accepts it (not a heuristic's
 * choice where this problem can be timed), else the fastest of the eligible
 * candidates where timing is allowed and there is a choice, else the
 * heuristic's first eligible one; remembered (not inside a capture, where
 * nothing is timed).  Returns its place in the heuristic's answer (also
 * noted as blas_stats' last_choice); *final = 0 for a choice made only because
 * the stream is captured: its plan is used once, not cached, so that the
 * problem's first GEMM outside the capture times the class. */
int ckc_blas_pick(const ckc_blas_identity *id, const ckc_blas_key *plan_key, const int *eligible, int n, int capturing,
                  const ckc_blas_backend *backend, unsigned char algo[CKC_BLAS_ALGO_BYTES], int *final);

/* Counts GEMMs run for timing (for blas_stats). */
void ckc_blas_count_timed(long runs);

/* The report of the choices, the settings' override (which forgets every
 * choice, so the file is read again at the next GEMM) and the counters:
 * ckc_blas_choices, ckc_blas_tune_configure, ckc_blas_tune_counters and
 * ckc_blas_tune_reset, declared in gpu.h for the devices' facade. */

#ifdef __cplusplus
}
#endif

#endif /* CKC_GPU_BLAS_TUNE_H */
