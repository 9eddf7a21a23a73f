/* SPDX-License-Identifier: Apache-2.0 */
/* Choice of the CPU kernels' instruction set, and the CPU device's start. */
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "kernels.h"
#include "parallel.h"
#include "platform/cpu_features.h"
#include "platform/threads.h"

extern const ckc_cpu_kernels ckc_cpu_kernels_baseline;
#if defined(CKC_HAVE_X86_ISAS)
extern const ckc_cpu_kernels ckc_cpu_kernels_avx2;
extern const ckc_cpu_kernels ckc_cpu_kernels_avx512;
#endif

typedef struct {
    const ckc_cpu_kernels *kernels;
    int (*supported)(void);
} isa_build;

static int
always(void)
{
    return 1;
}

/* Best first. */
static const isa_build builds[] = {
#if defined(CKC_HAVE_X86_ISAS)
    {&ckc_cpu_kernels_avx512, ckc_cpu_has_avx512},
    {&ckc_cpu_kernels_avx2, ckc_cpu_has_avx2},
#endif
    {&ckc_cpu_kernels_baseline, always},
};
#define N_BUILDS (sizeof(builds) / sizeof(builds[0]))

/* Index into builds[] of the kernels in use.  Kernels read it with the GIL
 * released while set_cpu_isa (under the GIL) may switch it: an atomic index (a
 * pointer does not fit the portable atomic on 64-bit Windows, where long is 32
 * bits).  Set before any kernel runs (module import), switched only by
 * ckc_cpu_select; a call that read the old value finishes with that build,
 * which gives the same bits. */
static ckc_atomic_counter selected = {(long)(N_BUILDS - 1)}; /* baseline, last */
static const char *available[N_BUILDS + 1];

const ckc_cpu_kernels *
ckc_cpu(void)
{
    return builds[ckc_atomic_load(&selected)].kernels;
}

const char *const *
ckc_cpu_available(void)
{
    size_t n = 0;
    for (size_t i = 0; i < N_BUILDS; i++) {
        if (builds[i].supported()) {
            available[n++] = builds[i].kernels->isa;
        }
    }
    available[n] = NULL;
    return available;
}

int
ckc_cpu_select(const char *isa)
{
    for (size_t i = 0; i < N_BUILDS; i++) {
        if (strcmp(isa, builds[i].kernels->isa) == 0 && builds[i].supported()) {
            ckc_atomic_store(&selected, (long)i);
            return 1;
        }
    }
    return 0;
}

const char *
ckc_cpu_threads(void)
{
    return ckc_parallel_runtime();
}

const char *
ckc_cpu_isa(void)
{
    return ckc_cpu()->isa;
}

void
ckc_cpu_init(void)
{
    /* The best this CPU runs; COMFY_KITCHEN_C_CPU_ISA arrives later, with the other
     * settings (_C.configure selects it). */
    ckc_parallel_init();
    ckc_cpu_select(ckc_cpu_available()[0]);
}
