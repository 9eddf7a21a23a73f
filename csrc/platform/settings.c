/* SPDX-License-Identifier: Apache-2.0 */
/* The one copy of the C side's settings, behind a lock: each reader takes a copy
 * of the whole, so no reader sees half of a change. */
#include "settings.h"

#include <string.h>

#include "threads.h"

static ckc_mutex lock = CKC_MUTEX_INIT;
static int set;
static ckc_settings current;
static ckc_atomic_counter generation;

void
ckc_settings_default(ckc_settings *s)
{
    memset(s, 0, sizeof *s);
    s->huge_pages = 1;
    s->hang_ms = CKC_DEFAULT_HANG_MS;
    s->hang_raise_ms = CKC_DEFAULT_HANG_RAISE_MS;
    s->gemm_tuning = 1;
}

void
ckc_settings_read(ckc_settings *out)
{
    ckc_mutex_lock(&lock);
    if (!set) {
        ckc_settings_default(&current);
        set = 1;
    }
    *out = current;
    ckc_mutex_unlock(&lock);
}

void
ckc_settings_set(const ckc_settings *s)
{
    ckc_mutex_lock(&lock);
    current = *s;
    set = 1;
    ckc_atomic_add(&generation, 1);
    ckc_mutex_unlock(&lock);
}

long
ckc_settings_generation(void)
{
    return ckc_atomic_load(&generation);
}
