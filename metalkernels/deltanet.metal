// deltanet.metal: the Gated DeltaNet recurrence, f32 state.
//
// deltanet_scan_f32 runs a prefill chunk's tokens in order; deltanet_step_f32
// is the same kernel fixed at the single token of a decode step, and
// deltanet_step_seqs_f32 the decode steps of up to DN_MAX_SEQS sequences in
// one dispatch, each on its own state (grid z: the sequence; row z of the
// inputs and outputs is its token). Each SIMD group owns DN_COLS value columns
// of one value head: its lanes hold those columns' state rows in registers
// (row dk = lane + 32·i), so every inner product over dk — the L2 norms of q
// and k, Sᵀk and Sᵀq for all DN_COLS columns at once — is one vector
// simd_sum, and the state is read from and written to memory once per pass,
// not once per token. No threadgroup memory and no barriers. The gates are
// recomputed per token by every lane; that is a few exps, cheaper than a
// separate pass over memory.
//
// Per token and value head j (key head kh = j / (Hv/Hk)):
//   q, k L2-normalised (x·rsqrt(Σx²+1e-6)), q /= sqrt(Dk)
//   beta = sigmoid(b), decay = exp(−exp(A_log)·softplus(a + dt_bias))
//   S = decay·S;  S += k ⊗ beta·(v − Sᵀk);  o = Sᵀq
//
// Layouts: conv [T, 2·Hk·Dk + Hv·Dv] (q ‖ k ‖ v after the conv and SiLU);
// a, b [T, Hv]; state [Hv, Dv, Dk] (a column's rows contiguous, so a SIMD
// group's loads coalesce); o [T, Hv·Dv].
// Grid: (ceil(Dv / (DN_COLS·DN_SIMDGROUPS)), Hv); threads 32·DN_SIMDGROUPS.
#include "common.h"

#define DN_SIMDGROUPS 2
#define DN_COLS 4
#define DN_MAX_PER_LANE 8 // Dk ≤ 256
#define DN_MAX_SEQS 8      // sequences of one deltanet_step_seqs dispatch

struct DeltaNetParams {
    uint rows;        // tokens in the pass
    uint key_heads;   // Hk
    uint value_heads; // Hv
    uint key_dim;     // Dk
    uint value_dim;   // Dv
};

// deltanet_heads runs rows tokens for the DN_COLS columns from col0 of value
// head j: every kernel below is this function, so a sequence's step computes
// the same whichever kernel serves it.
inline void deltanet_heads(constant DeltaNetParams& p, const device float* conv, const device float* a,
                           const device float* b, const device float* a_log, const device float* dt_bias,
                           device float* state, device float* o, uint rows, uint col0, uint j, uint lane) {
    uint dk = p.key_dim;
    uint kh = j / (p.value_heads / p.key_heads);
    ulong width = 2ul * p.key_heads * dk + ulong(p.value_heads) * p.value_dim;
    device float* s_head = state + ulong(j) * p.value_dim * dk;

    // s[i] holds rows lane + 32·i of the DN_COLS columns; columns past
    // value_dim stay zero and are never stored.
    float4 s[DN_MAX_PER_LANE];
    for (uint i = 0; i < DN_MAX_PER_LANE; i++) {
        uint r = lane + 32 * i;
        float4 v = float4(0.0f);
        for (uint c = 0; c < DN_COLS; c++) {
            if (r < dk && col0 + c < p.value_dim) {
                v[c] = s_head[ulong(col0 + c) * dk + r];
            }
        }
        s[i] = v;
    }
    float neg_a = -exp(a_log[j]);
    float q_scale = rsqrt(float(dk));
    for (uint t = 0; t < rows; t++) {
        const device float* row = conv + ulong(t) * width;
        const device float* qh = row + ulong(kh) * dk;
        const device float* kh_ = row + ulong(p.key_heads) * dk + ulong(kh) * dk;
        const device float* vh = row + 2ul * p.key_heads * dk + ulong(j) * p.value_dim;
        float qv[DN_MAX_PER_LANE];
        float kv[DN_MAX_PER_LANE];
        float2 norms = float2(0.0f);
        for (uint i = 0; i < DN_MAX_PER_LANE; i++) {
            uint r = lane + 32 * i;
            qv[i] = r < dk ? qh[r] : 0.0f;
            kv[i] = r < dk ? kh_[r] : 0.0f;
            norms += float2(qv[i] * qv[i], kv[i] * kv[i]);
        }
        norms = simd_sum(norms);
        float qn = rsqrt(norms.x + 1e-6f) * q_scale;
        float kn = rsqrt(norms.y + 1e-6f);
        float4 v = float4(0.0f);
        for (uint c = 0; c < DN_COLS; c++) {
            if (col0 + c < p.value_dim) {
                v[c] = vh[col0 + c];
            }
        }
        float beta = sigmoid(b[ulong(t) * p.value_heads + j]);
        float decay = exp(neg_a * softplus(a[ulong(t) * p.value_heads + j] + dt_bias[j]));

        float4 sk = float4(0.0f);
        for (uint i = 0; i < DN_MAX_PER_LANE; i++) {
            kv[i] *= kn;
            s[i] *= decay;
            sk += s[i] * kv[i];
        }
        float4 delta = beta * (v - simd_sum(sk));
        float4 sq = float4(0.0f);
        for (uint i = 0; i < DN_MAX_PER_LANE; i++) {
            s[i] += kv[i] * delta;
            sq += s[i] * qv[i];
        }
        float4 out = simd_sum(sq) * qn;
        if (lane == 0) {
            device float* orow = o + ulong(t) * p.value_heads * p.value_dim + ulong(j) * p.value_dim;
            for (uint c = 0; c < DN_COLS; c++) {
                if (col0 + c < p.value_dim) {
                    orow[col0 + c] = out[c];
                }
            }
        }
    }
    for (uint i = 0; i < DN_MAX_PER_LANE; i++) {
        uint r = lane + 32 * i;
        for (uint c = 0; c < DN_COLS; c++) {
            if (r < dk && col0 + c < p.value_dim) {
                s_head[ulong(col0 + c) * dk + r] = s[i][c];
            }
        }
    }
}

