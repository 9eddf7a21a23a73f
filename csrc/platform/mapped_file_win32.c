/* SPDX-License-Identifier: Apache-2.0 */
/* Windows implementation of platform/mapped_file.h. */
#if defined(_WIN32)

#include <windows.h>

#include "mapped_file.h"

int
ckc_mapped_file_create(const char *path, size_t bytes, ckc_mapped_file *f)
{
    HANDLE file;
    HANDLE mapping;
    void *p;
    f->base = NULL;
    file = CreateFileA(path, GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE,
                       NULL, CREATE_ALWAYS, FILE_ATTRIBUTE_NORMAL, NULL);
    if (file == INVALID_HANDLE_VALUE) {
        return -1;
    }
    mapping = CreateFileMappingA(file, NULL, PAGE_READWRITE, (DWORD)((unsigned long long)bytes >> 32),
                                 (DWORD)(bytes & 0xFFFFFFFFu), NULL);
    if (mapping == NULL) {
        CloseHandle(file);
        return -1;
    }
    p = MapViewOfFile(mapping, FILE_MAP_ALL_ACCESS, 0, 0, bytes);
    if (p == NULL) {
        CloseHandle(mapping);
        CloseHandle(file);
        return -1;
    }
    f->base = p;
    f->bytes = bytes;
    f->handle = (intptr_t)file;
    f->mapping = (intptr_t)mapping;
    return 0;
}

int
ckc_mapped_anonymous(size_t bytes, ckc_mapped_file *f)
{
    void *p = VirtualAlloc(NULL, bytes, MEM_RESERVE | MEM_COMMIT, PAGE_READWRITE);
    f->base = p;
    f->bytes = bytes;
    f->handle = 0;
    f->mapping = 0;
    return p != NULL ? 0 : -1;
}

void
ckc_mapped_file_flush(const ckc_mapped_file *f, const void *p, size_t bytes)
{
    if (f->base == NULL || f->mapping == 0) {
        return;
    }
    /* FlushViewOfFile hands the pages to the cache manager; FlushFileBuffers writes them to disk. */
    (void)FlushViewOfFile(p, bytes);
    (void)FlushFileBuffers((HANDLE)f->handle);
}

int
ckc_host_range_is_file_mapped(const void *p, size_t bytes)
{
    MEMORY_BASIC_INFORMATION info;
    (void)bytes;
    if (VirtualQuery(p, &info, sizeof info) == 0) {
        return -1;
    }
    return info.Type == MEM_MAPPED;
}

void
ckc_host_name(char *buf, size_t cap)
{
    DWORD n = (DWORD)cap;
    if (cap == 0) {
        return;
    }
    if (!GetComputerNameA(buf, &n)) {
        buf[0] = '\0';
    }
    buf[cap - 1] = '\0';
}

double
ckc_unix_time(void)
{
    FILETIME ft;
    ULARGE_INTEGER t;
    GetSystemTimePreciseAsFileTime(&ft);
    t.LowPart = ft.dwLowDateTime;
    t.HighPart = ft.dwHighDateTime;
    /* 100 ns ticks since 1601-01-01 */
    return (double)(t.QuadPart - 116444736000000000ULL) * 1e-7;
}

uint64_t
ckc_monotonic_ns(void)
{
    static LARGE_INTEGER frequency;
    LARGE_INTEGER now;
    if (frequency.QuadPart == 0) {
        QueryPerformanceFrequency(&frequency);
    }
    QueryPerformanceCounter(&now);
    return (uint64_t)((double)now.QuadPart * 1e9 / (double)frequency.QuadPart);
}

/* Windows 10 1803+ (synchapi.h of SDK 10.0.17134); older SDKs lack the name. */
#ifndef CREATE_WAITABLE_TIMER_HIGH_RESOLUTION
#define CREATE_WAITABLE_TIMER_HIGH_RESOLUTION 0x00000002
#endif

void
ckc_sleep_us(unsigned us)
{
    HANDLE timer;
    LARGE_INTEGER due;
    if (us == 0) {
        SwitchToThread();
        return;
    }
    /* Sleep() waits whole periods of the system timer (up to 15.6 ms): the fence
     * watchdog's 50 us back-off would stretch a fence by milliseconds.  A
     * high-resolution waitable timer sleeps about the time asked (as Python's
     * time.sleep does); where Windows has none, Sleep() it is. */
    timer = CreateWaitableTimerExW(NULL, NULL, CREATE_WAITABLE_TIMER_HIGH_RESOLUTION, TIMER_ALL_ACCESS);
    if (timer == NULL) {
        Sleep((us + 999) / 1000);
        return;
    }
    due.QuadPart = -10 * (LONGLONG)us; /* relative, in 100 ns units */
    if (SetWaitableTimer(timer, &due, 0, NULL, NULL, FALSE)) {
        (void)WaitForSingleObject(timer, INFINITE);
    }
    CloseHandle(timer);
}

#endif /* _WIN32 */
