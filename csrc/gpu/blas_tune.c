/* SPDX-License-Identifier: Apache-2.0 */
/* The int8 GEMM's algorithm chosen by timing (blas_tune.h): the choices of
 * this process, the cache file, the timing loop over candidates.  Compiled
 * into every build (no device runtime; a CPU-only build never calls it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_tune.h"
#include "gpu.h"
#include "platform/settings.h"
#include "platform/threads.h"

#define CHOICES_MAX 512
#define IDENTITIES_MAX 8
#define FILE_TAG "ckc-gemm-1"

typedef struct {
    ckc_blas_identity id;
    ckc_blas_key cls;
    unsigned char algo[CKC_BLAS_ALGO_BYTES];
    int index, candidates, source;
    float us;
} choice;

static ckc_mutex lock = CKC_MUTEX_INIT;
static choice choices[CHOICES_MAX];
static int n_choices;
/* The identities whose entries were read from the file (read once each). */
static ckc_blas_identity read_for[IDENTITIES_MAX];
static int n_read;
static long timed_runs, tunings, from_file;
/* Set by ckc_blas_tune_configure (tests): -2 and 0 follow the settings. */
static int tuning_override = -2;
static int path_override;
/* What is in force, derived from the settings of generation `derived` (-1: none yet). */
static long derived = -1;
static int tuning;
static char path[1024];

/* ---- settings ---- */

/* The cache file's path; one too long for the buffer means no cache (never a
 * cut-short path, which would name another file). */
static void
set_path(const char *p)
{
    const int n = snprintf(path, sizeof path, "%s", p != NULL ? p : "");
    if (n < 0 || (size_t)n >= sizeof path) {
        path[0] = '\0';
    }
}

/* Brings tuning and path up to date (lock held): the overrides, else the
 * settings, re-read only when they change. */
static void
read_settings(void)
{
    const long generation = ckc_settings_generation();
    ckc_settings settings;
    if (generation == derived) {
        return;
    }
    ckc_settings_read(&settings);
    tuning = tuning_override != -2 ? tuning_override : settings.gemm_tuning != 0;
    if (!path_override) {
        set_path(settings.gemm_cache);
    }
    derived = generation;
}

int
ckc_blas_tuning_allowed(int capturing)
{
    int on;
    ckc_mutex_lock(&lock);
    read_settings();
    on = tuning == 1;
    ckc_mutex_unlock(&lock);
    return on && !capturing;
}

void
ckc_blas_tune_configure(int tuning_on, const char *cache_path)
{
    ckc_mutex_lock(&lock);
    tuning_override = tuning_on < 0 ? -2 : tuning_on != 0;
    path_override = cache_path != NULL;
    if (cache_path != NULL) {
        set_path(cache_path);
    }
    derived = -1;
    n_choices = 0;
    n_read = 0;
    ckc_mutex_unlock(&lock);
}

/* ---- classes ---- */

int64_t
ckc_blas_m_bucket(int64_t m)
{
    int64_t b = 1;
    while (b < m && b < ((int64_t)1 << 62)) {
        b *= 2;
    }
    return b;
}

ckc_blas_key
ckc_blas_class_of(const ckc_blas_key *plan_key)
{
    ckc_blas_key k = *plan_key;
    k.v[2] = ckc_blas_m_bucket(k.v[2]);
    return k;
}

static int
same_identity(const ckc_blas_identity *a, const ckc_blas_identity *b)
{
    return a->driver == b->driver && a->library == b->library && strcmp(a->gpu, b->gpu) == 0;
}

/* The choice of (id, cls) (lock held), NULL when none. */
static choice *
find(const ckc_blas_identity *id, const ckc_blas_key *cls)
{
    for (int i = 0; i < n_choices; i++) {
        if (memcmp(&choices[i].cls, cls, sizeof *cls) == 0 && same_identity(&choices[i].id, id)) {
            return &choices[i];
        }
    }
    return NULL;
}

/* Adds or replaces (lock held); beyond CHOICES_MAX a choice is not kept (the
 * class is then timed again, which costs time, never a wrong result). */
static choice *
put(const ckc_blas_identity *id, const ckc_blas_key *cls)
{
    choice *c = find(id, cls);
    if (c == NULL && n_choices < CHOICES_MAX) {
        c = &choices[n_choices++];
    }
    if (c != NULL) {
        memset(c, 0, sizeof *c);
        c->id = *id;
        c->cls = *cls;
    }
    return c;
}

/* ---- the cache file: one tab-separated line per choice ---- */

static int
hex_value(char ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
}

