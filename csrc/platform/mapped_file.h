/* SPDX-License-Identifier: Apache-2.0 */
/* Files mapped into memory and shared with the OS page cache (the flight
 * record survives the process: MAP_SHARED / a file view), and what the OS
 * says about a host address range.  One implementation per OS
 * (mapped_file_posix.c, mapped_file_win32.c). */
#ifndef CKC_PLATFORM_MAPPED_FILE_H
#define CKC_PLATFORM_MAPPED_FILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    void *base;       /* NULL when not mapped */
    size_t bytes;
    intptr_t handle;  /* file descriptor, or the Windows file handle */
    intptr_t mapping; /* Windows file-mapping handle; unused elsewhere */
} ckc_mapped_file;

/* Creates (or truncates) path with `bytes` zero bytes and maps it read-write,
 * shared.  Returns 0, or -1 (f->base stays NULL). */
int ckc_mapped_file_create(const char *path, size_t bytes, ckc_mapped_file *f);

/* Maps `bytes` of anonymous zeroed memory instead (the record kept in memory only). */
int ckc_mapped_anonymous(size_t bytes, ckc_mapped_file *f);

/* Writes the pages of [p, p + bytes) back to the file now (msync / FlushViewOfFile). */
void ckc_mapped_file_flush(const ckc_mapped_file *f, const void *p, size_t bytes);

/* 1 when [p, p + bytes) lies in a file-backed mapping, 0 when not, -1 when this
 * OS cannot tell (Linux: /proc/self/maps; Windows: VirtualQuery MEM_MAPPED). */
int ckc_host_range_is_file_mapped(const void *p, size_t bytes);

/* This computer's name, NUL-terminated ("" when unknown). */
void ckc_host_name(char *buf, size_t cap);

/* ---- clocks ---- */

/* Seconds since 1970-01-01 UTC. */
double ckc_unix_time(void);

/* A monotonic clock in nanoseconds (for intervals only). */
uint64_t ckc_monotonic_ns(void);

/* Sleeps about `us` microseconds (0: yields the processor). */
void ckc_sleep_us(unsigned us);

/* ---- 64-bit counters shared between threads ---- */
#if defined(_MSC_VER)
#include <intrin.h>
static inline uint64_t
ckc_atomic_increment64(volatile uint64_t *p)
{
    return (uint64_t)_InterlockedIncrement64((volatile __int64 *)p);
}
static inline void
ckc_atomic_store64(volatile uint64_t *p, uint64_t v)
{
    _InterlockedExchange64((volatile __int64 *)p, (__int64)v);
}
static inline uint64_t
ckc_atomic_load64(const volatile uint64_t *p)
{
    /* Interlocked calls take a non-const pointer: go through an integer to drop const. */
    return (uint64_t)_InterlockedCompareExchange64((volatile __int64 *)(uintptr_t)p, 0, 0);
}
static inline uint64_t
ckc_atomic_exchange64(volatile uint64_t *p, uint64_t v)
{
    return (uint64_t)_InterlockedExchange64((volatile __int64 *)p, (__int64)v);
}
/* Stores desired if *p == expected; returns what *p held. */
static inline uint64_t
ckc_atomic_cas64(volatile uint64_t *p, uint64_t expected, uint64_t desired)
{
    return (uint64_t)_InterlockedCompareExchange64((volatile __int64 *)p, (__int64)desired, (__int64)expected);
}
static inline void *
ckc_atomic_load_ptr(void *const volatile *p)
{
    return _InterlockedCompareExchangePointer((void *volatile *)(uintptr_t)p, NULL, NULL);
}
static inline void
ckc_atomic_store_ptr(void *volatile *p, void *v)
{
    (void)_InterlockedExchangePointer(p, v);
}
#else
static inline uint64_t
ckc_atomic_increment64(volatile uint64_t *p)
{
    return __atomic_add_fetch(p, 1, __ATOMIC_ACQ_REL);
}
static inline void
ckc_atomic_store64(volatile uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
static inline uint64_t
ckc_atomic_load64(const volatile uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline uint64_t
ckc_atomic_exchange64(volatile uint64_t *p, uint64_t v)
{
    return __atomic_exchange_n(p, v, __ATOMIC_ACQ_REL);
}
/* Stores desired if *p == expected; returns what *p held. */
static inline uint64_t
ckc_atomic_cas64(volatile uint64_t *p, uint64_t expected, uint64_t desired)
{
    (void)__atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    return expected;
}
static inline void *
ckc_atomic_load_ptr(void *const volatile *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline void
ckc_atomic_store_ptr(void *volatile *p, void *v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}
#endif

/* Lowers *p to v (raises, for max) unless it already is at or below (above) it;
 * returns what *p held before. */
static inline uint64_t
ckc_atomic_min64(volatile uint64_t *p, uint64_t v)
{
    uint64_t seen = ckc_atomic_load64(p);
    while (v < seen) {
        const uint64_t was = ckc_atomic_cas64(p, seen, v);
        if (was == seen) {
            break;
        }
        seen = was;
    }
    return seen;
}
static inline uint64_t
ckc_atomic_max64(volatile uint64_t *p, uint64_t v)
{
    uint64_t seen = ckc_atomic_load64(p);
    while (v > seen) {
        const uint64_t was = ckc_atomic_cas64(p, seen, v);
        if (was == seen) {
            break;
        }
        seen = was;
    }
    return seen;
}

#endif /* CKC_PLATFORM_MAPPED_FILE_H */
