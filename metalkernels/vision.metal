// vision.metal: the vision tower's own steps (engine/model/MODEL.md, "Vision
// tower"): LayerNorm with bias, the bias add with GELU (tanh or erf) after a
// product, the 2-D rope from a cos/sin table, and bidirectional attention
// within each frame. One SIMD group per row (per row and head for the
// rope): lanes take strided elements, simd_sum combines them; the
// attention is tiled (below), a block of queries sharing each key tile.
#include "common.h"

struct VisionRowParams {
    uint width;    // elements per row
    uint x_stride; // floats between rows of the input
    uint y_stride; // floats between rows of the output
    float eps;
};

// y = (x − mean)·rsqrt(var + eps)·w + b per row, the variance biased; y may
// alias x (a lane rewrites only elements it has read).
// Grid: x = rows; threads per threadgroup = 32.
kernel void layernorm_bias_f32(constant VisionRowParams& p [[buffer(0)]],
                               const device float* x [[buffer(1)]],
                               const device float* w [[buffer(2)]],
                               const device float* b [[buffer(3)]],
                               device float* y [[buffer(4)]],
                               uint row [[threadgroup_position_in_grid]],
                               uint lane [[thread_index_in_simdgroup]]) {
    const device float* xr = x + ulong(row) * p.x_stride;
    device float* yr = y + ulong(row) * p.y_stride;
    float s = 0.0f;
    for (uint j = lane; j < p.width; j += 32) {
        s += xr[j];
    }
    float mean = simd_sum(s) / float(p.width);
    float v = 0.0f;
    for (uint j = lane; j < p.width; j += 32) {
        float d = xr[j] - mean;
        v += d * d;
    }
    float inv = rsqrt(simd_sum(v) / float(p.width) + p.eps);
    for (uint j = lane; j < p.width; j += 32) {
        yr[j] = (xr[j] - mean) * inv * w[j] + b[j];
    }
}

// gelu_tanh(x) = ½x(1 + tanh(√(2/π)(x + 0.044715x³))).
inline float gelu_tanh(float x) {
    return 0.5f * x * (1.0f + precise::tanh(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

// erf(x) for the exact GELU (Metal has no erf): Abramowitz and Stegun
// 7.1.26, |error| ≤ 1.5e-7.
inline float erf_approx(float x) {
    float a = fabs(x);
    float t = 1.0f / (1.0f + 0.3275911f * a);
    float poly = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f + t * 1.061405429f))));
    float r = 1.0f - poly * precise::exp(-a * a);
    return x < 0.0f ? -r : r;
}

// gelu(x) = ½x(1 + erf(x/√2)).
inline float gelu_erf(float x) { return 0.5f * x * (1.0f + erf_approx(x * 0.7071067811865476f)); }

// y = act(x + b) per row, in place; ACT 0: none, 1: gelu_tanh, 2: gelu_erf.
// Grid: x = rows; threads per threadgroup = 32.
template <uint ACT>
kernel void bias_act_f32(constant VisionRowParams& p [[buffer(0)]],
                         device float* x [[buffer(1)]],
                         const device float* b [[buffer(2)]],
                         uint row [[threadgroup_position_in_grid]],
                         uint lane [[thread_index_in_simdgroup]]) {
    device float* xr = x + ulong(row) * p.x_stride;
    for (uint j = lane; j < p.width; j += 32) {
        float v = xr[j] + b[j];
        if (ACT == 1) {
            v = gelu_tanh(v);
        } else if (ACT == 2) {
            v = gelu_erf(v);
        }
        xr[j] = v;
    }
}

template [[host_name("add_bias_f32")]] [[kernel]] decltype(bias_act_f32<0>) bias_act_f32<0>;
template [[host_name("bias_gelu_tanh_f32")]] [[kernel]] decltype(bias_act_f32<1>) bias_act_f32<1>;
template [[host_name("bias_gelu_erf_f32")]] [[kernel]] decltype(bias_act_f32<2>) bias_act_f32<2>;

struct RopeTableParams {
    uint heads;    // head vectors per row
    uint head_dim; // floats per head
    uint stride;   // floats between rows
    uint half_dim; // rotated pairs per head: dim i with i + half_dim
};

// Rotates each head of each row in place by the row's angles, given as
// cos and sin tables [rows, half_dim]: (x_i, x_{i+h}) →
// (x_i·c − x_{i+h}·s, x_{i+h}·c + x_i·s).
// Grid: x = rows, y = heads; threads per threadgroup = 32.
kernel void rope_table_f32(constant RopeTableParams& p [[buffer(0)]],
                           device float* x [[buffer(1)]],
                           const device float* cos_t [[buffer(2)]],
                           const device float* sin_t [[buffer(3)]],
                           uint2 tg [[threadgroup_position_in_grid]],
                           uint lane [[thread_index_in_simdgroup]]) {
    device float* xh = x + ulong(tg.x) * p.stride + tg.y * p.head_dim;
    const device float* c = cos_t + ulong(tg.x) * p.half_dim;
    const device float* s = sin_t + ulong(tg.x) * p.half_dim;
    for (uint i = lane; i < p.half_dim; i += 32) {
        float a = xh[i];
        float b = xh[i + p.half_dim];
        xh[i] = a * c[i] - b * s[i];
        xh[i + p.half_dim] = b * c[i] + a * s[i];
    }
}

struct VisionAttnParams {
    uint heads;
    uint head_dim;   // at most VISION_MAX_DIM
    uint width;      // heads·head_dim: q at 0, k at width, v at 2·width of a row
    uint stride;     // floats between rows of qkv
    uint segment;    // rows that attend to each other (a frame)
    uint out_stride; // floats between rows of the output
    float scale;     // 1/√head_dim
};