/* The next tab-separated field of *s (cut in place), NULL when none. */
static char *
field(char **s)
{
    char *start = *s;
    char *tab;
    if (start == NULL) {
        return NULL;
    }
    tab = strchr(start, '\t');
    if (tab != NULL) {
        *tab = '\0';
        *s = tab + 1;
    } else {
        start[strcspn(start, "\r\n")] = '\0';
        *s = NULL;
    }
    return start;
}

/* One line read into c; 0 when it is not a whole entry (it is skipped). */
static int
parse_line(char *line, choice *c)
{
    char *rest = line;
    char *f[9];
    long long v[CKC_BLAS_KEY_LEN];
    for (int i = 0; i < 9; i++) {
        f[i] = field(&rest);
        if (f[i] == NULL) {
            return 0;
        }
    }
    if (strcmp(f[0], FILE_TAG) != 0 || strlen(f[8]) != 2 * CKC_BLAS_ALGO_BYTES) {
        return 0;
    }
    memset(c, 0, sizeof *c);
    snprintf(c->id.gpu, sizeof c->id.gpu, "%s", f[1]);
    c->id.driver = atoi(f[2]);
    c->id.library = (size_t)strtoull(f[3], NULL, 10);
    if (sscanf(f[4], "%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld,%lld", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7], &v[8], &v[9], &v[10], &v[11]) != CKC_BLAS_KEY_LEN) {
        return 0;
    }
    for (int i = 0; i < CKC_BLAS_KEY_LEN; i++) {
        c->cls.v[i] = (int64_t)v[i];
    }
    c->index = atoi(f[5]);
    c->candidates = atoi(f[6]);
    c->us = (float)atof(f[7]);
    for (int i = 0; i < CKC_BLAS_ALGO_BYTES; i++) {
        const int hi = hex_value(f[8][2 * i]), lo = hex_value(f[8][2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return 0;
        }
        c->algo[i] = (unsigned char)(hi * 16 + lo);
    }
    c->source = CKC_BLAS_FROM_FILE;
    return 1;
}

/* Reads the file's entries for id, once per identity (lock held); a later
 * line of a class replaces an earlier one. */
static void
read_file(const ckc_blas_identity *id)
{
    FILE *f;
    char line[1024];
    for (int i = 0; i < n_read; i++) {
        if (same_identity(&read_for[i], id)) {
            return;
        }
    }
    if (n_read < IDENTITIES_MAX) {
        read_for[n_read++] = *id;
    }
    if (path[0] == '\0' || (f = fopen(path, "r")) == NULL) {
        return;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        choice c;
        choice *slot;
        if (parse_line(line, &c) && same_identity(&c.id, id) && (slot = put(&c.id, &c.cls)) != NULL) {
            *slot = c;
        }
    }
    fclose(f);
}

static void
append_to_file(const choice *c)
{
    FILE *f;
    if (path[0] == '\0' || (f = fopen(path, "a+b")) == NULL) {
        return; /* an unwritable cache costs a timing at the next start, nothing else */
    }
    /* A last line left unfinished (a process killed while writing) is ended
     * first, so that it spoils only itself. */
    if (fseek(f, -1, SEEK_END) == 0 && fgetc(f) != '\n') {
        (void)fseek(f, 0, SEEK_END); /* C: a positioning call between a read and a write */
        fputc('\n', f);
    }
    (void)fseek(f, 0, SEEK_END);
    fprintf(f, "%s\t%s\t%d\t%llu\t", FILE_TAG, c->id.gpu, c->id.driver, (unsigned long long)c->id.library);
    for (int i = 0; i < CKC_BLAS_KEY_LEN; i++) {
        fprintf(f, "%s%lld", i ? "," : "", (long long)c->cls.v[i]);
    }
    fprintf(f, "\t%d\t%d\t%.3f\t", c->index, c->candidates, c->us);
    for (int i = 0; i < CKC_BLAS_ALGO_BYTES; i++) {
        fprintf(f, "%02x", c->algo[i]);
    }
    fputc('\n', f);
    fclose(f);
}

/* ---- choices ---- */

int
ckc_blas_known(const ckc_blas_identity *id, const ckc_blas_key *cls, unsigned char algo[CKC_BLAS_ALGO_BYTES],
               int *source, int *index)
{
    const choice *c;
    int found = 0;
    ckc_mutex_lock(&lock);
    read_settings();
    read_file(id);
    c = find(id, cls);
    if (c != NULL) {
        memcpy(algo, c->algo, CKC_BLAS_ALGO_BYTES);
        *source = c->source;
        *index = c->index;
        found = 1;
        from_file += c->source == CKC_BLAS_FROM_FILE;
    }
    ckc_mutex_unlock(&lock);
    return found;
}

