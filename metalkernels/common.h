// common.h: what every kernel family shares — bf16/f16 widening, the weight
// formats the checkpoints store (f32, f16, bf16, MLX affine 4- and 8-bit) read
// row by row with dequantization in registers, and small activation functions.
//
// Kernels include this header with #include "common.h"; it relies only on
// <metal_stdlib> so that Apple's compiler (MSL 3.1) and the host emulator
// both accept it.
#pragma once
#include <metal_stdlib>
using namespace metal;

// bf16 is stored as its 16 raw bits (ushort) so that the kernels run on every
// Apple GPU, including those without a native bfloat type.
inline float bf16_to_float(ushort b) { return as_type<float>(uint(b) << 16); }

// Round to nearest even, as torch and the host side do; NaN stays NaN.
inline ushort float_to_bf16(float f) {
    uint u = as_type<uint>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return ushort((u >> 16) | 0x40u);
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return ushort(u >> 16);
}

// Metal compiles with fast math by default, under which the compiler may
// assume no value is infinite or NaN: comparisons with -INFINITY and isnan
// can fold away. Kernels therefore start maxima at NO_VALUE, a finite
// sentinel below every real value, and test for NaN and −∞ on the bits.
#define NO_VALUE (-FLT_MAX)

inline bool is_nan_or_neg_inf(float x) {
    uint u = as_type<uint>(x);
    return (u & 0x7fffffffu) > 0x7f800000u || u == 0xff800000u;
}

// pick_seq is argument i of eight: the per-sequence buffers of a kernel that
// serves several sequences' decode steps in one dispatch.
template <typename T>
inline device T* pick_seq(uint i, device T* b0, device T* b1, device T* b2, device T* b3,
                          device T* b4, device T* b5, device T* b6, device T* b7) {
    switch (i) {
    case 0: return b0;
    case 1: return b1;
    case 2: return b2;
    case 3: return b3;
    case 4: return b4;
    case 5: return b5;
    case 6: return b6;
    default: return b7;
    }
}

inline float silu(float x) { return x / (1.0f + exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + exp(-x)); }
inline float softplus(float x) { return x > 20.0f ? x : log(1.0f + exp(x)); }

// WeightRef points at one [out, in] matrix: data holds the rows (elements or
// packed codes), scales and biases the affine groups (bf16, [out, in/group]).
// Expert kernels build one per expert from an offset table.
struct WeightRef {
    const device uchar* data;
    const device ushort* scales;
    const device ushort* biases;
    uint in;
    uint group_size;
    uint flags; // ROWS_ALIGNED_8 | X_ALIGNED_16, as the host checked them
};

// Vector loads need natural alignment on Metal. safetensors does not align
// tensors, and activations are aligned only when their row stride allows,
// so the host says per dispatch what holds.
#define ROWS_ALIGNED_8 1u // every weight row starts on 8 bytes
#define X_ALIGNED_16 2u   // every activation row x starts on 16 bytes

// Each format supplies:
//   dot(w, row, x, lane): this lane's share of Σ_j W[row,j]·x[j]; the 32 lanes
//       of a SIMD group together cover the row, the caller sums with simd_sum.
//   dot_rows<R>(w, row0, n, x, lane, acc): the same for rows row0..row0+n−1
//       (n ≤ R) at once, so that each load of x serves every row.
//   dot_tokens<R, T>(w, row0, n, x, x_stride, tok, nt, lane, acc): dot_rows
//       for nt ≤ T token rows of x at once — token t's row is row tok[t] of x,
//       x_stride floats apart — into acc[t·R + r]:
//       each weight is loaded once for all the tokens, and each token's sum
//       is formed exactly as dot_rows forms it, so a token's result does not
//       depend on which other tokens share the call.
//   at(w, row, j): one element, dequantized.
//   load8(w, row, j, dst): elements j..j+7 into threadgroup memory.
// Reading x and the codes in runs of four or eight keeps the loads wide; rows
// whose length does not allow it fall back to single elements.

