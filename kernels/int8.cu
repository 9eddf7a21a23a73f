/* GPU kernels of the int8 family and their launchers: row-wise quantization
 * (fused with the ConvRot rotation: one read of the row, one write of codes and
 * scale), tensor-wise quantization, the plain rotation, dequantization.  One
 * block per row; see row_tile.cuh for the layout.  Rows longer than one
 * segment of registers are read twice (absmax pass, then quantize pass). */
#include "elements.cuh"
#include "int8_rows.h"
#include "row_tile.cuh"

#include "gpu/launch.h"
#include "gpu/runtime.h"
#include "math/activation.h"
#include "math/int8_quant.h"

/* Registers per thread: CHUNKS chunks of 16 values; up to 4 keeps the row
 * kernels free of spills, longer rows loop over segments. */
#define CKC_MAX_CHUNKS 4
/* The row kernels ask for at least 2 resident blocks per SM: that lets ptxas use
 * up to 128 registers, which 4 chunks need on every target (its default budget
 * for 256-thread blocks spilled on sm_75/86/89). */
#define CKC_ROW_MIN_BLOCKS 2

static int
chunks_for(int64_t cols)
{
    const int64_t needed = (cols + CKC_ROW_SEGMENT(1) - 1) / CKC_ROW_SEGMENT(1);
    return needed <= 1 ? 1 : (needed <= 2 ? 2 : CKC_MAX_CHUNKS);
}

/* The row kernel instance for a row length: 1, 2 or CKC_MAX_CHUNKS chunks per thread. */
template <typename Kernel>
static Kernel
by_chunks(int chunks, Kernel one, Kernel two, Kernel most)
{
    return chunks == 1 ? one : (chunks == 2 ? two : most);
}

/* ---- row-wise quantization (optionally activated and rotated) ---- */

template <ckc_float_kind KIND, int CHUNKS, int ACT>
__global__ void __launch_bounds__(CKC_ROW_THREADS, CKC_ROW_MIN_BLOCKS)
int8_rowwise_kernel(ckc_int8_rowwise_params p, ckc_row_layout lay, bool vec)
{
    __shared__ float exchange[CKC_ROW_THREADS * CKC_CHUNK];
    __shared__ uint32_t partials[CKC_ROW_THREADS / 32];
    const int t = (int)threadIdx.x;
    const int64_t r = blockIdx.x;
    const int64_t k = p.cols;
    const int64_t elem = ckc_kind_size(KIND);
    const void *row = (const char *)p.x + r * lay.x_stride * elem;
    const int64_t segment = CKC_ROW_SEGMENT(CHUNKS);
    const int segments = (int)((k + segment - 1) / segment);
    float v[CHUNKS][CKC_CHUNK];
    uint32_t bits = 0;

    /* Pass 1: the quantizer's values and their absmax. */
    for (int s = 0; s < segments; s++) {
        for (int c = 0; c < CHUNKS; c++) {
            const int64_t start = s * segment + ((int64_t)c * CKC_ROW_THREADS + t) * CKC_CHUNK;
            ckc_rotated_chunk<KIND, ACT>(row, start, k, vec, (int)p.group, t, exchange, v[c]);
            for (int e = 0; e < CKC_CHUNK; e++) {
                const uint32_t b = ckc_f32_bits(v[c][e]) & 0x7FFFFFFFu;
                bits = b > bits ? b : bits;
            }
        }
    }
    const float scale = ckc_int8_scale(ckc_block_absmax(bits, partials));
    const float math_scale = ckc_int8_math_scale(scale, KIND);
    if (t == 0) {
        p.scale[r] = scale;
    }

    /* Pass 2: codes (the values are still in registers when the row is one
     * segment); the padding columns k .. q_stride - 1, all inside the chunk
     * holding column k - 1, get zeros. */
    for (int s = 0; s < segments; s++) {
        for (int c = 0; c < CHUNKS; c++) {
            const int64_t start = s * segment + ((int64_t)c * CKC_ROW_THREADS + t) * CKC_CHUNK;
            float noise[CKC_CHUNK];
            if (segments > 1) {
                ckc_rotated_chunk<KIND, ACT>(row, start, k, vec, (int)p.group, t, exchange, v[c]);
            }
            if (p.noise != NULL) {
                ckc_load_chunk<KIND>((const char *)p.noise + r * k * elem, start, k, vec, noise);
            }
            int8_t *q = p.q + r * lay.q_stride + start;
            for (int e = 0; e < CKC_CHUNK; e++) {
                if (start + e < k) {
                    q[e] = p.noise != NULL ? ckc_int8_code_stochastic(v[c][e], noise[e], math_scale, KIND)
                                           : ckc_int8_code(v[c][e], math_scale, KIND);
                } else if (start + e < lay.q_stride) {
                    q[e] = 0;
                }
            }
        }
    }
}

