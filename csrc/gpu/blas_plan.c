/* SPDX-License-Identifier: Apache-2.0 */
/* The GEMM seam's shared logic (blas_plan.h): the algorithm filter and the plan
 * cache, under one lock.  Compiled
 * into every build (it calls no device runtime; a CPU-only build never calls
 * it). */
#include <stdlib.h>
#include <string.h>

#include "blas_plan.h"
#include "gpu.h"
#include "platform/threads.h"

static ckc_mutex lock = CKC_MUTEX_INIT;

struct ckc_blas_entry {
    int used;
    int busy;             /* a GEMM is using the plan now: no other may, and it is not freed */
    uint64_t hash;        /* of key: a lookup compares 8 bytes per slot, the key only on a match */
    ckc_blas_key key;
    void *plan;
    void (*free_plan)(void *);
};

static struct ckc_blas_entry cache[CKC_BLAS_CACHE_MAX];
static int capacity = CKC_BLAS_CACHE_MAX;
static int next_victim;   /* round robin over the slots */
static ckc_blas_stats stats = {0, 0, 0, 0, 0, -1, 0, CKC_BLAS_CACHE_MAX, 0, 0, 0, 0};

/* ---- the algorithm filter ---- */

static int
eligible(const ckc_blas_candidate *c, size_t workspace_bytes)
{
    return c->ok && c->split_k <= 1 && c->reduction == 0 && c->workspace <= workspace_bytes;
}

int
ckc_blas_choose(const ckc_blas_candidate *c, int count, size_t workspace_bytes)
{
    int chosen = -1;
    int rejected = 0;
    for (int i = 0; i < count && chosen < 0; i++) {
        if (eligible(&c[i], workspace_bytes)) {
            chosen = i;
        } else {
            rejected++;
        }
    }
    ckc_mutex_lock(&lock);
    stats.rejected += rejected;
    stats.last_choice = chosen;
    ckc_mutex_unlock(&lock);
    return chosen;
}

int
ckc_blas_eligible(const ckc_blas_candidate *c, int count, size_t workspace_bytes, int *out)
{
    int n = 0;
    for (int i = 0; i < count; i++) {
        if (eligible(&c[i], workspace_bytes)) {
            out[n++] = i;
        }
    }
    ckc_mutex_lock(&lock);
    stats.rejected += count - n;
    ckc_mutex_unlock(&lock);
    return n;
}

void
ckc_blas_note_choice(int index)
{
    ckc_mutex_lock(&lock);
    stats.last_choice = index;
    ckc_mutex_unlock(&lock);
}

/* ---- keys ---- */

uint32_t
ckc_blas_alignment(const void *p)
{
    uint32_t a = 256;
    while (a > 1 && (uintptr_t)p % a != 0) {
        a /= 2;
    }
    return a;
}

ckc_blas_key
ckc_blas_int8_key(const ckc_int8_gemm_params *p, int device, size_t workspace)
{
    ckc_blas_key k;
    memset(&k, 0, sizeof k);
    k.v[0] = 0; /* kind: the int8 GEMM (the NVFP4 GEMM keys start at 1) */
    k.v[1] = device;
    k.v[2] = p->m;
    k.v[3] = p->n;
    k.v[4] = p->k;
    k.v[5] = p->lda;
    k.v[6] = p->ldb;
    k.v[7] = p->ldc;
    k.v[8] = ckc_blas_alignment(p->a);
    k.v[9] = ckc_blas_alignment(p->b);
    k.v[10] = ckc_blas_alignment(p->c);
    k.v[11] = (int64_t)workspace;
    return k;
}

/* ---- the plan cache ---- */

/* FNV-1a over the key's bytes. */
static uint64_t
key_hash(const ckc_blas_key *key)
{
    const unsigned char *b = (const unsigned char *)key;
    uint64_t h = 14695981039346656037ull;
    for (size_t i = 0; i < sizeof *key; i++) {
        h = (h ^ b[i]) * 1099511628211ull;
    }
    return h;
}

static struct ckc_blas_entry *
lookup(const ckc_blas_key *key, uint64_t hash)
{
    for (int i = 0; i < capacity; i++) {
        if (cache[i].used && cache[i].hash == hash && memcmp(&cache[i].key, key, sizeof *key) == 0) {
            return &cache[i];
        }
    }
    return NULL;
}

