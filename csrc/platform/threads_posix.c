/* SPDX-License-Identifier: Apache-2.0 */
/* POSIX implementation of platform/threads.h. */
#if !defined(_WIN32)

#if !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L /* kill() under -std=c11 */
#endif
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/types.h>
#include <unistd.h>

#include "threads.h"

void
ckc_mutex_init(ckc_mutex *m)
{
    pthread_mutex_init(m, NULL);
}

void
ckc_mutex_lock(ckc_mutex *m)
{
    pthread_mutex_lock(m);
}

void
ckc_mutex_unlock(ckc_mutex *m)
{
    pthread_mutex_unlock(m);
}

void
ckc_cond_init(ckc_cond *c)
{
    pthread_cond_init(c, NULL);
}

void
ckc_cond_wait(ckc_cond *c, ckc_mutex *m)
{
    pthread_cond_wait(c, m);
}

void
ckc_cond_broadcast(ckc_cond *c)
{
    pthread_cond_broadcast(c);
}

long
ckc_atomic_load(ckc_atomic_counter *c)
{
    return __atomic_load_n(&c->value, __ATOMIC_ACQUIRE);
}

void
ckc_atomic_store(ckc_atomic_counter *c, long v)
{
    __atomic_store_n(&c->value, v, __ATOMIC_RELEASE);
}

long
ckc_atomic_add(ckc_atomic_counter *c, long v)
{
    return __atomic_fetch_add(&c->value, v, __ATOMIC_SEQ_CST);
}

void
ckc_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

typedef struct {
    void (*fn)(void *);
    void *arg;
} thread_start_args;

static void *
thread_trampoline(void *p)
{
    thread_start_args a = *(thread_start_args *)p;
    free(p);
    a.fn(a.arg);
    return NULL;
}

int
ckc_thread_start(void (*fn)(void *), void *arg)
{
    pthread_t tid;
    pthread_attr_t attr;
    int rc;
    thread_start_args *a = malloc(sizeof *a);
    if (a == NULL) {
        return -1;
    }
    a->fn = fn;
    a->arg = arg;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&tid, &attr, thread_trampoline, a);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        free(a);
        return -1;
    }
    return 0;
}

int
ckc_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

long
ckc_process_id(void)
{
    return (long)getpid();
}

int
ckc_process_alive(long pid)
{
    if (pid <= 0 || (long)(pid_t)pid != pid) {
        return 0;
    }
    /* signal 0 only checks: EPERM means it runs under another user */
    return kill((pid_t)pid, 0) == 0 || errno == EPERM;
}

#endif /* !_WIN32 */