template <ckc_float_kind KIND, int ACT>
static void
launch_rowwise(const ckc_int8_rowwise_params *p, const ckc_row_layout *lay, uintptr_t stream, int chunks, bool vec)
{
    if constexpr (ACT == CKC_ACT_NONE) {
        const auto int8_rowwise = by_chunks(chunks, int8_rowwise_kernel<KIND, 1, ACT>,
                                            int8_rowwise_kernel<KIND, 2, ACT>,
                                            int8_rowwise_kernel<KIND, CKC_MAX_CHUNKS, ACT>);
        CKC_LAUNCH(int8_rowwise, dim3((unsigned)p->rows), dim3(CKC_ROW_THREADS), 0, stream, *p, *lay, vec);
    } else {
        /* One chunk per thread only (see int8_rows.h). */
        (void)chunks;
        const auto int8_rowwise_act = int8_rowwise_kernel<KIND, 1, ACT>;
        CKC_LAUNCH(int8_rowwise_act, dim3((unsigned)p->rows), dim3(CKC_ROW_THREADS), 0, stream, *p, *lay, vec);
    }
}

/* Quantizes under the caller's device guard; chunk counts and activations as
 * in the comment of ckc_gpu_int8_quantize_rows (int8_rows.h). */
static ckc_status
quantize_rows(const ckc_int8_rowwise_params *p, const ckc_row_layout *lay, uintptr_t stream, ckc_error *err)
{
    const int64_t elem = ckc_kind_size(p->kind);
    const bool vec = ckc_aligned16(p->x, lay->x_stride * elem) &&
                     (lay->act != CKC_ACT_SWIGLU || (p->cols * elem) % 16 == 0) &&
                     (p->noise == NULL || ckc_aligned16(p->noise, p->cols * elem));
    const int chunks = lay->act == CKC_ACT_NONE ? chunks_for(p->cols) : 1;
    return ckc_with_kind(p->kind, [&](auto kind) {
        constexpr ckc_float_kind KIND = decltype(kind)::value;
        switch (lay->act) {
        case CKC_ACT_GELU_TANH:
            launch_rowwise<KIND, CKC_ACT_GELU_TANH>(p, lay, stream, chunks, vec);
            break;
        case CKC_ACT_SWIGLU:
            launch_rowwise<KIND, CKC_ACT_SWIGLU>(p, lay, stream, chunks, vec);
            break;
        default:
            launch_rowwise<KIND, CKC_ACT_NONE>(p, lay, stream, chunks, vec);
            break;
        }
        return ckc_gpu_launch_status("int8_rowwise_kernel", err);
    });
}

ckc_status
ckc_gpu_int8_quantize_rows(const ckc_int8_rowwise_params *p, const ckc_row_layout *lay, uintptr_t stream,
                           ckc_error *err)
{
    if (lay->q_stride < p->cols || lay->q_stride > (p->cols + CKC_CHUNK - 1) / CKC_CHUNK * CKC_CHUNK) {
        return CKC_FAIL(err, CKC_ERR_RUNTIME, "row stride %lld of the codes is not in [%lld, roundup(%lld, 16)]",
                        (long long)lay->q_stride, (long long)p->cols, (long long)p->cols);
    }
    return quantize_rows(p, lay, stream, err);
}

extern "C" ckc_status
ckc_gpu_int8_rowwise(const ckc_int8_rowwise_params *p, const ckc_exec *exec, ckc_error *err)
{
    const ckc_row_layout lay = {p->cols, p->cols, CKC_ACT_NONE};
    return ckc_on_device(exec, err, [&]() { return quantize_rows(p, &lay, exec->stream, err); });
}

/* ---- plain rotation (rotate_int8_convrot_weight) ---- */

template <ckc_float_kind KIND, int CHUNKS>
__global__ void __launch_bounds__(CKC_ROW_THREADS, CKC_ROW_MIN_BLOCKS)
hadamard_rows_kernel(ckc_hadamard_rows_params p, bool vec)
{
    __shared__ float exchange[CKC_ROW_THREADS * CKC_CHUNK];
    const int t = (int)threadIdx.x;
    const int64_t r = blockIdx.x;
    const int64_t k = p.cols;
    const int64_t elem = ckc_kind_size(KIND);
    const int64_t segment = CKC_ROW_SEGMENT(CHUNKS);
    for (int64_t s = 0; s < k; s += segment) {
        for (int c = 0; c < CHUNKS; c++) {
            const int64_t start = s + ((int64_t)c * CKC_ROW_THREADS + t) * CKC_CHUNK;
            float v[CKC_CHUNK];
            ckc_rotated_chunk<KIND>((const char *)p.x + r * k * elem, start, k, vec, (int)p.group, t, exchange, v);
            for (int e = 0; e < CKC_CHUNK && start + e < k; e++) {
                ckc_store_value(p.out, KIND, r * k + start + e, v[e]);
            }
        }
    }
}

