/* SPDX-License-Identifier: Apache-2.0 */
/* POSIX implementation of platform/mapped_file.h. */
#if !defined(_WIN32)
#define _GNU_SOURCE /* MAP_ANONYMOUS on every libc */

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "mapped_file.h"

int
ckc_mapped_file_create(const char *path, size_t bytes, ckc_mapped_file *f)
{
    void *p;
    const int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    f->base = NULL;
    if (fd < 0) {
        return -1;
    }
    if (ftruncate(fd, (off_t)bytes) != 0) {
        close(fd);
        return -1;
    }
    p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return -1;
    }
    f->base = p;
    f->bytes = bytes;
    f->handle = fd;
    f->mapping = 0;
    return 0;
}

int
ckc_mapped_anonymous(size_t bytes, ckc_mapped_file *f)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    f->base = NULL;
    if (p == MAP_FAILED) {
        return -1;
    }
    f->base = p;
    f->bytes = bytes;
    f->handle = -1;
    f->mapping = 0;
    return 0;
}

void
ckc_mapped_file_flush(const ckc_mapped_file *f, const void *p, size_t bytes)
{
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t start = (uintptr_t)p & ~(page - 1);
    if (f->base == NULL || f->handle < 0) {
        return;
    }
    (void)msync((void *)start, (uintptr_t)p + bytes - start, MS_SYNC);
}

int
ckc_host_range_is_file_mapped(const void *p, size_t bytes)
{
#if defined(__linux__)
    /* Each line: "start-end perms offset dev inode path"; inode != 0 is a file. */
    const unsigned long long lo = (uintptr_t)p;
    const unsigned long long hi = lo + (bytes ? bytes : 1);
    char line[512];
    int found = 0;
    FILE *maps = fopen("/proc/self/maps", "r");
    if (maps == NULL) {
        return -1;
    }
    while (fgets(line, sizeof line, maps) != NULL) {
        unsigned long long start;
        unsigned long long end;
        unsigned long long inode;
        if (sscanf(line, "%llx-%llx %*s %*s %*s %llu", &start, &end, &inode) != 3) {
            continue;
        }
        if (start < hi && lo < end) {
            found = inode != 0;
            break;
        }
    }
    fclose(maps);
    return found;
#else
    (void)p;
    (void)bytes;
    return -1;
#endif
}

void
ckc_host_name(char *buf, size_t cap)
{
    if (cap == 0) {
        return;
    }
    if (gethostname(buf, cap) != 0) {
        buf[0] = '\0';
    }
    buf[cap - 1] = '\0';
}

double
ckc_unix_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t
ckc_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void
ckc_sleep_us(unsigned us)
{
    struct timespec ts;
    if (us == 0) {
        sched_yield();
        return;
    }
    ts.tv_sec = us / 1000000u;
    ts.tv_nsec = (long)(us % 1000000u) * 1000;
    nanosleep(&ts, NULL);
}

#endif /* !_WIN32 */