// Rows is the number of tokens when fixed at compile time (1: the decode
// step, whose token loop the compiler unrolls away), or 0 to take p.rows.
template <uint Rows>
kernel void deltanet(constant DeltaNetParams& p [[buffer(0)]],
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
    uint col0 = (tg.x * DN_SIMDGROUPS + sg) * DN_COLS;
    if (col0 >= p.value_dim) {
        return;
    }
    deltanet_heads(p, conv, a, b, a_log, dt_bias, state, o, Rows != 0 ? Rows : p.rows, col0, tg.y, lane);
}

// One decode step of p.rows ≤ DN_MAX_SEQS sequences: sequence z's token is
// row z of conv, a, b and o, and its state is state_z. Metal binds buffers
// one per index, so the states come as DN_MAX_SEQS arguments (the unused
// ones bound to any of them) rather than as a table of addresses, which
// would need every state made resident by hand.
kernel void deltanet_step_seqs_f32(constant DeltaNetParams& p [[buffer(0)]],
                                   const device float* conv [[buffer(1)]],
                                   const device float* a [[buffer(2)]],
                                   const device float* b [[buffer(3)]],
                                   const device float* a_log [[buffer(4)]],
                                   const device float* dt_bias [[buffer(5)]],
                                   device float* o [[buffer(6)]],
                                   device float* state0 [[buffer(7)]],
                                   device float* state1 [[buffer(8)]],
                                   device float* state2 [[buffer(9)]],
                                   device float* state3 [[buffer(10)]],
                                   device float* state4 [[buffer(11)]],
                                   device float* state5 [[buffer(12)]],
                                   device float* state6 [[buffer(13)]],
                                   device float* state7 [[buffer(14)]],
                                   uint3 tg [[threadgroup_position_in_grid]],
                                   uint sg [[simdgroup_index_in_threadgroup]],
                                   uint lane [[thread_index_in_simdgroup]]) {
    uint col0 = (tg.x * DN_SIMDGROUPS + sg) * DN_COLS;
    uint z = tg.z;
    if (col0 >= p.value_dim || z >= p.rows) {
        return;
    }
    device float* state = pick_seq(z, state0, state1, state2, state3, state4, state5, state6, state7);
    ulong width = 2ul * p.key_heads * p.key_dim + ulong(p.value_heads) * p.value_dim;
    deltanet_heads(p, conv + z * width, a + ulong(z) * p.value_heads, b + ulong(z) * p.value_heads, a_log, dt_bias,
                   state, o + ulong(z) * p.value_heads * p.value_dim, 1, col0, tg.y, lane);
}

template [[host_name("deltanet_scan_f32")]] [[kernel]] decltype(deltanet<0>) deltanet<0>;
template [[host_name("deltanet_step_f32")]] [[kernel]] decltype(deltanet<1>) deltanet<1>;
