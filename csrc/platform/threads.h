/* SPDX-License-Identifier: Apache-2.0 */
/* The few OS primitives the thread pool needs, one implementation per OS
 * (threads_posix.c, threads_win32.c).  Nothing else in csrc/ includes an OS
 * threading header. */
#ifndef CKC_PLATFORM_THREADS_H
#define CKC_PLATFORM_THREADS_H

#if defined(_WIN32)
#include <windows.h>
typedef SRWLOCK ckc_mutex;
typedef CONDITION_VARIABLE ckc_cond;
#define CKC_MUTEX_INIT SRWLOCK_INIT
#else
#include <pthread.h>
typedef pthread_mutex_t ckc_mutex;
typedef pthread_cond_t ckc_cond;
#define CKC_MUTEX_INIT PTHREAD_MUTEX_INITIALIZER
#endif

/* Storage of one per thread: MSVC (and clang-cl) spell it their own way, the
 * rest (mingw included) as C11 does. */
#if defined(_MSC_VER)
#define CKC_THREAD_LOCAL __declspec(thread)
#else
#define CKC_THREAD_LOCAL _Thread_local
#endif

/* A static mutex may instead be initialised with CKC_MUTEX_INIT. */
void ckc_mutex_init(ckc_mutex *m);
void ckc_mutex_lock(ckc_mutex *m);
void ckc_mutex_unlock(ckc_mutex *m);
void ckc_cond_init(ckc_cond *c);
void ckc_cond_wait(ckc_cond *c, ckc_mutex *m);
void ckc_cond_broadcast(ckc_cond *c);

/* A counter that threads may read without holding a lock (acquire/release). */
typedef struct {
    volatile long value;
} ckc_atomic_counter;

long ckc_atomic_load(ckc_atomic_counter *c);
void ckc_atomic_store(ckc_atomic_counter *c, long v);
/* Adds v; returns the value before (a full barrier). */
long ckc_atomic_add(ckc_atomic_counter *c, long v);

/* A hint to the CPU inside a spin-wait loop. */
void ckc_cpu_relax(void);

/* Starts a detached thread running fn(arg); returns 0 on success. */
int ckc_thread_start(void (*fn)(void *), void *arg);

/* Logical processors available to this process. */
int ckc_cpu_count(void);

/* Identifier of the current process, to notice a fork. */
long ckc_process_id(void);

/* Whether process pid is running (1) or not (0): the flight record's pruning
 * never removes a running process's record. */
int ckc_process_alive(long pid);

#endif /* CKC_PLATFORM_THREADS_H */