struct FmtF32 {
    static float at(WeightRef w, uint row, uint j) {
        return ((const device float*)w.data)[ulong(row) * w.in + j];
    }
    static void load8(WeightRef w, uint row, uint j, threadgroup float* dst) {
        for (uint e = 0; e < 8; e++) {
            dst[e] = at(w, row, j + e);
        }
    }
    static float dot(WeightRef w, uint row, const device float* x, uint lane) {
        const device float* r = (const device float*)w.data + ulong(row) * w.in;
        float acc = 0.0f;
        for (uint j = lane; j < w.in; j += 32) {
            acc += r[j] * x[j];
        }
        return acc;
    }
    template <uint R>
    static void dot_rows(WeightRef w, uint row0, uint n, const device float* x, uint lane, thread float* acc) {
        for (uint r = 0; r < R; r++) {
            acc[r] = r < n ? dot(w, row0 + r, x, lane) : 0.0f;
        }
    }
    template <uint R, uint T>
    static void dot_tokens(WeightRef w, uint row0, uint n, const device float* x, uint x_stride, thread const uint* tok, uint nt, uint lane,
                           thread float* acc) {
        for (uint i = 0; i < R * T; i++) {
            acc[i] = 0.0f;
        }
        for (uint j = lane; j < w.in; j += 32) {
            for (uint r = 0; r < R; r++) {
                if (r < n) {
                    float wv = at(w, row0 + r, j);
                    for (uint t = 0; t < T; t++) {
                        if (t < nt) {
                            acc[t * R + r] += wv * x[ulong(tok[t]) * x_stride + j];
                        }
                    }
                }
            }
        }
    }
};

struct FmtF16 {
    static float at(WeightRef w, uint row, uint j) {
        return float(((const device half*)w.data)[ulong(row) * w.in + j]);
    }
    static void load8(WeightRef w, uint row, uint j, threadgroup float* dst) {
        for (uint e = 0; e < 8; e++) {
            dst[e] = at(w, row, j + e);
        }
    }
    static float dot(WeightRef w, uint row, const device float* x, uint lane) {
        const device half* r = (const device half*)w.data + ulong(row) * w.in;
        float acc = 0.0f;
        for (uint j = lane; j < w.in; j += 32) {
            acc += float(r[j]) * x[j];
        }
        return acc;
    }
    template <uint R>
    static void dot_rows(WeightRef w, uint row0, uint n, const device float* x, uint lane, thread float* acc) {
        for (uint r = 0; r < R; r++) {
            acc[r] = r < n ? dot(w, row0 + r, x, lane) : 0.0f;
        }
    }
    template <uint R, uint T>
    static void dot_tokens(WeightRef w, uint row0, uint n, const device float* x, uint x_stride, thread const uint* tok, uint nt, uint lane,
                           thread float* acc) {
        for (uint i = 0; i < R * T; i++) {
            acc[i] = 0.0f;
        }
        for (uint j = lane; j < w.in; j += 32) {
            for (uint r = 0; r < R; r++) {
                if (r < n) {
                    float wv = at(w, row0 + r, j);
                    for (uint t = 0; t < T; t++) {
                        if (t < nt) {
                            acc[t * R + r] += wv * x[ulong(tok[t]) * x_stride + j];
                        }
                    }
                }
            }
        }
    }
};

