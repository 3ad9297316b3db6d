// gemm.metal: Y = X·Wᵀ for prefill chunks, the dequantization fused into
// the tile (gemm_tile.h), two operand types:
//   gemm_<w>_f32       f32 operands, 32×32 outputs per threadgroup
//   gemm_half_<w>_f32  half operands, 64×32 outputs (the default)
// Grid: (ceil(out/BN), ceil(rows/BM)); GEMM_THREADS threads. Each weight
// tile is read once per BM token rows, where the GEMV would read it once
// per row.
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

// The half-operand GEMM (gemm_tile.h): 64 token rows × 32 outputs per
// threadgroup, so each weight tile is dequantized once per 64 rows; half
// tiles keep that at 18 KiB of threadgroup memory (x as hi and lo 4 KiB
// each, w 2 KiB, the f32 result 8 KiB). Grid: (ceil(out/GEMMH_BN), ceil(rows/GEMMH_BM)).
#define GEMMH_BM 64
#define GEMMH_BN 32
#define GEMMH_BK 32

template <typename F>
kernel void gemm_h(constant GemmParams& p [[buffer(0)]],
                   const device uchar* w [[buffer(1)]],
                   const device ushort* scales [[buffer(2)]],
                   const device ushort* biases [[buffer(3)]],
                   const device float* x [[buffer(4)]],
                   device float* y [[buffer(5)]],
                   uint2 tg [[threadgroup_position_in_grid]],
                   uint tid [[thread_index_in_threadgroup]],
                   uint sg [[simdgroup_index_in_threadgroup]]) {
    threadgroup half xs[GEMMH_BM * GEMMH_BK];
    threadgroup half xl[GEMMH_BM * GEMMH_BK];
    threadgroup half ws[GEMMH_BN * GEMMH_BK];
    threadgroup float cs[GEMMH_BM * GEMMH_BN];
    WeightRef wr;
    wr.data = w;
    wr.scales = scales;
    wr.biases = biases;
    wr.in = p.in;
    wr.group_size = p.group_size;
    wr.flags = 0; // element reads only
    uint n0 = tg.x * GEMMH_BN;
    uint m0 = tg.y * GEMMH_BM;
    uint rows = min(uint(GEMMH_BM), p.rows - m0);
    GemmAcc<GEMMH_BM / 16, GEMMH_BN / 16> acc;
    gemmh_zero(acc);
    for (uint k0 = 0; k0 < p.in; k0 += GEMMH_BK) {
        gemmh_load_x<GEMMH_BM, GEMMH_BK>(xs, xl, x, p.x_stride, m0, p.rows, p.in, k0, tid);
        gemmh_load_w<F, GEMMH_BN, GEMMH_BK>(ws, wr, n0, p.out, k0, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        gemmh_mma<GEMMH_BM / 16, GEMMH_BN / 16, GEMMH_BK>(xs, xl, ws, sg, rows, acc);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    gemmh_store<GEMMH_BM / 16, GEMMH_BN / 16, GEMMH_BN>(cs, sg, acc);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < GEMMH_BM * GEMMH_BN; i += GEMM_THREADS) {
        uint m = m0 + i / GEMMH_BN;
        uint n = n0 + i % GEMMH_BN;
        if (m < p.rows && n < p.out) {
            y[ulong(m) * p.y_stride + n] = cs[i];
        }
    }
}

template [[host_name("gemm_half_f32_f32")]] [[kernel]] decltype(gemm_h<FmtF32>) gemm_h<FmtF32>;
template [[host_name("gemm_half_f16_f32")]] [[kernel]] decltype(gemm_h<FmtF16>) gemm_h<FmtF16>;
template [[host_name("gemm_half_bf16_f32")]] [[kernel]] decltype(gemm_h<FmtBF16>) gemm_h<FmtBF16>;
template [[host_name("gemm_half_q4_f32")]] [[kernel]] decltype(gemm_h<FmtQ4>) gemm_h<FmtQ4>;
template [[host_name("gemm_half_q8_f32")]] [[kernel]] decltype(gemm_h<FmtQ8>) gemm_h<FmtQ8>;
