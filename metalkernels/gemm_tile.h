// gemm_tile.h: the output tiles the prefill GEMMs share, on simdgroup
// matrices (every Apple GPU since M1 has them). Two operand types:
//
//   f32 tiles (gemm_*_f32, moe_gemm_*_f32): 32×32 outputs, 8×8 f32
//   operands and accumulators; operands keep activations and dequantized
//   weights exact to the bit they were computed with.
//   half tiles (gemm_half_*, moe_gemm_*_half_*, below): half operands
//   (activations as a hi + lo pair), f32 accumulators; larger tiles; the
//   default on the GPU.
//
// A threadgroup of GEMM_THREADS (4 SIMD groups) computes C[BM, BN] =
// X[BM, K]·W[BN, K]ᵀ: per BK-wide step it stages X rows and the dequantized
// W rows in threadgroup memory (never in device memory), then each SIMD
// group multiplies its quarter of the tile as blocks of 8×8 matrices.
#pragma once
#include "common.h"

#define GEMM_BM 32
#define GEMM_BN 32
#define GEMM_BK 32
#define GEMM_THREADS 128

// Stage W rows [n0, n0+BN) × columns [k0, k0+BK), dequantized, zero past
// the edges (nmax rows, w.in columns).
template <typename F>
inline void gemm_load_w(threadgroup float* ws, WeightRef w, uint n0, uint nmax, uint k0, uint tid) {
    for (uint i = tid; i < GEMM_BN * GEMM_BK / 8; i += GEMM_THREADS) {
        uint r = i / (GEMM_BK / 8);
        uint c = (i % (GEMM_BK / 8)) * 8;
        uint n = n0 + r;
        uint k = k0 + c;
        threadgroup float* dst = ws + r * GEMM_BK + c;
        if (n < nmax && k + 8 <= w.in) {
            F::load8(w, n, k, dst);
        } else {
            for (uint e = 0; e < 8; e++) {
                dst[e] = (n < nmax && k + e < w.in) ? F::at(w, n, k + e) : 0.0f;
            }
        }
    }
}

// Stage X rows [m0, m0+BM) (rows past mmax are zero) × columns [k0, k0+BK).
inline void gemm_load_x(threadgroup float* xs, const device float* x, uint x_stride, uint m0, uint mmax,
                        uint in, uint k0, uint tid) {
    for (uint i = tid; i < GEMM_BM * GEMM_BK; i += GEMM_THREADS) {
        uint r = i / GEMM_BK;
        uint c = i % GEMM_BK;
        uint m = m0 + r;
        uint k = k0 + c;
        xs[i] = (m < mmax && k < in) ? x[ulong(m) * x_stride + k] : 0.0f;
    }
}

// Stage the x rows named by rows[0..valid) (rows past valid are zero) ×
// columns [k0, k0+BK): a gather, for expert tiles whose rows are tokens.
inline void gemm_load_x_rows(threadgroup float* xs, const device float* x, uint x_stride,
                             const device uint* rows, uint valid, uint in, uint k0, uint tid) {
    for (uint i = tid; i < GEMM_BM * GEMM_BK; i += GEMM_THREADS) {
        uint r = i / GEMM_BK;
        uint k = k0 + i % GEMM_BK;
        xs[i] = (r < valid && k < in) ? x[ulong(rows[r]) * x_stride + k] : 0.0f;
    }
}

// acc += xs·wsᵀ for this SIMD group's quarter of the tile. rows is how
// many of the tile's BM rows hold data: 8-row blocks past it are padding
// and are skipped (a whole SIMD group at a time, so control stays uniform),
// which matters for expert tiles that hold a token or two.
inline void gemm_mma(const threadgroup float* xs, const threadgroup float* ws, uint sg, uint rows,
                     thread simdgroup_float8x8& c00, thread simdgroup_float8x8& c01,
                     thread simdgroup_float8x8& c10, thread simdgroup_float8x8& c11) {
    uint sm = (sg / 2) * 16;
    uint sn = (sg % 2) * 16;
    if (sm >= rows) {
        return;
    }
    bool lower = sm + 8 < rows;
    for (uint kk = 0; kk < GEMM_BK; kk += 8) {
        simdgroup_float8x8 a0;
        simdgroup_float8x8 b0;
        simdgroup_float8x8 b1;
        simdgroup_load(a0, xs + sm * GEMM_BK + kk, GEMM_BK);
        // B = Wᵀ: element (k, n) is ws[n·BK + k], a transposed load.
        simdgroup_load(b0, ws + sn * GEMM_BK + kk, GEMM_BK, ulong2(0, 0), true);
        simdgroup_load(b1, ws + (sn + 8) * GEMM_BK + kk, GEMM_BK, ulong2(0, 0), true);
        simdgroup_multiply_accumulate(c00, a0, b0, c00);
        simdgroup_multiply_accumulate(c01, a0, b1, c01);
        if (lower) {
            simdgroup_float8x8 a1;
            simdgroup_load(a1, xs + (sm + 8) * GEMM_BK + kk, GEMM_BK);
            simdgroup_multiply_accumulate(c10, a1, b0, c10);
            simdgroup_multiply_accumulate(c11, a1, b1, c11);
        }
    }
}

