// moe.metal: routing and the expert projections read by expert id.
//
//   moe_router_topk_f32        softmax over the router logits, top-k,
//                              renormalise; appends the shared expert as slot
//                              k with weight sigmoid(shared-gate logit)
//   moe_gate_up_grouped_<w>_f32  per (token, slot) of up to MOE_GROUP_TOKENS
//                              rows (decode steps, of one sequence or several):
//                              h = silu(gate_e·x) ⊙ up_e·x, the expert's rows
//                              found through an offset table
//   moe_down_grouped_<w>_f32   ye = down_e·h per (token, slot); both grouped by
//                              expert, so an expert chosen by several rows is
//                              read once for all of them; moe_combine_f32
//                              (moe_grouped.metal) then sums each row's slots
//
// The expert ids never leave the GPU: the gather kernels read them from the
// buffer the router wrote. The shared expert travels as one more slot (id =
// experts), so it costs no extra dispatches; its matrices come from their own
// buffers because a checkpoint may store them apart from the stacked experts.
//
// Offset tables hold, per expert, the byte offsets of its codes, scales and
// biases inside the bound buffers (three ulongs), so fused [E, out, in]
// tensors and per-expert tensors are read the same way.
#include "common.h"

#define MOE_MAX_PER_LANE 16 // experts ≤ 512
#define MOE_ROWS 4
#define MOE_SIMDGROUPS 2
#define MOE_GROUP_TOKENS 8

struct RouterParams {
    uint experts;       // E
    uint top_k;         // k
    uint logits_stride; // floats between token rows of the logits (≥ E+1)
};

// One SIMD group per token. logits[t, 0:E] are the router's, logits[t, E] the
// shared expert gate's. ids and weights: [T, k+1]. Ties go to the lower
// expert id, so the choice does not depend on lane timing.
kernel void moe_router_topk_f32(constant RouterParams& p [[buffer(0)]],
                                const device float* logits [[buffer(1)]],
                                device int* ids [[buffer(2)]],
                                device float* weights [[buffer(3)]],
                                uint t [[threadgroup_position_in_grid]],
                                uint lane [[thread_index_in_simdgroup]]) {
    const device float* lr = logits + ulong(t) * p.logits_stride;
    float v[MOE_MAX_PER_LANE];
    float m = NO_VALUE;
    for (uint i = 0; i < MOE_MAX_PER_LANE; i++) {
        uint e = lane + 32 * i;
        v[i] = e < p.experts ? lr[e] : NO_VALUE;
        m = max(m, v[i]);
    }
    m = simd_max(m);
    float sum = 0.0f;
    for (uint i = 0; i < MOE_MAX_PER_LANE; i++) {
        uint e = lane + 32 * i;
        v[i] = e < p.experts ? exp(v[i] - m) : -1.0f;
        sum += e < p.experts ? v[i] : 0.0f;
    }
    sum = simd_sum(sum);
    uint slots = p.top_k + 1;
    float chosen = 0.0f;
    float picked[MOE_MAX_PER_LANE]; // per slot, only lane 0's copy is used
    uint picked_id[MOE_MAX_PER_LANE];
    for (uint s = 0; s < p.top_k; s++) {
        float best = -1.0f;
        uint best_e = 0xffffffffu;
        for (uint i = 0; i < MOE_MAX_PER_LANE; i++) {
            uint e = lane + 32 * i;
            if (v[i] > best) {
                best = v[i];
                best_e = e;
            }
        }
        float top = simd_max(best);
        uint id = simd_min(best == top ? best_e : 0xffffffffu);
        for (uint i = 0; i < MOE_MAX_PER_LANE; i++) {
            if (lane + 32 * i == id) {
                v[i] = -1.0f;
            }
        }
        picked[s % MOE_MAX_PER_LANE] = top / sum;
        picked_id[s % MOE_MAX_PER_LANE] = id;
        chosen += top / sum;
    }
    if (lane == 0) {
        for (uint s = 0; s < p.top_k; s++) {
            ids[ulong(t) * slots + s] = int(picked_id[s]);
            weights[ulong(t) * slots + s] = picked[s] / chosen;
        }
        ids[ulong(t) * slots + p.top_k] = int(p.experts);
        weights[ulong(t) * slots + p.top_k] = sigmoid(lr[p.experts]);
    }
}

struct ExpertParams {
    uint hidden;        // H
    uint inter;         // I: routed expert width
    uint shared_inter;  // width of the shared expert
    uint experts;       // E: the id of the shared-expert slot
    uint slots;         // k+1
    uint h_stride;      // floats per (token, slot) row of h: max(I, shared)
    uint group_size;    // affine group size (routed experts)
    uint shared_group_size;
    uint flags;          // ROWS_ALIGNED_8 | X_ALIGNED_16 for the routed experts
    uint shared_flags;   // the same for the shared expert
    uint rows;           // token rows
};

