// norm.metal: RMSNorm in f32, plain, fused with the residual add, and the
// DeltaNet output's gated form. One SIMD group per row: each lane sums the
// squares of its strided elements and simd_sum combines them, so there is no
// threadgroup memory and no barrier; a lane rereads only what it wrote.
// Grid: x = rows; threads per threadgroup = 32.
#include "common.h"

struct NormParams {
    uint width;    // elements per row
    uint x_stride; // floats between rows of the input (and residual)
    uint y_stride; // floats between rows of the output
    float eps;
};

inline float row_inv_rms(const device float* x, uint width, float eps, uint lane) {
    float ss = 0.0f;
    for (uint j = lane; j < width; j += 32) {
        ss += x[j] * x[j];
    }
    ss = simd_sum(ss);
    return rsqrt(ss / float(width) + eps);
}

// y = x·rsqrt(mean(x²)+eps)·w
kernel void rmsnorm_f32(constant NormParams& p [[buffer(0)]],
                        const device float* x [[buffer(1)]],
                        const device float* w [[buffer(2)]],
                        device float* y [[buffer(3)]],
                        uint row [[threadgroup_position_in_grid]],
                        uint lane [[thread_index_in_simdgroup]]) {
    const device float* xr = x + ulong(row) * p.x_stride;
    device float* yr = y + ulong(row) * p.y_stride;
    float inv = row_inv_rms(xr, p.width, p.eps, lane);
    for (uint j = lane; j < p.width; j += 32) {
        yr[j] = xr[j] * inv * w[j];
    }
}

// residual += delta; y = RMSNorm(residual)·w. The residual add of each layer
// rides on the norm that follows it, saving a pass over the stream.
kernel void add_rmsnorm_f32(constant NormParams& p [[buffer(0)]],
                            device float* residual [[buffer(1)]],
                            const device float* delta [[buffer(2)]],
                            const device float* w [[buffer(3)]],
                            device float* y [[buffer(4)]],
                            uint row [[threadgroup_position_in_grid]],
                            uint lane [[thread_index_in_simdgroup]]) {
    device float* rr = residual + ulong(row) * p.x_stride;
    const device float* dr = delta + ulong(row) * p.x_stride;
    device float* yr = y + ulong(row) * p.y_stride;
    float ss = 0.0f;
    for (uint j = lane; j < p.width; j += 32) {
        float v = rr[j] + dr[j];
        rr[j] = v;
        ss += v * v;
    }
    float inv = rsqrt(simd_sum(ss) / float(p.width) + p.eps);
    for (uint j = lane; j < p.width; j += 32) {
        yr[j] = rr[j] * inv * w[j];
    }
}

// The DeltaNet output norm: y = RMSNorm(o)·w·silu(z) per value head, with w
// the plain multiplier. o and z share the row layout [rows, width]; y may
// alias o (each lane rewrites only its own elements after reading them).
kernel void gated_rmsnorm_silu_f32(constant NormParams& p [[buffer(0)]],
                                   const device float* o [[buffer(1)]],
                                   const device float* z [[buffer(2)]],
                                   const device float* w [[buffer(3)]],
                                   device float* y [[buffer(4)]],
                                   uint row [[threadgroup_position_in_grid]],
                                   uint lane [[thread_index_in_simdgroup]]) {
    const device float* orow = o + ulong(row) * p.x_stride;
    const device float* zrow = z + ulong(row) * p.x_stride;
    device float* yr = y + ulong(row) * p.y_stride;
    float inv = row_inv_rms(orow, p.width, p.eps, lane);
    for (uint j = lane; j < p.width; j += 32) {
        yr[j] = orow[j] * inv * w[j] * silu(zrow[j]);
    }
}