template <ckc_float_kind KIND>
static void
launch_hadamard_rows(const ckc_hadamard_rows_params *p, uintptr_t stream, int chunks, bool vec)
{
    const auto hadamard_rows = by_chunks(chunks, hadamard_rows_kernel<KIND, 1>, hadamard_rows_kernel<KIND, 2>,
                                         hadamard_rows_kernel<KIND, CKC_MAX_CHUNKS>);
    CKC_LAUNCH(hadamard_rows, dim3((unsigned)p->rows), dim3(CKC_ROW_THREADS), 0, stream, *p, vec);
}

extern "C" ckc_status
ckc_gpu_hadamard_rows(const ckc_hadamard_rows_params *p, const ckc_exec *exec, ckc_error *err)
{
    const bool vec = ckc_aligned16(p->x, p->cols * ckc_kind_size(p->kind));
    return ckc_on_device(exec, err, [&]() {
        return ckc_with_kind(p->kind, [&](auto kind) {
            launch_hadamard_rows<decltype(kind)::value>(p, exec->stream, chunks_for(p->cols), vec);
            return ckc_gpu_launch_status("hadamard_rows_kernel", err);
        });
    });
}

/* ---- dequantization ---- */

__device__ __forceinline__ float
ckc_dequant_scale(const ckc_int8_dequant_params &p, int64_t i)
{
    return p.scale[p.scale_mode == CKC_SCALE_FULL ? i : (p.scale_mode == CKC_SCALE_PER_ROW ? i / p.cols : 0)];
}

/* Without rotation: elementwise, a grid-stride loop over 64-bit indices. */
__global__ void __launch_bounds__(CKC_ROW_THREADS)
int8_dequant_kernel(ckc_int8_dequant_params p)
{
    const int64_t n = p.rows * p.cols;
    const int64_t stride = (int64_t)gridDim.x * CKC_ROW_THREADS;
    for (int64_t i = (int64_t)blockIdx.x * CKC_ROW_THREADS + threadIdx.x; i < n; i += stride) {
        ckc_store_value(p.out, p.out_kind, i, (float)p.q[i] * ckc_dequant_scale(p, i));
    }
}

/* With rotation: one block per row, (q * scale) * 1/sqrt(G), then the rotation. */
__global__ void __launch_bounds__(CKC_ROW_THREADS)
int8_dequant_rotated_kernel(ckc_int8_dequant_params p)
{
    __shared__ float exchange[CKC_ROW_THREADS * CKC_CHUNK];
    const int t = (int)threadIdx.x;
    const int64_t r = blockIdx.x;
    const int64_t k = p.cols;
    const float norm = ckc_hadamard_norm(ckc_hadamard_log4(p.group));
    for (int64_t s = 0; s < k; s += CKC_ROW_SEGMENT(1)) {
        const int64_t start = s + (int64_t)t * CKC_CHUNK;
        float v[CKC_CHUNK];
        for (int e = 0; e < CKC_CHUNK; e++) {
            const int64_t i = r * k + start + e;
            const float d = start + e < k ? (float)p.q[i] * ckc_dequant_scale(p, i) : 0.0f;
            v[e] = d * norm;
        }
        ckc_rotate_chunk(v, (int)p.group, t, exchange);
        for (int e = 0; e < CKC_CHUNK && start + e < k; e++) {
            ckc_store_value(p.out, p.out_kind, r * k + start + e, v[e]);
        }
    }
}

extern "C" ckc_status
ckc_gpu_int8_dequant(const ckc_int8_dequant_params *p, const ckc_exec *exec, ckc_error *err)
{
    return ckc_on_device(exec, err, [&]() {
        if (p->group > 0) {
            CKC_LAUNCH(int8_dequant_rotated_kernel, dim3((unsigned)p->rows), dim3(CKC_ROW_THREADS), 0,
                       exec->stream, *p);
            return ckc_gpu_launch_status("int8_dequant_rotated_kernel", err);
        }
        const int64_t blocks = (p->rows * p->cols + CKC_ROW_THREADS - 1) / CKC_ROW_THREADS;
        CKC_LAUNCH(int8_dequant_kernel, dim3((unsigned)(blocks < 65536 ? blocks : 65536)), dim3(CKC_ROW_THREADS),
                   0, exec->stream, *p);
        return ckc_gpu_launch_status("int8_dequant_kernel", err);
    });
}