inline WeightRef expert_ref(const device uchar* data, const device uchar* scales,
                            const device uchar* biases, const device ulong* table,
                            uint e, uint in, uint group_size, uint flags) {
    WeightRef w;
    w.data = data + table[3 * e + 0];
    w.scales = (const device ushort*)(scales + table[3 * e + 1]);
    w.biases = (const device ushort*)(biases + table[3 * e + 2]);
    w.in = in;
    w.group_size = group_size;
    w.flags = flags;
    return w;
}

inline WeightRef plain_ref(const device uchar* data, const device uchar* scales,
                           const device uchar* biases, uint in, uint group_size, uint flags) {
    WeightRef w;
    w.data = data;
    w.scales = (const device ushort*)scales;
    w.biases = (const device ushort*)biases;
    w.in = in;
    w.group_size = group_size;
    w.flags = flags;
    return w;
}

// The grouped kernels' plan, made by every SIMD group from the ids alone (at
// most MOE_GROUP_TOKENS·slots entries, so no separate plan dispatch): entry
// j = t·slots + slot leads its expert when no earlier entry chose the same
// one; the leader's threadgroups serve every row that chose it, and the
// others return at once. A row chooses an expert at most once (top-k picks
// distinct experts; the shared expert has its own id), so an expert serves
// at most MOE_GROUP_TOKENS rows.
inline bool moe_leads(const device int* ids, uint j) {
    int e = ids[j];
    for (uint i = 0; i < j; i++) {
        if (ids[i] == e) {
            return false;
        }
    }
    return true;
}

// moe_members lists the entries that chose ids[j], in entry order, and
// returns how many.
inline uint moe_members(const device int* ids, uint n, uint j, thread uint* members) {
    int e = ids[j];
    uint m = 0;
    for (uint i = j; i < n && m < MOE_GROUP_TOKENS; i++) {
        if (ids[i] == e) {
            members[m++] = i;
        }
    }
    return m;
}

// Grid: (ceil(max(I, shared) / (MOE_ROWS·MOE_SIMDGROUPS)), rows·slots);
// threads 32·MOE_SIMDGROUPS. x: [rows, H]; h: [rows·slots, h_stride]. Each
// row's sums are formed as for that row alone (dot_tokens), so a row's h
// does not depend on the rows that share its experts.
template <typename F>
kernel void moe_gate_up_grouped(constant ExpertParams& p [[buffer(0)]],
                                const device float* x [[buffer(1)]],
                                const device int* ids [[buffer(2)]],
                                device float* h [[buffer(3)]],
                                const device uchar* gate [[buffer(4)]],
                                const device uchar* gate_scales [[buffer(5)]],
                                const device uchar* gate_biases [[buffer(6)]],
                                const device ulong* gate_table [[buffer(7)]],
                                const device uchar* up [[buffer(8)]],
                                const device uchar* up_scales [[buffer(9)]],
                                const device uchar* up_biases [[buffer(10)]],
                                const device ulong* up_table [[buffer(11)]],
                                const device uchar* sgate [[buffer(12)]],
                                const device uchar* sgate_scales [[buffer(13)]],
                                const device uchar* sgate_biases [[buffer(14)]],
                                const device uchar* sup [[buffer(15)]],
                                const device uchar* sup_scales [[buffer(16)]],
                                const device uchar* sup_biases [[buffer(17)]],
                                uint2 tg [[threadgroup_position_in_grid]],
                                uint sg [[simdgroup_index_in_threadgroup]],
                                uint lane [[thread_index_in_simdgroup]]) {
    uint j = tg.y;
    uint n_entries = p.rows * p.slots;
    if (j >= n_entries || !moe_leads(ids, j)) {
        return;
    }
    uint e = uint(ids[j]);
    bool is_shared = e >= p.experts;
    uint rows = is_shared ? p.shared_inter : p.inter;
    uint row0 = (tg.x * MOE_SIMDGROUPS + sg) * MOE_ROWS;
    if (row0 >= rows) {
        return;
    }
    WeightRef wg = is_shared ? plain_ref(sgate, sgate_scales, sgate_biases, p.hidden, p.shared_group_size, p.shared_flags)
                          : expert_ref(gate, gate_scales, gate_biases, gate_table, e, p.hidden, p.group_size, p.flags);
    WeightRef wu = is_shared ? plain_ref(sup, sup_scales, sup_biases, p.hidden, p.shared_group_size, p.shared_flags)
                          : expert_ref(up, up_scales, up_biases, up_table, e, p.hidden, p.group_size, p.flags);
    uint members[MOE_GROUP_TOKENS];
    uint nt = moe_members(ids, n_entries, j, members);
    uint tok[MOE_GROUP_TOKENS];
    for (uint m = 0; m < MOE_GROUP_TOKENS; m++) {
        tok[m] = m < nt ? members[m] / p.slots : 0u;
    }
    uint n = min(uint(MOE_ROWS), rows - row0);
    float ga[MOE_GROUP_TOKENS * MOE_ROWS];
    float ua[MOE_GROUP_TOKENS * MOE_ROWS];
    F::template dot_tokens<MOE_ROWS, MOE_GROUP_TOKENS>(wg, row0, n, x, p.hidden, tok, nt, lane, ga);
    F::template dot_tokens<MOE_ROWS, MOE_GROUP_TOKENS>(wu, row0, n, x, p.hidden, tok, nt, lane, ua);
    for (uint m = 0; m < nt; m++) {
        device float* hm = h + ulong(members[m]) * p.h_stride;
        for (uint r = 0; r < n; r++) {
            float g = simd_sum(ga[m * MOE_ROWS + r]);
            float u = simd_sum(ua[m * MOE_ROWS + r]);
            if (lane == 0) {
                hm[row0 + r] = silu(g) * u;
            }
        }
    }
}

