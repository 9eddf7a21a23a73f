/* SPDX-License-Identifier: Apache-2.0 */
/* See fresh_pages.h. */
#if defined(__linux__)
#define _DEFAULT_SOURCE /* madvise and MADV_HUGEPAGE under -std=c11 */
#include <stdint.h>
#include <sys/mman.h>
#endif

#include "platform/fresh_pages.h"
#include "platform/settings.h"

void
ckc_advise_output_pages(void *p, size_t bytes)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const size_t huge_page = (size_t)2 << 20;
    /* The smallest size that always holds a whole aligned huge page. */
    const size_t min_bytes = 2 * huge_page;
    const uintptr_t begin = ((uintptr_t)p + huge_page - 1) & ~(uintptr_t)(huge_page - 1);
    const uintptr_t end = ((uintptr_t)p + bytes) & ~(uintptr_t)(huge_page - 1);
    ckc_settings settings;
    if (bytes < min_bytes || end <= begin) {
        return;
    }
    ckc_settings_read(&settings);
    if (!settings.huge_pages) {
        return;
    }
    (void)madvise((void *)begin, end - begin, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
}