/* ---- tensor-wise quantization ---- */

#define CKC_ELEMENTWISE_BLOCKS 4096 /* grid-stride loops: enough blocks to fill any GPU */

/* absmax of x into *absmax_bits (pre-zeroed) as magnitude bits: integer atomicMax
 * orders IEEE magnitudes like the values, NaN above infinity. */
template <ckc_float_kind KIND>
__global__ void __launch_bounds__(CKC_ROW_THREADS)
tensor_absmax_kernel(const void *x, int64_t n, uint32_t *absmax_bits)
{
    __shared__ uint32_t partials[CKC_ROW_THREADS / 32];
    const int64_t stride = (int64_t)gridDim.x * CKC_ROW_THREADS;
    uint32_t bits = 0;
    for (int64_t i = (int64_t)blockIdx.x * CKC_ROW_THREADS + threadIdx.x; i < n; i += stride) {
        const uint32_t b = ckc_f32_bits(ckc_load_value<KIND>(x, i)) & 0x7FFFFFFFu;
        bits = b > bits ? b : bits;
    }
    bits = ckc_f32_bits(ckc_block_absmax(bits, partials));
    if (threadIdx.x == 0) {
        atomicMax(absmax_bits, bits);
    }
}

/* The absmax bits in *scale become the float32 scale max(absmax / 127, 1e-30). */
__global__ void
tensor_scale_kernel(float *scale)
{
    *scale = ckc_int8_scale(ckc_f32_from_bits(*(const uint32_t *)scale));
}

template <ckc_float_kind KIND>
__global__ void __launch_bounds__(CKC_ROW_THREADS)
tensor_quantize_kernel(ckc_int8_tensorwise_params p)
{
    const float math_scale = ckc_int8_math_scale(*p.scale, KIND);
    const int64_t stride = (int64_t)gridDim.x * CKC_ROW_THREADS;
    for (int64_t i = (int64_t)blockIdx.x * CKC_ROW_THREADS + threadIdx.x; i < p.numel; i += stride) {
        const float v = ckc_load_value<KIND>(p.x, i);
        p.q[i] = p.noise != NULL ? ckc_int8_code_stochastic(v, ckc_load_value<KIND>(p.noise, i), math_scale, KIND)
                                 : ckc_int8_code(v, math_scale, KIND);
    }
}

template <ckc_float_kind KIND>
static ckc_status
run_tensorwise(const ckc_int8_tensorwise_params *p, uintptr_t stream, ckc_error *err)
{
    const int64_t needed = (p->numel + CKC_ROW_THREADS - 1) / CKC_ROW_THREADS;
    const dim3 grid((unsigned)(needed < CKC_ELEMENTWISE_BLOCKS ? needed : CKC_ELEMENTWISE_BLOCKS));
    if (p->compute_scale) {
        void (*tensor_absmax)(const void *, int64_t, uint32_t *) = tensor_absmax_kernel<KIND>;
        CKC_TRY(ckc_gpu_memset_async(p->scale, 0, sizeof(float), stream, err));
        CKC_LAUNCH(tensor_absmax, grid, dim3(CKC_ROW_THREADS), 0, stream, p->x, p->numel,
                   (uint32_t *)p->scale);
        CKC_TRY(ckc_gpu_launch_status("tensor_absmax_kernel", err));
        CKC_LAUNCH(tensor_scale_kernel, dim3(1), dim3(1), 0, stream, p->scale);
        CKC_TRY(ckc_gpu_launch_status("tensor_scale_kernel", err));
    }
    void (*tensor_quantize)(ckc_int8_tensorwise_params) = tensor_quantize_kernel<KIND>;
    CKC_LAUNCH(tensor_quantize, grid, dim3(CKC_ROW_THREADS), 0, stream, *p);
    return ckc_gpu_launch_status("tensor_quantize_kernel", err);
}

extern "C" ckc_status
ckc_gpu_int8_tensorwise(const ckc_int8_tensorwise_params *p, const ckc_exec *exec, ckc_error *err)
{
    return ckc_on_device(exec, err, [&]() {
        return ckc_with_kind(p->kind, [&](auto kind) {
            return run_tensorwise<decltype(kind)::value>(p, exec->stream, err);
        });
    });
}
