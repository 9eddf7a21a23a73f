/* SPDX-License-Identifier: Apache-2.0 */
/* Old flight-record files go when a new one is created (ckc_flight_prune,
 * flight_prune.h): the folder keeps the newest few, so a user's cache does not grow
 * with every process that ran a GPU op, and importing the package deletes
 * nothing.  A record whose process still runs is never removed: on POSIX the
 * removal would succeed under the process still writing it, and its record
 * would be gone when doctor is asked after a crash. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flight_prune.h"
#include "platform/directory.h"
#include "platform/threads.h"

typedef struct {
    const char *prefix;
    const char *suffix;
    const char *own;     /* the new file's name: never removed */
    char **names;
    size_t count;
    size_t cap;
} record_names;

static int
ends_with(const char *s, const char *suffix)
{
    const size_t n = strlen(s);
    const size_t m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* The pid in a record's name, prefix<ms>-<pid>suffix; 0 when there is none. */
static long
pid_of(const char *name, size_t prefix, size_t suffix)
{
    const size_t n = strlen(name);
    size_t digits = n - suffix;
    long pid = 0;
    while (digits > prefix && name[digits - 1] >= '0' && name[digits - 1] <= '9') {
        digits--;
    }
    if (digits == prefix || digits == n - suffix || name[digits - 1] != '-' || n - suffix - digits > 9) {
        return 0;
    }
    for (size_t i = digits; i < n - suffix; i++) {
        pid = pid * 10 + (name[i] - '0');
    }
    return pid;
}

static void
collect(void *ctx, const char *name)
{
    record_names *r = ctx;
    char *copy;
    long pid;
    if (strncmp(name, r->prefix, strlen(r->prefix)) != 0 || !ends_with(name, r->suffix) ||
        strcmp(name, r->own) == 0) {
        return;
    }
    pid = pid_of(name, strlen(r->prefix), strlen(r->suffix));
    if (pid != 0 && ckc_process_alive(pid)) {
        return; /* a running process's record: it stays, and does not count against keep */
    }
    if (r->count == r->cap) {
        const size_t cap = r->cap ? 2 * r->cap : 32;
        char **grown = realloc(r->names, cap * sizeof *grown);
        if (grown == NULL) {
            return; /* keeps what it cannot list */
        }
        r->names = grown;
        r->cap = cap;
    }
    copy = malloc(strlen(name) + 1);
    if (copy != NULL) {
        strcpy(copy, name);
        r->names[r->count++] = copy;
    }
}

static int
by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void
ckc_flight_prune(const char *path, const char *prefix, const char *suffix, unsigned keep)
{
    const char *slash = strrchr(path, '/');
    const char *backslash = strrchr(path, '\\');
    const char *sep = backslash != NULL && (slash == NULL || backslash > slash) ? backslash : slash;
    char dir[CKC_FLIGHT_PATH_MAX];
    record_names r = {prefix, suffix, sep != NULL ? sep + 1 : path, NULL, 0, 0};
    if (sep == NULL) {
        snprintf(dir, sizeof dir, ".");
    } else {
        snprintf(dir, sizeof dir, "%.*s", (int)(sep - path), path);
    }
    if (keep == 0 || ckc_directory_each(dir, collect, &r) != 0) {
        free(r.names);
        return;
    }
    if (r.count > 1) { /* qsort's array may not be NULL, even for no element (C11 7.22.5; UBSan) */
        qsort(r.names, r.count, sizeof *r.names, by_name);
    }
    for (size_t k = 0; k < r.count; k++) {
        if (k + (keep - 1) < r.count) { /* the oldest: all but keep - 1 others and this file remain */
            char old[sizeof dir + 256];
            if (snprintf(old, sizeof old, "%s%c%s", dir, sep != NULL ? *sep : '/', r.names[k]) < (int)sizeof old) {
                (void)remove(old); /* another process may hold or have removed it */
            }
        }
        free(r.names[k]);
    }
    free(r.names);
}
