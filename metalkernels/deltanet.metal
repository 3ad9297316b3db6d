// deltanet.metal: the Gated DeltaNet recurrence, f32 state.
//
// deltanet_scan_f32 runs the pass's tokens in order (a prefill chunk, or the
// single token of a decode step). Each SIMD group owns one value column of
// one value head: its lanes hold that column's state rows in registers
// (row dk = lane + 32·i), so every inner product over dk — Sᵀk, Sᵀq and the
// L2 norms of q and k — is one simd_sum, and the state is read from and
// written to memory once per pass, not once per token. No threadgroup memory
// and no barriers. The gates are recomputed per token by every lane; that is
// a few exps, cheaper than a separate pass over memory.
//
// Per token and value head j (key head kh = j / (Hv/Hk)):
//   q, k L2-normalised (x·rsqrt(Σx²+1e-6)), q /= sqrt(Dk)
//   beta = sigmoid(b), decay = exp(−exp(A_log)·softplus(a + dt_bias))
//   S = decay·S;  S += k ⊗ beta·(v − Sᵀk);  o = Sᵀq
//
// Layouts: conv [T, 2·Hk·Dk + Hv·Dv] (q ‖ k ‖ v after the conv and SiLU);
// a, b [T, Hv]; state [Hv, Dv, Dk] (a column's rows contiguous, so a SIMD
// group's loads coalesce); o [T, Hv·Dv].
// Grid: (ceil(Dv / DN_SIMDGROUPS), Hv); threads 32·DN_SIMDGROUPS.
#include "common.h"

#define DN_SIMDGROUPS 4
#define DN_MAX_PER_LANE 8 // Dk ≤ 256

struct DeltaNetParams {
    uint rows;       // tokens in the pass
    uint key_heads;  // Hk
    uint value_heads;// Hv
    uint key_dim;    // Dk
    uint value_dim;  // Dv
};

kernel void deltanet_scan_f32(constant DeltaNetParams& p [[buffer(0)]],
                              const device float* conv [[buffer(1)]],
                              const device float* a [[buffer(2)]],
                              const device float* b [[buffer(3)]],
                              const device float* a_log [[buffer(4)]],
                              const device float* dt_bias [[buffer(5)]],
                              device float* state [[buffer(6)]],
                              device float* o [[buffer(7)]],
                              uint2 tg [[threadgroup_position_in_grid]],
                              uint sg [[simdgroup_index_in_threadgroup]],
                              uint lane [[thread_index_in_simdgroup]]) {
    uint col = tg.x * DN_SIMDGROUPS + sg;
    uint j = tg.y;
    if (col >= p.value_dim) {
        return;
    }
    uint dk = p.key_dim;
    uint kh = j / (p.value_heads / p.key_heads);
    ulong width = 2ul * p.key_heads * dk + ulong(p.value_heads) * p.value_dim;
    device float* s_col = state + (ulong(j) * p.value_dim + col) * dk;

    float s[DN_MAX_PER_LANE];
    for (uint i = 0; i < DN_MAX_PER_LANE; i++) {
        uint r = lane + 32 * i;
        s[i] = r < dk ? s_col[r] : 0.0f;
    }
    float neg_a = -exp(a_log[j]);
    float q_scale = rsqrt(float(dk));
    for (uint t = 0; t < p.rows; t++) {
        const device float* row = conv + ulong(t) * width;
        const device float* qh = row + ulong(kh) * dk;
        const device float* kh_ = row + ulong(p.key_heads) * dk + ulong(kh) * dk;
        float qv[DN_MAX_PER_LANE];
        float kv[DN_MAX_PER_LANE];
        float qq = 0.0f;
        float kk = 0.0f;
        for (uint i = 0; i < DN_MAX_PER_LANE; i++) {
            uint r = lane + 32 * i;
            qv[i] = r < dk ? qh[r] : 0.0f;
            kv[i] = r < dk ? kh_[r] : 0.0f;
            qq += qv[i] * qv[i];
            kk += kv[i] * kv[i];
        }
        float qn = rsqrt(simd_sum(qq) + 1e-6f) * q_scale;
        float kn = rsqrt(simd_sum(kk) + 1e-6f);
        float v = row[2ul * p.key_heads * dk + ulong(j) * p.value_dim + col];
        float beta = sigmoid(b[ulong(t) * p.value_heads + j]);
        float decay = exp(neg_a * softplus(a[ulong(t) * p.value_heads + j] + dt_bias[j]));

        float sk = 0.0f;
        for (uint i = 0; i < DN_MAX_PER_LANE; i++) {
            kv[i] *= kn;
            s[i] *= decay;
            sk += s[i] * kv[i];
        }
        float delta = beta * (v - simd_sum(sk));
        float sq = 0.0f;
        for (uint i = 0; i < DN_MAX_PER_LANE; i++) {
            s[i] += kv[i] * delta;
            sq += s[i] * qv[i];
        }
        float out = simd_sum(sq) * qn;
        if (lane == 0) {
            o[ulong(t) * p.value_heads * p.value_dim + ulong(j) * p.value_dim + col] = out;
        }
    }
    for (uint i = 0; i < DN_MAX_PER_LANE; i++) {
        uint r = lane + 32 * i;
        if (r < dk) {
            s_col[r] = s[i];
        }
    }
}
