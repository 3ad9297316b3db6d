// gemv.metal: y[t] = W·x[t] for a few token rows, the decode projections —
// one sequence's step, or the steps of several sequences decoding together.
//
// Each SIMD group owns GEMV_ROWS consecutive output rows and up to
// GEMV_TOKENS token rows; its 32 lanes walk the weight rows together,
// dequantizing codes in registers (common.h formats) once for all the token
// rows and accumulating in f32, then simd_sum reduces. No threadgroup
// memory, no barriers: the weights are read once per GEMV_TOKENS token rows,
// which is what bounds decode speed, so a step of four sequences reads them
// as often as a step of one. Each token row's sums are formed as for a row
// alone (dot_tokens), so a sequence's result does not depend on what else
// is in the step. Grid: x = ceil(out / (GEMV_ROWS·GEMV_SIMDGROUPS)),
// y = ceil(rows / GEMV_TOKENS); threads per threadgroup = 32·GEMV_SIMDGROUPS.
#include "common.h"

#define GEMV_ROWS 4
#define GEMV_SIMDGROUPS 2
#define GEMV_TOKENS 8

struct GemvParams {
    uint in;         // K: input width
    uint out;        // N: output rows of W
    uint x_stride;   // floats between token rows of x
    uint y_stride;   // floats between token rows of y
    uint group_size; // affine group size (ignored by float formats)
    uint flags;      // ROWS_ALIGNED_8 | X_ALIGNED_16 (common.h)
    uint rows;       // token rows of x and y
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
    uint t0 = tg.y * GEMV_TOKENS;
    uint row0 = (tg.x * GEMV_SIMDGROUPS + sg) * GEMV_ROWS;
    if (row0 >= p.out || t0 >= p.rows) {
        return;
    }
    uint n = min(uint(GEMV_ROWS), p.out - row0);
    uint nt = min(uint(GEMV_TOKENS), p.rows - t0);
    float acc[GEMV_TOKENS * GEMV_ROWS];
    uint tok[GEMV_TOKENS];
    for (uint t = 0; t < GEMV_TOKENS; t++) {
        tok[t] = t0 + t;
    }
    F::template dot_tokens<GEMV_ROWS, GEMV_TOKENS>(wr, row0, n, x, p.x_stride, tok, nt, lane, acc);
    for (uint t = 0; t < nt; t++) {
        device float* yt = y + ulong(t0 + t) * p.y_stride;
        for (uint r = 0; r < n; r++) {
            float s = simd_sum(acc[t * GEMV_ROWS + r]);
            if (lane == 0) {
                yt[row0 + r] = s;
            }
        }
    }
}

template [[host_name("gemv_f32_f32")]] [[kernel]] decltype(gemv<FmtF32>) gemv<FmtF32>;
template [[host_name("gemv_f16_f32")]] [[kernel]] decltype(gemv<FmtF16>) gemv<FmtF16>;
template [[host_name("gemv_bf16_f32")]] [[kernel]] decltype(gemv<FmtBF16>) gemv<FmtBF16>;
template [[host_name("gemv_q4_f32")]] [[kernel]] decltype(gemv<FmtQ4>) gemv<FmtQ4>;
template [[host_name("gemv_q8_f32")]] [[kernel]] decltype(gemv<FmtQ8>) gemv<FmtQ8>;
