// gemm.metal: Y = X·Wᵀ for prefill chunks, the dequantization fused into
// the tile (gemm_tile.h). Grid: (ceil(out/BN), ceil(rows/BM));
// GEMM_THREADS threads. Each weight tile is read once per 32 token rows,
// where the GEMV would read it once per row.
#include "gemm_tile.h"

struct GemmParams {
    uint in;       // K
    uint out;      // N
    uint rows;     // M: token rows
    uint x_stride; // floats between rows of x
    uint y_stride; // floats between rows of y
    uint group_size;
};

template <typename F>
kernel void gemm(constant GemmParams& p [[buffer(0)]],
                 const device uchar* w [[buffer(1)]],
                 const device ushort* scales [[buffer(2)]],
                 const device ushort* biases [[buffer(3)]],
                 const device float* x [[buffer(4)]],
                 device float* y [[buffer(5)]],
                 uint2 tg [[threadgroup_position_in_grid]],
                 uint tid [[thread_index_in_threadgroup]],
                 uint sg [[simdgroup_index_in_threadgroup]]) {
    threadgroup float xs[GEMM_BM * GEMM_BK];
    threadgroup float ws[GEMM_BN * GEMM_BK];
    threadgroup float cs[GEMM_BM * GEMM_BN];
    WeightRef wr;
    wr.data = w;
    wr.scales = scales;
    wr.biases = biases;
    wr.in = p.in;
    wr.group_size = p.group_size;
    wr.flags = 0; // element reads only
    uint n0 = tg.x * GEMM_BN;
    uint m0 = tg.y * GEMM_BM;
    simdgroup_float8x8 c00 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_float8x8 c01 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_float8x8 c10 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_float8x8 c11 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    for (uint k0 = 0; k0 < p.in; k0 += GEMM_BK) {
        gemm_load_x(xs, x, p.x_stride, m0, p.rows, p.in, k0, tid);
        gemm_load_w<F>(ws, wr, n0, p.out, k0, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        gemm_mma(xs, ws, sg, min(uint(GEMM_BM), p.rows - m0), c00, c01, c10, c11);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    gemm_store(cs, sg, c00, c01, c10, c11);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < GEMM_BM * GEMM_BN; i += GEMM_THREADS) {
        uint m = m0 + i / GEMM_BN;
        uint n = n0 + i % GEMM_BN;
        if (m < p.rows && n < p.out) {
            y[ulong(m) * p.y_stride + n] = cs[i];
        }
    }
}

template [[host_name("gemm_f32_f32")]] [[kernel]] decltype(gemm<FmtF32>) gemm<FmtF32>;
template [[host_name("gemm_f16_f32")]] [[kernel]] decltype(gemm<FmtF16>) gemm<FmtF16>;
template [[host_name("gemm_bf16_f32")]] [[kernel]] decltype(gemm<FmtBF16>) gemm<FmtBF16>;
template [[host_name("gemm_q4_f32")]] [[kernel]] decltype(gemm<FmtQ4>) gemm<FmtQ4>;
template [[host_name("gemm_q8_f32")]] [[kernel]] decltype(gemm<FmtQ8>) gemm<FmtQ8>;
