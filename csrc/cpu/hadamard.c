/* Group-wise Hadamard rotation of a float row, the CPU form of
 * kernels/math/hadamard.h: each stage sweeps the whole row (groups are
 * contiguous and 4*stride divides the group), so the inner loops are long
 * unit-stride loops that vectorize. */
#include "math/hadamard.h"
#include "rows.h"

void
ckc_row_hadamard(float *v, int64_t n, int64_t group)
{
    const float norm = ckc_hadamard_norm(ckc_hadamard_log4(group));
    int64_t i;
    for (i = 0; i < n; i++) {
        v[i] *= norm;
    }
    for (i = 0; i < n; i += 4) {
        ckc_h4_butterfly(&v[i], &v[i + 1], &v[i + 2], &v[i + 3]);
    }
    for (int64_t s = 4; s < group; s *= 4) {
        ckc_hadamard_stage(v, n, s);
    }
}
