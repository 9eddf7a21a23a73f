/* SPDX-License-Identifier: Apache-2.0 */
/* Windows implementation of platform/threads.h. */
#if defined(_WIN32)

#include <stdlib.h>

#include "threads.h"

void
ckc_mutex_init(ckc_mutex *m)
{
    InitializeSRWLock(m);
}

void
ckc_mutex_lock(ckc_mutex *m)
{
    AcquireSRWLockExclusive(m);
}

void
ckc_mutex_unlock(ckc_mutex *m)
{
    ReleaseSRWLockExclusive(m);
}

void
ckc_cond_init(ckc_cond *c)
{
    InitializeConditionVariable(c);
}

void
ckc_cond_wait(ckc_cond *c, ckc_mutex *m)
{
    SleepConditionVariableSRW(c, m, INFINITE, 0);
}

void
ckc_cond_broadcast(ckc_cond *c)
{
    WakeAllConditionVariable(c);
}

long
ckc_atomic_load(ckc_atomic_counter *c)
{
    return InterlockedCompareExchange(&c->value, 0, 0);
}

void
ckc_atomic_store(ckc_atomic_counter *c, long v)
{
    InterlockedExchange(&c->value, v);
}

long
ckc_atomic_add(ckc_atomic_counter *c, long v)
{
    return InterlockedExchangeAdd(&c->value, v);
}

void
ckc_cpu_relax(void)
{
    YieldProcessor();
}

typedef struct {
    void (*fn)(void *);
    void *arg;
} thread_start_args;

static DWORD WINAPI
thread_trampoline(LPVOID p)
{
    thread_start_args a = *(thread_start_args *)p;
    free(p);
    a.fn(a.arg);
    return 0;
}

int
ckc_thread_start(void (*fn)(void *), void *arg)
{
    HANDLE h;
    thread_start_args *a = malloc(sizeof *a);
    if (a == NULL) {
        return -1;
    }
    a->fn = fn;
    a->arg = arg;
    h = CreateThread(NULL, 0, thread_trampoline, a, 0, NULL);
    if (h == NULL) {
        free(a);
        return -1;
    }
    CloseHandle(h);
    return 0;
}

int
ckc_cpu_count(void)
{
    DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
    return n > 0 ? (int)n : 1;
}

long
ckc_process_id(void)
{
    return (long)GetCurrentProcessId();
}

int
ckc_process_alive(long pid)
{
    HANDLE process;
    DWORD code = 0;
    int alive;
    if (pid <= 0) {
        return 0;
    }
    process = OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, (DWORD)pid);
    if (process == NULL) {
        /* access denied: it exists (another user's); anything else: gone */
        return GetLastError() == ERROR_ACCESS_DENIED;
    }
    alive = GetExitCodeProcess(process, &code) && code == STILL_ACTIVE;
    CloseHandle(process);
    return alive;
}

#endif /* _WIN32 */
