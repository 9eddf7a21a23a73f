/* SPDX-License-Identifier: Apache-2.0 */
/* An op call's reads and writes for the emulated device's hazard detector (ops/hazards.h). */
#include "hazards.h"

#include <stdio.h>

#if defined(CKC_EMULATED)
#include "emu/emu_api.h"

void
ckc_op_hazards(const char *op, const ckc_op_args *a, int begin)
{
    char what[96];
    if (!ckc_emu_hazards_on()) {
        return; /* every emulated op passes here: no formatting or locking while nobody tracks */
    }
    for (int k = 0; k < a->sig->n_tensors; k++) {
        const ckc_tensor *t = &a->t[k];
        const int output = (a->sig->tensors[k].flags & CKC_ARG_OUTPUT) != 0;
        if (!a->present[k] || output == begin) {
            continue;
        }
        snprintf(what, sizeof what, "%s (argument '%s')", op, a->sig->tensors[k].name);
        ckc_emu_hazard_access(t->data, (size_t)t->numel * (size_t)ckc_dtype_size(t->dtype), a->exec.stream, output,
                              what);
    }
    ckc_emu_hazard_op(op, a->exec.stream, begin);
}

void
ckc_hazards_track(int on)
{
    ckc_emu_hazards_track(on);
}

uint64_t
ckc_hazards_record(uintptr_t stream)
{
    return ckc_emu_hazard_record(stream);
}

int
ckc_hazards_wait(uintptr_t stream, uint64_t event)
{
    return ckc_emu_hazard_wait(stream, event);
}

size_t
ckc_hazards_take(char *buf, size_t cap)
{
    return ckc_emu_hazard_take(buf, cap);
}

#else

void
ckc_op_hazards(const char *op, const ckc_op_args *a, int begin)
{
    (void)op;
    (void)a;
    (void)begin;
}

void
ckc_hazards_track(int on)
{
    (void)on;
}

uint64_t
ckc_hazards_record(uintptr_t stream)
{
    (void)stream;
    return 0;
}

int
ckc_hazards_wait(uintptr_t stream, uint64_t event)
{
    (void)stream;
    (void)event;
    return -1;
}

size_t
ckc_hazards_take(char *buf, size_t cap)
{
    if (buf != NULL && cap > 0) {
        buf[0] = '\0';
    }
    return 0;
}

#endif
