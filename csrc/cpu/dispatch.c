/* Choice of the CPU kernels' instruction set. */
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "platform/cpu_features.h"

extern const ckc_cpu_kernels ckc_cpu_kernels_baseline;
#if defined(CKC_HAVE_AVX2)
extern const ckc_cpu_kernels ckc_cpu_kernels_avx2;
#endif

static const ckc_cpu_kernels *selected = &ckc_cpu_kernels_baseline;
static const char *available[3];

const ckc_cpu_kernels *
ckc_cpu(void)
{
    return selected;
}

const char *const *
ckc_cpu_available(void)
{
    int n = 0;
#if defined(CKC_HAVE_AVX2)
    if (ckc_cpu_has_avx2()) {
        available[n++] = ckc_cpu_kernels_avx2.isa;
    }
#endif
    available[n++] = ckc_cpu_kernels_baseline.isa;
    available[n] = NULL;
    return available;
}

int
ckc_cpu_select(const char *isa)
{
#if defined(CKC_HAVE_AVX2)
    if (strcmp(isa, ckc_cpu_kernels_avx2.isa) == 0 && ckc_cpu_has_avx2()) {
        selected = &ckc_cpu_kernels_avx2;
        return 1;
    }
#endif
    if (strcmp(isa, ckc_cpu_kernels_baseline.isa) == 0) {
        selected = &ckc_cpu_kernels_baseline;
        return 1;
    }
    return 0;
}

void
ckc_cpu_select_default(void)
{
    const char *forced = getenv("COMFY_KITCHEN_C_CPU_ISA");
    if (forced != NULL && ckc_cpu_select(forced)) {
        return;
    }
    ckc_cpu_select(ckc_cpu_available()[0]);
}