#define VISION_MAX_DIM 128
#define VISION_PER_LANE (VISION_MAX_DIM / 32)
#define VISION_SIMDS 16    // SIMD groups per threadgroup
#define VISION_PER_SIMD 4  // queries per SIMD group
#define VISION_QUERIES (VISION_SIMDS * VISION_PER_SIMD)
#define VISION_TILE 2048   // floats per K (and per V) tile: 16 KiB in all

// Bidirectional attention, tiled flash-style: a threadgroup takes
// VISION_QUERIES consecutive query rows of one head within one segment
// (a frame: rows seg·segment …), and walks the segment's keys in tiles
// staged in threadgroup memory, so each key and value row is read once
// per block of queries instead of once per query. Each SIMD group keeps
// the online softmax (running max, sum and output in registers) of
// VISION_PER_SIMD queries; one float4 simd_sum reduces a key's dot
// products with all of them. Keys are taken in order, so a query's result
// is the same whichever block it falls in. Lane l holds the dims l, l+32,
// l+64, l+96 of each query and output.
// Grid: (ceil(segment / VISION_QUERIES), heads, rows / segment); threads
// 32·VISION_SIMDS.
kernel void vision_attention_f32(constant VisionAttnParams& p [[buffer(0)]],
                                 const device float* qkv [[buffer(1)]],
                                 device float* out [[buffer(2)]],
                                 uint3 tg [[threadgroup_position_in_grid]],
                                 uint tid [[thread_index_in_threadgroup]],
                                 uint sg [[simdgroup_index_in_threadgroup]],
                                 uint lane [[thread_index_in_simdgroup]]) {
    threadgroup float k_tile[VISION_TILE];
    threadgroup float v_tile[VISION_TILE];
    uint h = tg.y;
    uint n = p.head_dim;
    uint seg0 = tg.z * p.segment;                              // the segment's first row
    uint q0 = tg.x * VISION_QUERIES + sg * VISION_PER_SIMD;   // this SIMD group's first query, in the segment
    float qv[VISION_PER_SIMD][VISION_PER_LANE];
    float acc[VISION_PER_SIMD][VISION_PER_LANE];
    float m[VISION_PER_SIMD];
    float l[VISION_PER_SIMD];
    for (uint u = 0; u < VISION_PER_SIMD; u++) {
        uint row = seg0 + min(q0 + u, p.segment - 1); // past the segment: loads only
        const device float* q = qkv + ulong(row) * p.stride + h * n;
        for (uint k = 0; k < VISION_PER_LANE; k++) {
            uint d = lane + 32 * k;
            qv[u][k] = d < n ? q[d] : 0.0f;
            acc[u][k] = 0.0f;
        }
        m[u] = NO_VALUE;
        l[u] = 0.0f;
    }
    uint tile_keys = VISION_TILE / n;
    for (uint t0 = 0; t0 < p.segment; t0 += tile_keys) {
        uint count = min(tile_keys, p.segment - t0);
        for (uint i = tid; i < count * n; i += 32 * VISION_SIMDS) {
            uint j = i / n;
            uint d = i - j * n;
            const device float* r = qkv + ulong(seg0 + t0 + j) * p.stride + h * n + d;
            k_tile[i] = r[p.width];
            v_tile[i] = r[2 * p.width];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
        for (uint j = 0; j < count; j++) {
            const threadgroup float* kr = k_tile + j * n;
            const threadgroup float* vr = v_tile + j * n;
            float4 part = float4(0.0f);
            for (uint k = 0; k < VISION_PER_LANE; k++) {
                uint d = lane + 32 * k;
                if (d < n) {
                    float kd = kr[d];
                    for (uint u = 0; u < VISION_PER_SIMD; u++) {
                        part[u] += qv[u][k] * kd;
                    }
                }
            }
            float4 s4 = simd_sum(part) * p.scale;
            for (uint u = 0; u < VISION_PER_SIMD; u++) {
                float mn = max(m[u], s4[u]);
                float corr = precise::exp(m[u] - mn);
                float e = precise::exp(s4[u] - mn);
                l[u] = l[u] * corr + e;
                for (uint k = 0; k < VISION_PER_LANE; k++) {
                    uint d = lane + 32 * k;
                    if (d < n) {
                        acc[u][k] = acc[u][k] * corr + e * vr[d];
                    }
                }
                m[u] = mn;
            }
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    for (uint u = 0; u < VISION_PER_SIMD; u++) {
        if (q0 + u >= p.segment) {
            continue;
        }
        device float* o = out + ulong(seg0 + q0 + u) * p.out_stride + h * n;
        for (uint k = 0; k < VISION_PER_LANE; k++) {
            uint d = lane + 32 * k;
            if (d < n) {
                o[d] = acc[u][k] / l[u];
            }
        }
    }
}

// x += d per row (the residual adds and the position embeddings).
// Grid: x = rows; threads per threadgroup = 32.
kernel void add_rows_f32(constant VisionRowParams& p [[buffer(0)]],
                         device float* x [[buffer(1)]],
                         const device float* d [[buffer(2)]],
                         uint row [[threadgroup_position_in_grid]],
                         uint lane [[thread_index_in_simdgroup]]) {
    device float* xr = x + ulong(row) * p.x_stride;
    const device float* dr = d + ulong(row) * p.y_stride;
    for (uint j = lane; j < p.width; j += 32) {
        xr[j] += dr[j];
    }
}