// Write the SIMD group's accumulators into the BM×BN tile cs.
inline void gemm_store(threadgroup float* cs, uint sg,
                       thread simdgroup_float8x8& c00, thread simdgroup_float8x8& c01,
                       thread simdgroup_float8x8& c10, thread simdgroup_float8x8& c11) {
    uint sm = (sg / 2) * 16;
    uint sn = (sg % 2) * 16;
    simdgroup_store(c00, cs + sm * GEMM_BN + sn, GEMM_BN);
    simdgroup_store(c01, cs + sm * GEMM_BN + sn + 8, GEMM_BN);
    simdgroup_store(c10, cs + (sm + 8) * GEMM_BN + sn, GEMM_BN);
    simdgroup_store(c11, cs + (sm + 8) * GEMM_BN + sn + 8, GEMM_BN);
}

// ---------------------------------------------------------------- half tiles
//
// The half-operand GEMMs stage their operands as half in threadgroup memory
// and multiply simdgroup_half8x8 operands into simdgroup_float8x8
// accumulators: products of two halves are exact in f32 and the sums run
// in f32. Metal's simdgroup_multiply_accumulate takes the element types of
// d, a, b and c independently (half a and b with float c and d is the form
// llama.cpp's mul_mm has used on every Apple GPU since M1; MLX's steel GEMM
// instead widens half tiles into float fragments at load).
//
// Weights take one half each: bf16 and f16 weights convert exactly (bf16
// below 2⁻¹⁴ loses bits as a half subnormal), MLX affine weights round
// scale·q + bias to 11 bits (2⁻¹² relative on average). Activations take
// two, hi and lo (gemm_split), so they keep 22 bits: with a single half
// each, the random-weight test checkpoints' expert choices flipped on
// near ties and single tokens' logits moved by 7–12 % of the logit scale.
// Half tiles of weights still halve the weight tile and its bandwidth, and
// the x pair costs what one f32 tile does.
//
// Range: half ends at 65504. Dequantized weights are O(1), and the GEMM
// inputs are normed activations and SwiGLU outputs. Measured max |x| at the
// GEMM inputs (TestGEMMInputRange; the demo model is trained): the fixture
// checkpoints 20 (dense), 5.2 (expert gate/up), 12 (expert down); the demo
// 5.2, 4.3, 73; a synthetic full-width checkpoint (engine/synth, 4 layers,
// 24 tokens) 11.5, 4.9, 9.5. A value past the
// range would become an infinity and poison whole output rows, so staging
// clamps to ±65504: such a value gives a large, finite, wrong result in its
// own outputs only, rather than NaNs downstream.

#define GEMM_HALF_LIMIT 65504.0f

inline half gemm_to_half(float v) { return half(clamp(v, -GEMM_HALF_LIMIT, GEMM_HALF_LIMIT)); }

// GemmDeq8<F>::load: eight consecutive elements of a weight row, dequantized
// into registers (the half tiles cannot take F::load8, which writes f32).
template <typename F>
struct GemmDeq8 {
    static void load(WeightRef w, uint row, uint j, thread float* v) {
        for (uint e = 0; e < 8; e++) {
            v[e] = F::at(w, row, j + e);
        }
    }
};

// Affine codes: whole words, one scale/bias pair per word (j is a multiple
// of 8 and a group never splits a word).
template <uint B>
struct GemmDeq8<FmtAffine<B>> {
    static void load(WeightRef w, uint row, uint j, thread float* v) {
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
                v[e0 + e] = scale * float((word >> (B * e)) & mask) + bias;
            }
        }
    }
};

// Stage W rows [n0, n0+BN) × columns [k0, k0+BK) as half, dequantized, zero
// past the edges (nmax rows, w.in columns).
template <typename F, uint BN, uint BK>
inline void gemmh_load_w(threadgroup half* ws, WeightRef w, uint n0, uint nmax, uint k0, uint tid) {
    for (uint i = tid; i < BN * BK / 8; i += GEMM_THREADS) {
        uint r = i / (BK / 8);
        uint c = (i % (BK / 8)) * 8;
        uint n = n0 + r;
        uint k = k0 + c;
        float v[8];
        if (n < nmax && k + 8 <= w.in) {
            GemmDeq8<F>::load(w, n, k, v);
        } else {
            for (uint e = 0; e < 8; e++) {
                v[e] = (n < nmax && k + e < w.in) ? F::at(w, n, k + e) : 0.0f;
            }
        }
        threadgroup half* dst = ws + r * BK + c;
        for (uint e = 0; e < 8; e++) {
            dst[e] = gemm_to_half(v[e]);
        }
    }
}