void
ckc_blas_remember(const ckc_blas_identity *id, const ckc_blas_key *cls, const unsigned char algo[CKC_BLAS_ALGO_BYTES],
                  int index, int candidates, float us, int source)
{
    choice made;
    choice *c;
    ckc_mutex_lock(&lock);
    read_settings();
    c = find(id, cls);
    if (c != NULL && c->source != CKC_BLAS_FROM_HEURISTIC && source == CKC_BLAS_FROM_HEURISTIC) {
        ckc_mutex_unlock(&lock); /* a heuristic's choice never replaces a timed one */
        return;
    }
    memset(&made, 0, sizeof made);
    made.id = *id;
    made.cls = *cls;
    memcpy(made.algo, algo, CKC_BLAS_ALGO_BYTES);
    made.index = index;
    made.candidates = candidates;
    made.us = us;
    made.source = source;
    c = put(id, cls);
    if (c != NULL) {
        *c = made;
    }
    if (source == CKC_BLAS_FROM_TIMING) {
        tunings++;
        append_to_file(&made); /* also when the table is full: the file keeps it */
    }
    ckc_mutex_unlock(&lock);
}

int
ckc_blas_time_candidates(const int *eligible, int count, int (*time_one)(void *ctx, int i, float *us), void *ctx,
                         float *best_us)
{
    int best = -1;
    for (int j = 0; j < count; j++) {
        float us = 0.0f;
        if (time_one(ctx, eligible[j], &us) == 0 && (best < 0 || us < *best_us)) {
            best = j;
            *best_us = us;
        }
    }
    return best;
}

int
ckc_blas_pick(const ckc_blas_identity *id, const ckc_blas_key *plan_key, const int *eligible, int n, int capturing,
              const ckc_blas_backend *b, unsigned char algo[CKC_BLAS_ALGO_BYTES], int *final)
{
    const ckc_blas_key cls = ckc_blas_class_of(plan_key);
    const int may_time = n > 1 && ckc_blas_tuning_allowed(capturing);
    int source, chosen_at, index, j = -1;
    float us = 0.0f;
    *final = 1;
    if (ckc_blas_known(id, &cls, algo, &source, &chosen_at) && !(source == CKC_BLAS_FROM_HEURISTIC && may_time) &&
        (index = b->accepts(b->ctx, algo, chosen_at)) >= 0) {
        ckc_blas_note_choice(index);
        return index;
    }
    if (may_time) {
        j = ckc_blas_time_candidates(eligible, n, b->time_one, b->ctx, &us);
    }
    index = eligible[j >= 0 ? j : 0];
    b->algo_of(b->ctx, index, algo);
    if (j >= 0 || !capturing) {
        ckc_blas_remember(id, &cls, algo, index, n, us, j >= 0 ? CKC_BLAS_FROM_TIMING : CKC_BLAS_FROM_HEURISTIC);
    } else {
        *final = !(n > 1 && ckc_blas_tuning_allowed(0));
    }
    ckc_blas_note_choice(index);
    return index;
}

void
ckc_blas_count_timed(long runs)
{
    ckc_mutex_lock(&lock);
    timed_runs += runs;
    ckc_mutex_unlock(&lock);
}

int
ckc_blas_choices(ckc_blas_choice *out, int cap)
{
    int n;
    ckc_mutex_lock(&lock);
    n = n_choices;
    for (int i = 0; i < n && i < cap; i++) {
        const choice *c = &choices[i];
        out[i].device = (int)c->cls.v[1];
        out[i].m_bucket = c->cls.v[2];
        out[i].n = c->cls.v[3];
        out[i].k = c->cls.v[4];
        out[i].index = c->index;
        out[i].candidates = c->candidates;
        out[i].us = c->us;
        out[i].source = c->source;
    }
    ckc_mutex_unlock(&lock);
    return n;
}

void
ckc_blas_tune_counters(long *timed, long *tuned, long *read)
{
    ckc_mutex_lock(&lock);
    *timed = timed_runs;
    *tuned = tunings;
    *read = from_file;
    ckc_mutex_unlock(&lock);
}

void
ckc_blas_tune_reset(void)
{
    ckc_mutex_lock(&lock);
    n_choices = 0;
    n_read = 0;
    timed_runs = tunings = from_file = 0;
    ckc_mutex_unlock(&lock);
}
