/* SPDX-License-Identifier: Apache-2.0 */
/* What the GEMM seam's two backends share (blas_plan.c): which of the
 * heuristic's algorithms may run and the cache of chosen plans per problem.
 * None of it touches a device runtime,
 * so the emulated device (blas_emu.c) runs the very logic that cuBLASLt's
 * backend (blas_cublaslt.c) runs, against candidate lists the tests make up.
 *
 * Why each rule:
 * - Algorithms are taken in the heuristic's order, skipping any that splits K
 *   or names a reduction scheme: those run blocks that wait on each other's
 *   partial sums (the field report's prime suspect for a GPU hang is such a
 *   spin-wait).  Workspace is allowed, up to the call's.
 * - The heuristic query and the descriptors cost the host more than a small
 *   GEMM, and a model repeats a few shapes: a plan (descriptors and algorithm)
 *   is made once per problem, device included, and kept.  A plan serves one
 *   GEMM at a time (cuBLASLt does not say that a descriptor may be read by two
 *   threads at once): a thread that finds it busy makes its own for the call,
 *   and a full cache frees only plans no GEMM is using.
 * - The workspace is the caller's (ckc_exec: torch's caching allocator, which
 *   serves captures from the graph's pool and a nearly full GPU from its cache),
 *   never the driver's raw memory: nothing here allocates device memory. */
#ifndef CKC_GPU_BLAS_PLAN_H
#define CKC_GPU_BLAS_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "contract/blas_report.h"
#include "contract/params.h"
#include "contract/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the algorithm filter ---- */

/* (ckc_blas_candidate, contract/blas_report.h: what the filter reads of one of
 * the heuristic's answers.) */

/* The first candidate, in the heuristic's order, that is ok, splits no K, has
 * no reduction scheme and fits workspace_bytes; -1 when none does. */
int ckc_blas_choose(const ckc_blas_candidate *c, int count, size_t workspace_bytes);

/* Every candidate the filter lets through, in the heuristic's order, into out
 * (count entries at most); returns how many (blas_tune.h times them). */
int ckc_blas_eligible(const ckc_blas_candidate *c, int count, size_t workspace_bytes, int *out);

/* Records which candidate a GEMM took (blas_stats' last_choice). */
void ckc_blas_note_choice(int index);

/* ---- the plan cache ---- */

#define CKC_BLAS_KEY_LEN 12

/* A problem: kind, device, sizes, leading dimensions, pointer alignments and
 * workspace bytes (what the heuristic's answer depends on). */
typedef struct {
    int64_t v[CKC_BLAS_KEY_LEN];
} ckc_blas_key;

/* The int8 GEMM's key on exec's device with `workspace` bytes. */
ckc_blas_key ckc_blas_int8_key(const ckc_int8_gemm_params *p, int device, size_t workspace);

/* Bytes a pointer is aligned to, at most 256. */
uint32_t ckc_blas_alignment(const void *p);

typedef struct ckc_blas_entry ckc_blas_entry;

/* The cached plan of key, taken until ckc_blas_release (no other GEMM uses or
 * frees it meanwhile); NULL when none is cached or it is busy. */
ckc_blas_entry *ckc_blas_find(const ckc_blas_key *key);

/* Caches `plan` (made for key; free_plan frees it) and returns it taken.  When
 * another thread cached key meanwhile, plan is freed and that one taken, if
 * free.  NULL when it is busy or every slot is: the caller uses its plan once
 * and frees it. */
ckc_blas_entry *ckc_blas_insert(const ckc_blas_key *key, void *plan, void (*free_plan)(void *));

void *ckc_blas_plan(const ckc_blas_entry *e);
void ckc_blas_release(ckc_blas_entry *e);

/* The workspace the GEMM being planned or run was given (blas_stats' last_workspace). */
void ckc_blas_note_workspace(size_t bytes);

/* ---- counters, and the emulated device's heuristic: gpu/gpu.h ---- */

#ifdef __cplusplus
}
#endif

#endif /* CKC_GPU_BLAS_PLAN_H */
