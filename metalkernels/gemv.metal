// gemv.metal: y[t] = W·x[t] for a few token rows, the decode projections.
//
// Each SIMD group owns GEMV_ROWS consecutive output rows; its 32 lanes walk
// the rows together, dequantizing codes in registers (common.h formats) and
// accumulating in f32 (each x load serving all the rows), then simd_sum
// reduces. No threadgroup memory, no barriers: the weights are read exactly
// once per token row, which is what bounds decode speed. Grid: x = ceil(out / (GEMV_ROWS·GEMV_SIMDGROUPS)),
// y = token rows; threads per threadgroup = 32·GEMV_SIMDGROUPS.
#include "common.h"

#define GEMV_ROWS 4
#define GEMV_SIMDGROUPS 2

struct GemvParams {
    uint in;         // K: input width
    uint out;        // N: output rows of W
    uint x_stride;   // floats between token rows of x
    uint y_stride;   // floats between token rows of y
    uint group_size; // affine group size (ignored by float formats)
    uint flags;      // ROWS_ALIGNED_8 | X_ALIGNED_16 (common.h)
};

template <typename F>
kernel void gemv(constant GemvParams& p [[buffer(0)]],
                 const device uchar* w [[buffer(1)]],
                 const device ushort* scales [[buffer(2)]],
                 const device ushort* biases [[buffer(3)]],
                 const device float* x [[buffer(4)]],
                 device float* y [[buffer(5)]],
                 uint2 tg [[threadgroup_position_in_grid]],
                 uint sg [[simdgroup_index_in_threadgroup]],
                 uint lane [[thread_index_in_simdgroup]]) {
    WeightRef wr;
    wr.data = w;
    wr.scales = scales;
    wr.biases = biases;
    wr.in = p.in;
    wr.group_size = p.group_size;
    wr.flags = p.flags;
    const device float* xt = x + ulong(tg.y) * p.x_stride;
    device float* yt = y + ulong(tg.y) * p.y_stride;
    uint row0 = (tg.x * GEMV_SIMDGROUPS + sg) * GEMV_ROWS;
    if (row0 >= p.out) {
        return;
    }
    uint n = min(uint(GEMV_ROWS), p.out - row0);
    float acc[GEMV_ROWS];
    F::template dot_rows<GEMV_ROWS>(wr, row0, n, xt, lane, acc);
    for (uint r = 0; r < n; r++) {
        float s = simd_sum(acc[r]);
        if (lane == 0) {
            yt[row0 + r] = s;
        }
    }
}

template [[host_name("gemv_f32_f32")]] [[kernel]] decltype(gemv<FmtF32>) gemv<FmtF32>;
template [[host_name("gemv_f16_f32")]] [[kernel]] decltype(gemv<FmtF16>) gemv<FmtF16>;
template [[host_name("gemv_bf16_f32")]] [[kernel]] decltype(gemv<FmtBF16>) gemv<FmtBF16>;
template [[host_name("gemv_q4_f32")]] [[kernel]] decltype(gemv<FmtQ4>) gemv<FmtQ4>;
template [[host_name("gemv_q8_f32")]] [[kernel]] decltype(gemv<FmtQ8>) gemv<FmtQ8>;