struct FmtBF16 {
    static float at(WeightRef w, uint row, uint j) {
        return bf16_to_float(((const device ushort*)w.data)[ulong(row) * w.in + j]);
    }
    static void load8(WeightRef w, uint row, uint j, threadgroup float* dst) {
        for (uint e = 0; e < 8; e++) {
            dst[e] = at(w, row, j + e);
        }
    }
    static float dot(WeightRef w, uint row, const device float* x, uint lane) {
        const device ushort* r = (const device ushort*)w.data + ulong(row) * w.in;
        float acc = 0.0f;
        uint j0 = 0;
        if ((w.flags & (ROWS_ALIGNED_8 | X_ALIGNED_16)) == (ROWS_ALIGNED_8 | X_ALIGNED_16) && (w.in & 3u) == 0) {
            // Four elements per lane per step: 8-byte loads of the row,
            // which Metal allows only on 8-byte boundaries (safetensors
            // does not align tensors, so the host says when they are).
            const device ushort4* r4 = (const device ushort4*)r;
            const device float4* x4 = (const device float4*)x;
            uint n4 = w.in / 4;
            for (uint i = lane; i < n4; i += 32) {
                ushort4 q = r4[i];
                float4 xv = x4[i];
                acc += bf16_to_float(q.x) * xv.x + bf16_to_float(q.y) * xv.y +
                       bf16_to_float(q.z) * xv.z + bf16_to_float(q.w) * xv.w;
            }
            j0 = w.in;
        }
        for (uint j = j0 + lane; j < w.in; j += 32) {
            acc += bf16_to_float(r[j]) * x[j];
        }
        return acc;
    }
    template <uint R>
    static void dot_rows(WeightRef w, uint row0, uint n, const device float* x, uint lane, thread float* acc) {
        for (uint r = 0; r < R; r++) {
            acc[r] = r < n ? dot(w, row0 + r, x, lane) : 0.0f;
        }
    }
    template <uint R, uint T>
    static void dot_tokens(WeightRef w, uint row0, uint n, const device float* x, uint x_stride, thread const uint* tok, uint nt, uint lane,
                           thread float* acc) {
        for (uint i = 0; i < R * T; i++) {
            acc[i] = 0.0f;
        }
        uint j0 = 0;
        if ((w.flags & (ROWS_ALIGNED_8 | X_ALIGNED_16)) == (ROWS_ALIGNED_8 | X_ALIGNED_16) && (w.in & 3u) == 0) {
            uint n4 = w.in / 4;
            for (uint i = lane; i < n4; i += 32) {
                for (uint r = 0; r < R; r++) {
                    if (r < n) {
                        ushort4 q = ((const device ushort4*)((const device ushort*)w.data + ulong(row0 + r) * w.in))[i];
                        for (uint t = 0; t < T; t++) {
                            if (t < nt) {
                                float4 xv = ((const device float4*)(x + ulong(tok[t]) * x_stride))[i];
                                acc[t * R + r] += bf16_to_float(q.x) * xv.x + bf16_to_float(q.y) * xv.y +
                                                  bf16_to_float(q.z) * xv.z + bf16_to_float(q.w) * xv.w;
                            }
                        }
                    }
                }
            }
            j0 = w.in;
        }
        for (uint j = j0 + lane; j < w.in; j += 32) {
            for (uint r = 0; r < R; r++) {
                if (r < n) {
                    float wv = at(w, row0 + r, j);
                    for (uint t = 0; t < T; t++) {
                        if (t < nt) {
                            acc[t * R + r] += wv * x[ulong(tok[t]) * x_stride + j];
                        }
                    }
                }
            }
        }
    }
};