ckc_blas_entry *
ckc_blas_find(const ckc_blas_key *key)
{
    const uint64_t hash = key_hash(key);
    struct ckc_blas_entry *e;
    ckc_mutex_lock(&lock);
    e = lookup(key, hash);
    if (e != NULL && !e->busy) {
        e->busy = 1;
        stats.hits++;
    } else {
        e = NULL;
        stats.misses++;
    }
    ckc_mutex_unlock(&lock);
    return e;
}

/* A free slot, or the next unheld one after emptying it (its plan is returned
 * in *evicted, to be freed outside the lock); NULL when every slot is held. */
static struct ckc_blas_entry *
free_slot(void **evicted, void (**evicted_free)(void *))
{
    for (int i = 0; i < capacity; i++) {
        if (!cache[i].used) {
            return &cache[i];
        }
    }
    for (int tries = 0; tries < capacity; tries++) {
        struct ckc_blas_entry *e = &cache[next_victim];
        next_victim = (next_victim + 1) % capacity;
        if (!e->busy) {
            *evicted = e->plan;
            *evicted_free = e->free_plan;
            e->used = 0;
            stats.evictions++;
            stats.entries--;
            return e;
        }
    }
    return NULL;
}

ckc_blas_entry *
ckc_blas_insert(const ckc_blas_key *key, void *plan, void (*free_plan)(void *))
{
    const uint64_t hash = key_hash(key);
    void *evicted = NULL;
    void (*evicted_free)(void *) = NULL;
    struct ckc_blas_entry *e;
    ckc_mutex_lock(&lock);
    e = lookup(key, hash);
    if (e != NULL) { /* another thread cached the same plan meanwhile */
        if (e->busy) {
            stats.uncached++;
            ckc_mutex_unlock(&lock);
            return NULL;
        }
        e->busy = 1;
        ckc_mutex_unlock(&lock);
        free_plan(plan);
        return e;
    }
    e = free_slot(&evicted, &evicted_free);
    if (e != NULL) {
        e->used = 1;
        e->busy = 1;
        e->hash = hash;
        e->key = *key;
        e->plan = plan;
        e->free_plan = free_plan;
        stats.entries++;
    } else {
        stats.uncached++;
    }
    ckc_mutex_unlock(&lock);
    if (evicted != NULL) {
        evicted_free(evicted);
    }
    return e;
}

void *
ckc_blas_plan(const ckc_blas_entry *e)
{
    return e->plan;
}

void
ckc_blas_release(ckc_blas_entry *e)
{
    ckc_mutex_lock(&lock);
    e->busy = 0;
    ckc_mutex_unlock(&lock);
}

/* ---- counters ---- */

void
ckc_blas_note_workspace(size_t bytes)
{
    ckc_mutex_lock(&lock);
    stats.last_workspace = bytes;
    ckc_mutex_unlock(&lock);
}

void
ckc_blas_get_stats(ckc_blas_stats *s)
{
    ckc_mutex_lock(&lock);
    *s = stats;
    ckc_mutex_unlock(&lock);
}

void
ckc_blas_reset(int new_capacity)
{
    void *plans[CKC_BLAS_CACHE_MAX];
    void (*frees[CKC_BLAS_CACHE_MAX])(void *);
    int n = 0;
    int kept = 0;
    ckc_mutex_lock(&lock);
    for (int i = 0; i < CKC_BLAS_CACHE_MAX; i++) {
        if (cache[i].used && !cache[i].busy) {
            plans[n] = cache[i].plan;
            frees[n++] = cache[i].free_plan;
            cache[i].used = 0;
        }
        kept += cache[i].used;
    }
    if (new_capacity >= 1 && new_capacity <= CKC_BLAS_CACHE_MAX && kept == 0) {
        capacity = new_capacity;
    }
    next_victim = 0;
    stats.hits = stats.misses = stats.evictions = stats.uncached = stats.rejected = 0;
    stats.last_choice = -1;
    stats.entries = kept;
    stats.capacity = capacity;
    ckc_mutex_unlock(&lock);
    for (int i = 0; i < n; i++) {
        frees[i](plans[i]);
    }
}
