// gemm_tile.h: the 32×32 output tile the prefill GEMMs share, on
// simdgroup matrices (8×8 f32 operands and accumulators: every Apple GPU
// since M1 has them, and f32 operands keep activations and dequantized
// weights exact to the bit they were computed with).
//
// A threadgroup of GEMM_THREADS (4 SIMD groups) computes C[BM, BN] =
// X[BM, K]·W[BN, K]ᵀ: per BK-wide step it stages X rows and the dequantized
// W rows in threadgroup memory (never in device memory), then each SIMD
// group multiplies its 16×16 quarter as 2×2 blocks of 8×8 matrices.
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