// MLX affine: element j of a row is bits [B·(j%per), B·(j%per)+B) of word
// j/per, per = 32/B, low bits first; w = scale·q + bias per group. The group
// size is a multiple of per, so one word never straddles two groups, and
// scale·Σq·x + bias·Σx needs one multiply pair per word instead of per element.
template <uint B>
struct FmtAffine {
    static float at(WeightRef w, uint row, uint j) {
        const uint per = 32 / B;
        const uint mask = (1u << B) - 1u;
        const device uint* words = (const device uint*)w.data + ulong(row) * (w.in / per);
        uint q = (words[j / per] >> (B * (j % per))) & mask;
        ulong g = ulong(row) * (w.in / w.group_size) + j / w.group_size;
        return bf16_to_float(w.scales[g]) * float(q) + bf16_to_float(w.biases[g]);
    }
    // Eight consecutive elements from j (a multiple of 8): whole words, and
    // one scale/bias pair per word (a group never splits a word).
    static void load8(WeightRef w, uint row, uint j, threadgroup float* dst) {
        const uint per = 32 / B;
        const uint mask = (1u << B) - 1u;
        const device uint* words = (const device uint*)w.data + ulong(row) * (w.in / per);
        ulong gbase = ulong(row) * (w.in / w.group_size);
        for (uint e0 = 0; e0 < 8; e0 += per) {
            uint word = words[(j + e0) / per];
            ulong g = gbase + (j + e0) / w.group_size;
            float scale = bf16_to_float(w.scales[g]);
            float bias = bf16_to_float(w.biases[g]);
            for (uint e = 0; e < per; e++) {
                dst[e0 + e] = scale * float((word >> (B * e)) & mask) + bias;
            }
        }
    }
    static float dot(WeightRef w, uint row, const device float* x, uint lane) {
        const uint per = 32 / B;
        const uint mask = (1u << B) - 1u;
        uint nwords = w.in / per;
        const device uint* words = (const device uint*)w.data + ulong(row) * nwords;
        const device ushort* sc = w.scales + ulong(row) * (w.in / w.group_size);
        const device ushort* bi = w.biases + ulong(row) * (w.in / w.group_size);
        float acc = 0.0f;
        for (uint i = lane; i < nwords; i += 32) {
            uint word = words[i];
            uint j = i * per;
            float sq = 0.0f;
            float sx = 0.0f;
            for (uint e = 0; e < per; e++) {
                float xv = x[j + e];
                sq += float((word >> (B * e)) & mask) * xv;
                sx += xv;
            }
            uint g = j / w.group_size;
            acc += bf16_to_float(sc[g]) * sq + bf16_to_float(bi[g]) * sx;
        }
        return acc;
    }
    // Rows share each word's x values: eight (or four) activations loaded
    // once, as float4s when aligned, serve all the rows.
    template <uint R>
    static void dot_rows(WeightRef w, uint row0, uint n, const device float* x, uint lane, thread float* acc) {
        const uint per = 32 / B;
        const uint mask = (1u << B) - 1u;
        uint nwords = w.in / per;
        uint groups = w.in / w.group_size;
        for (uint r = 0; r < R; r++) {
            acc[r] = 0.0f;
        }
        bool x_vec4 = (w.flags & X_ALIGNED_16) != 0;
        for (uint i = lane; i < nwords; i += 32) {
            uint j = i * per;
            float xv[8];
            if (x_vec4) {
                for (uint e = 0; e < per; e += 4) {
                    float4 v4 = *(const device float4*)(x + j + e);
                    xv[e] = v4.x;
                    xv[e + 1] = v4.y;
                    xv[e + 2] = v4.z;
                    xv[e + 3] = v4.w;
                }
            } else {
                for (uint e = 0; e < per; e++) {
                    xv[e] = x[j + e];
                }
            }
            float sx = 0.0f;
            for (uint e = 0; e < per; e++) {
                sx += xv[e];
            }
            uint g = j / w.group_size;
            for (uint r = 0; r < R; r++) {
                if (r < n) {
                    ulong row = row0 + r;
                    uint word = ((const device uint*)w.data)[row * nwords + i];
                    float sq = 0.0f;
                    for (uint e = 0; e < per; e++) {
                        sq += float((word >> (B * e)) & mask) * xv[e];
                    }
                    acc[r] += bf16_to_float(w.scales[row * groups + g]) * sq + bf16_to_float(w.biases[row * groups + g]) * sx;
                }
            }
        }
    }
    template <uint R, uint T>
    static void dot_tokens(WeightRef w, uint row0, uint n, const device float* x, uint x_stride, thread const uint* tok, uint nt, uint lane,
                           thread float* acc) {
        const uint per = 32 / B;
        const uint mask = (1u << B) - 1u;
        uint nwords = w.in / per;
        uint groups = w.in / w.group_size;
        for (uint i = 0; i < R * T; i++) {
            acc[i] = 0.0f;
        }
        bool x_vec4 = (w.flags & X_ALIGNED_16) != 0;
        for (uint i = lane; i < nwords; i += 32) {
            uint j = i * per;
            uint g = j / w.group_size;
            uint word[R];
            float scale[R];
            float bias[R];
            for (uint r = 0; r < R; r++) {
                ulong row = row0 + min(r, n - 1);
                word[r] = ((const device uint*)w.data)[row * nwords + i];
                scale[r] = bf16_to_float(w.scales[row * groups + g]);
                bias[r] = bf16_to_float(w.biases[row * groups + g]);
            }
            for (uint t = 0; t < T; t++) {
                if (t >= nt) {
                    break;
                }
                const device float* xt = x + ulong(tok[t]) * x_stride;
                float xv[8];
                if (x_vec4) {
                    for (uint e = 0; e < per; e += 4) {
                        float4 v4 = *(const device float4*)(xt + j + e);
                        xv[e] = v4.x;
                        xv[e + 1] = v4.y;
                        xv[e + 2] = v4.z;
                        xv[e + 3] = v4.w;
                    }
                } else {
                    for (uint e = 0; e < per; e++) {
                        xv[e] = xt[j + e];
                    }
                }
                float sx = 0.0f;
                for (uint e = 0; e < per; e++) {
                    sx += xv[e];
                }
                for (uint r = 0; r < R; r++) {
                    if (r < n) {
                        float sq = 0.0f;
                        for (uint e = 0; e < per; e++) {
                            sq += float((word[r] >> (B * e)) & mask) * xv[e];
                        }
                        acc[t * R + r] += scale[r] * sq + bias[r] * sx;
                    }
                }
            }
        }
    }
};

typedef FmtAffine<4> FmtQ4;
typedef FmtAffine<8> FmtQ8;