// Grid: (ceil(H / (MOE_ROWS·MOE_SIMDGROUPS)), rows·slots); threads
// 32·MOE_SIMDGROUPS. ye[t·slots + slot] = down_e·h[t·slots + slot], [rows·slots, H];
// moe_combine_f32 then weighs and sums each row's slots in slot order.
template <typename F>
kernel void moe_down_grouped(constant ExpertParams& p [[buffer(0)]],
                             const device float* h [[buffer(1)]],
                             const device int* ids [[buffer(2)]],
                             device float* ye [[buffer(3)]],
                             const device uchar* down [[buffer(4)]],
                             const device uchar* down_scales [[buffer(5)]],
                             const device uchar* down_biases [[buffer(6)]],
                             const device ulong* down_table [[buffer(7)]],
                             const device uchar* sdown [[buffer(8)]],
                             const device uchar* sdown_scales [[buffer(9)]],
                             const device uchar* sdown_biases [[buffer(10)]],
                             uint2 tg [[threadgroup_position_in_grid]],
                             uint sg [[simdgroup_index_in_threadgroup]],
                             uint lane [[thread_index_in_simdgroup]]) {
    uint j = tg.y;
    uint n_entries = p.rows * p.slots;
    uint row0 = (tg.x * MOE_SIMDGROUPS + sg) * MOE_ROWS;
    if (j >= n_entries || row0 >= p.hidden || !moe_leads(ids, j)) {
        return;
    }
    uint e = uint(ids[j]);
    bool is_shared = e >= p.experts;
    WeightRef wd = is_shared ? plain_ref(sdown, sdown_scales, sdown_biases, p.shared_inter, p.shared_group_size, p.shared_flags)
                          : expert_ref(down, down_scales, down_biases, down_table, e, p.inter, p.group_size, p.flags);
    uint members[MOE_GROUP_TOKENS];
    uint nt = moe_members(ids, n_entries, j, members);
    uint n = min(uint(MOE_ROWS), p.hidden - row0);
    float acc[MOE_GROUP_TOKENS * MOE_ROWS];
    F::template dot_tokens<MOE_ROWS, MOE_GROUP_TOKENS>(wd, row0, n, h, p.h_stride, members, nt, lane, acc);
    for (uint m = 0; m < nt; m++) {
        device float* ym = ye + ulong(members[m]) * p.hidden;
        for (uint r = 0; r < n; r++) {
            float s = simd_sum(acc[m * MOE_ROWS + r]);
            if (lane == 0) {
                ym[row0 + r] = s;
            }
        }
    }
}

template [[host_name("moe_gate_up_grouped_f32_f32")]] [[kernel]] decltype(moe_gate_up_grouped<FmtF32>) moe_gate_up_grouped<FmtF32>;
template [[host_name("moe_gate_up_grouped_f16_f32")]] [[kernel]] decltype(moe_gate_up_grouped<FmtF16>) moe_gate_up_grouped<FmtF16>;
template [[host_name("moe_gate_up_grouped_bf16_f32")]] [[kernel]] decltype(moe_gate_up_grouped<FmtBF16>) moe_gate_up_grouped<FmtBF16>;
template [[host_name("moe_gate_up_grouped_q4_f32")]] [[kernel]] decltype(moe_gate_up_grouped<FmtQ4>) moe_gate_up_grouped<FmtQ4>;
template [[host_name("moe_gate_up_grouped_q8_f32")]] [[kernel]] decltype(moe_gate_up_grouped<FmtQ8>) moe_gate_up_grouped<FmtQ8>;
template [[host_name("moe_down_grouped_f32_f32")]] [[kernel]] decltype(moe_down_grouped<FmtF32>) moe_down_grouped<FmtF32>;
template [[host_name("moe_down_grouped_f16_f32")]] [[kernel]] decltype(moe_down_grouped<FmtF16>) moe_down_grouped<FmtF16>;
template [[host_name("moe_down_grouped_bf16_f32")]] [[kernel]] decltype(moe_down_grouped<FmtBF16>) moe_down_grouped<FmtBF16>;
template [[host_name("moe_down_grouped_q4_f32")]] [[kernel]] decltype(moe_down_grouped<FmtQ4>) moe_down_grouped<FmtQ4>;
template [[host_name("moe_down_grouped_q8_f32")]] [[kernel]] decltype(moe_down_grouped<FmtQ8>) moe_down_grouped<FmtQ8>;
