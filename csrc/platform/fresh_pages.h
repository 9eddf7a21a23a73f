/* SPDX-License-Identifier: Apache-2.0 */
/* Output buffers of large ops are usually fresh memory: torch's allocator maps
 * them anew (glibc serves allocations above 32 MiB with mmap, and returns
 * smaller freed ones at the top of its heap to the system), so the kernel's
 * first write to each 4 KiB page takes a page fault that maps and zeroes it.
 * On Linux that costs several times as much as the op itself for a 50-100 MB
 * output.  Advising transparent huge pages for the whole 2 MiB pages inside the
 * buffer lets one fault map 512 pages.  The advice changes how the range is
 * backed, never its contents; it is a hint that does nothing where THP is off
 * or unsupported, and nothing outside Linux.  COMFY_KITCHEN_C_HUGE_PAGES=0
 * turns it off. */
#ifndef CKC_PLATFORM_FRESH_PAGES_H
#define CKC_PLATFORM_FRESH_PAGES_H

#include <stddef.h>

/* Called on an output buffer before a kernel writes all of it. */
void ckc_advise_output_pages(void *p, size_t bytes);

#endif /* CKC_PLATFORM_FRESH_PAGES_H */