// An activation x is staged as two halves, hi = half(x) and lo =
// half(x − hi), multiplied separately into the same f32 accumulators:
// hi + lo carries 22 significant bits, so the activations lose nothing that
// matters (see the range note above), while the weights, which round
// exactly to half from bf16 and f16 and from MLX's codes, take one half
// each. A single rounded half per activation (2⁻¹¹) proved too coarse: on
// the random-weight test checkpoints it flips near-tied expert choices.
inline void gemm_split(float v, threadgroup half* hi, threadgroup half* lo) {
    float c = clamp(v, -GEMM_HALF_LIMIT, GEMM_HALF_LIMIT);
    half h = half(c);
    *hi = h;
    *lo = half(c - float(h));
}

// Stage X rows [m0, m0+BM) (rows past mmax are zero) × columns [k0, k0+BK)
// as hi and lo halves.
template <uint BM, uint BK>
inline void gemmh_load_x(threadgroup half* xs, threadgroup half* xl, const device float* x, uint x_stride,
                         uint m0, uint mmax, uint in, uint k0, uint tid) {
    for (uint i = tid; i < BM * BK; i += GEMM_THREADS) {
        uint m = m0 + i / BK;
        uint k = k0 + i % BK;
        gemm_split((m < mmax && k < in) ? x[ulong(m) * x_stride + k] : 0.0f, xs + i, xl + i);
    }
}

// Stage the x rows named by rows[0..valid) (rows past valid are zero) ×
// columns [k0, k0+BK) as hi and lo halves: the gather of the expert tiles.
template <uint BM, uint BK>
inline void gemmh_load_x_rows(threadgroup half* xs, threadgroup half* xl, const device float* x, uint x_stride,
                              const device uint* rows, uint valid, uint in, uint k0, uint tid) {
    for (uint i = tid; i < BM * BK; i += GEMM_THREADS) {
        uint r = i / BK;
        uint k = k0 + i % BK;
        gemm_split((r < valid && k < in) ? x[ulong(rows[r]) * x_stride + k] : 0.0f, xs + i, xl + i);
    }
}

// The accumulators of one SIMD group: the four SIMD groups split a BM×BN
// tile 2×2, each taking (BM/2)×(BN/2) as RB×CB blocks of 8×8.
template <uint RB, uint CB>
struct GemmAcc {
    simdgroup_float8x8 c[RB][CB];
};

template <uint RB, uint CB>
inline void gemmh_zero(thread GemmAcc<RB, CB>& acc) {
    for (uint i = 0; i < RB; i++) {
        for (uint j = 0; j < CB; j++) {
            acc.c[i][j] = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
        }
    }
}

// acc += (xs + xl)·wsᵀ for this SIMD group's part of the tile (xs, xl:
// BM×BK, ws: BN×BK, all row-major). Row blocks at or past rows are padding and are
// skipped a whole SIMD group at a time, so control stays uniform.
template <uint RB, uint CB, uint BK>
inline void gemmh_mma(const threadgroup half* xs, const threadgroup half* xl, const threadgroup half* ws,
                      uint sg, uint rows, thread GemmAcc<RB, CB>& acc) {
    uint sm = (sg / 2) * (8 * RB);
    uint sn = (sg % 2) * (8 * CB);
    if (sm >= rows) {
        return;
    }
    for (uint kk = 0; kk < BK; kk += 8) {
        simdgroup_half8x8 b[CB];
        for (uint j = 0; j < CB; j++) {
            // B = Wᵀ: element (k, n) is ws[n·BK + k], a transposed load.
            simdgroup_load(b[j], ws + (sn + 8 * j) * BK + kk, BK, ulong2(0, 0), true);
        }
        for (uint i = 0; i < RB; i++) {
            if (sm + 8 * i < rows) {
                simdgroup_half8x8 a;
                simdgroup_half8x8 al;
                simdgroup_load(a, xs + (sm + 8 * i) * BK + kk, BK);
                simdgroup_load(al, xl + (sm + 8 * i) * BK + kk, BK);
                for (uint j = 0; j < CB; j++) {
                    // The small part first: it is added to the running sum
                    // before the large one, as in compensated summation.
                    simdgroup_multiply_accumulate(acc.c[i][j], al, b[j], acc.c[i][j]);
                    simdgroup_multiply_accumulate(acc.c[i][j], a, b[j], acc.c[i][j]);
                }
            }
        }
    }
}

// Write the SIMD group's accumulators into the BM×BN f32 tile cs.
template <uint RB, uint CB, uint BN>
inline void gemmh_store(threadgroup float* cs, uint sg, thread GemmAcc<RB, CB>& acc) {
    uint sm = (sg / 2) * (8 * RB);
    uint sn = (sg % 2) * (8 * CB);
    for (uint i = 0; i < RB; i++) {
        for (uint j = 0; j < CB; j++) {
            simdgroup_store(acc.c[i][j], cs + (sm + 8 * i) * BN + sn + 8 * j, BN);
        }
    }
}
