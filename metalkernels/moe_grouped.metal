// moe_grouped.metal: the mixture of experts for prefill chunks, routed on
// the GPU with no readback.
//
//   moe_plan_u32             histogram of expert ids (threadgroup atomics),
//                            prefix scan into row offsets, scatter cursors
//                            and the block map of the grouped GEMMs
//   moe_scatter_rows_u32     each (token, slot) takes the next row of its
//                            expert (device atomics); the row remembers
//                            its token
//   moe_gemm_gate_up_<w>_f32 per block-map tile: h = silu(X·gateᵀ)⊙(X·upᵀ)
//   moe_gemm_down_<w>_f32    per tile: Y = H·downᵀ
//   moe_gemm_{gate_up,down}_half_<w>_f32
//                            the same with half operands (gemm_tile.h),
//                            64-wide K steps: the default
//   moe_combine_f32          y[t] = Σ_slot weight·Y[row of (t, slot)], in
//                            slot order
//
// The shared expert is expert number E (the router kernel appends it to
// every token), so it rides the same tiles. The block map is sized to a bound
// known when the pass is recorded — ceil(n/BM) + min(E+1, n) tiles for n
// routed rows, since each expert's last tile may be partial — and entries
// past the used ones say "no tile", so the grid never depends on routing.
// Rows land in an order set by atomics, but every row's result is computed
// the same way wherever it lands, and moe_combine sums in slot order, so the
// output bits do not depend on that order.
#include "gemm_tile.h"

#define MOE_PLAN_THREADS 256
#define MOE_PLAN_MAX 513 // experts + the shared one
#define MOE_NO_TILE 0xffffffffu

struct PlanParams {
    uint assignments; // n = T·slots
    uint groups;      // E+1
    uint bound;       // block map entries
};

// Grid: one threadgroup of MOE_PLAN_THREADS. offsets: [groups+1]; cursor:
// [groups]; tiles: [bound] of (expert, first row, rows, 0).
kernel void moe_plan_u32(constant PlanParams& p [[buffer(0)]],
                         const device int* ids [[buffer(1)]],
                         device uint* offsets [[buffer(2)]],
                         device atomic_uint* cursor [[buffer(3)]],
                         device uint4* tiles [[buffer(4)]],
                         uint tid [[thread_index_in_threadgroup]]) {
    threadgroup atomic_uint hist[MOE_PLAN_MAX];
    threadgroup uint row_start[MOE_PLAN_MAX + 1];
    threadgroup uint tile_start[MOE_PLAN_MAX + 1];
    for (uint e = tid; e < p.groups; e += MOE_PLAN_THREADS) {
        atomic_store_explicit(&hist[e], 0u, memory_order_relaxed);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < p.assignments; i += MOE_PLAN_THREADS) {
        atomic_fetch_add_explicit(&hist[uint(ids[i])], 1u, memory_order_relaxed);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (tid == 0) {
        // E+1 ≤ 513 entries: a serial scan costs less than the barriers a
        // parallel one would need.
        uint rows = 0;
        uint ntiles = 0;
        for (uint e = 0; e < p.groups; e++) {
            uint c = atomic_load_explicit(&hist[e], memory_order_relaxed);
            row_start[e] = rows;
            tile_start[e] = ntiles;
            rows += c;
            ntiles += (c + GEMM_BM - 1) / GEMM_BM;
        }
        row_start[p.groups] = rows;
        tile_start[p.groups] = ntiles;
        offsets[p.groups] = rows;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint e = tid; e < p.groups; e += MOE_PLAN_THREADS) {
        uint r0 = row_start[e];
        uint c = row_start[e + 1] - r0;
        offsets[e] = r0;
        atomic_store_explicit(&cursor[e], r0, memory_order_relaxed);
        for (uint j = 0; j * GEMM_BM < c; j++) {
            tiles[tile_start[e] + j] = uint4(e, r0 + j * GEMM_BM, min(uint(GEMM_BM), c - j * GEMM_BM), 0u);
        }
    }
    for (uint i = tile_start[p.groups] + tid; i < p.bound; i += MOE_PLAN_THREADS) {
        tiles[i] = uint4(MOE_NO_TILE, 0u, 0u, 0u);
    }
}

struct ScatterParams {
    uint assignments; // n = T·slots
    uint slots;       // k+1
};

// Grid: ceil(n/256) × 256 threads, one per assignment (token·slots + slot).
// row_of: [n], the row each assignment landed in; token_of: [n], the token
// whose activations each row multiplies (the grouped GEMM gathers them, so
// no copy of the activations in expert order is ever made).
kernel void moe_scatter_rows_u32(constant ScatterParams& p [[buffer(0)]],
                                 const device int* ids [[buffer(1)]],
                                 device atomic_uint* cursor [[buffer(2)]],
                                 device uint* row_of [[buffer(3)]],
                                 device uint* token_of [[buffer(4)]],
                                 uint i [[thread_position_in_grid]]) {
    if (i >= p.assignments) {
        return;
    }
    uint row = atomic_fetch_add_explicit(&cursor[uint(ids[i])], 1u, memory_order_relaxed);
    row_of[i] = row;
    token_of[row] = i / p.slots;
}

struct GroupedParams {
    uint hidden;       // H
    uint inter;        // routed expert width
    uint shared_inter; // shared expert width
    uint experts;      // E: the shared expert's id
    uint h_stride;     // floats per row of h
    uint group_size;
    uint shared_group_size;
    uint x_stride;     // floats between token rows of x
};

inline WeightRef grouped_ref(const device uchar* data, const device uchar* scales, const device uchar* biases,
                             const device ulong* table, const device uchar* sdata, const device uchar* sscales,
                             const device uchar* sbiases, uint e, uint experts, uint in, uint gs, uint sgs) {
    WeightRef w;
    if (e >= experts) {
        w.data = sdata;
        w.scales = (const device ushort*)sscales;
        w.biases = (const device ushort*)sbiases;
        w.group_size = sgs;
    } else {
        w.data = data + table[3 * e + 0];
        w.scales = (const device ushort*)(scales + table[3 * e + 1]);
        w.biases = (const device ushort*)(biases + table[3 * e + 2]);
        w.group_size = gs;
    }
    w.in = in;
    w.flags = 0; // element reads only
    return w;
}

// Grid: (ceil(max(I, shared)/BN), bound); GEMM_THREADS threads.
// x: [T, H] token activations, gathered through token_of [n]; h: [n, h_stride]
// in expert order.
template <typename F>
kernel void moe_gemm_gate_up(constant GroupedParams& p [[buffer(0)]],
                             const device uint4* tiles [[buffer(1)]],
                             const device float* x [[buffer(2)]],
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
                             const device uint* token_of [[buffer(18)]],
                             uint2 tg [[threadgroup_position_in_grid]],
                             uint tid [[thread_index_in_threadgroup]],
                             uint sg [[simdgroup_index_in_threadgroup]]) {
    threadgroup float xt[GEMM_BM * GEMM_BK];
    threadgroup float wg[GEMM_BN * GEMM_BK];
    threadgroup float wu[GEMM_BN * GEMM_BK];
    uint4 tile = tiles[tg.y];
    if (tile.x == MOE_NO_TILE) {
        return;
    }
    uint e = tile.x;
    uint width = e >= p.experts ? p.shared_inter : p.inter;
    uint n0 = tg.x * GEMM_BN;
    if (n0 >= width) {
        return;
    }
    WeightRef rg = grouped_ref(gate, gate_scales, gate_biases, gate_table, sgate, sgate_scales, sgate_biases,
                               e, p.experts, p.hidden, p.group_size, p.shared_group_size);
    WeightRef ru = grouped_ref(up, up_scales, up_biases, up_table, sup, sup_scales, sup_biases,
                               e, p.experts, p.hidden, p.group_size, p.shared_group_size);
    simdgroup_float8x8 g00 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_float8x8 g01 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_float8x8 g10 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_float8x8 g11 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_float8x8 u00 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_float8x8 u01 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_float8x8 u10 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_float8x8 u11 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    for (uint k0 = 0; k0 < p.hidden; k0 += GEMM_BK) {
        gemm_load_x_rows(xt, x, p.x_stride, token_of + tile.y, tile.z, p.hidden, k0, tid);
        gemm_load_w<F>(wg, rg, n0, width, k0, tid);
        gemm_load_w<F>(wu, ru, n0, width, k0, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        gemm_mma(xt, wg, sg, tile.z, g00, g01, g10, g11);
        gemm_mma(xt, wu, sg, tile.z, u00, u01, u10, u11);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    // The weight tiles are free now: they take the two results.
    gemm_store(wg, sg, g00, g01, g10, g11);
    gemm_store(wu, sg, u00, u01, u10, u11);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < GEMM_BM * GEMM_BN; i += GEMM_THREADS) {
        uint m = i / GEMM_BN;
        uint n = n0 + i % GEMM_BN;
        if (m < tile.z && n < width) {
            h[ulong(tile.y + m) * p.h_stride + n] = silu(wg[i]) * wu[i];
        }
    }
}

// Grid: (ceil(H/BN), bound); GEMM_THREADS threads. ye: [n, H].
template <typename F>
kernel void moe_gemm_down(constant GroupedParams& p [[buffer(0)]],
                          const device uint4* tiles [[buffer(1)]],
                          const device float* h [[buffer(2)]],
                          device float* ye [[buffer(3)]],
                          const device uchar* down [[buffer(4)]],
                          const device uchar* down_scales [[buffer(5)]],
                          const device uchar* down_biases [[buffer(6)]],
                          const device ulong* down_table [[buffer(7)]],
                          const device uchar* sdown [[buffer(8)]],
                          const device uchar* sdown_scales [[buffer(9)]],
                          const device uchar* sdown_biases [[buffer(10)]],
                          uint2 tg [[threadgroup_position_in_grid]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint sg [[simdgroup_index_in_threadgroup]]) {
    threadgroup float ht[GEMM_BM * GEMM_BK];
    threadgroup float wd[GEMM_BN * GEMM_BK];
    threadgroup float cs[GEMM_BM * GEMM_BN];
    uint4 tile = tiles[tg.y];
    if (tile.x == MOE_NO_TILE) {
        return;
    }
    uint e = tile.x;
    uint width = e >= p.experts ? p.shared_inter : p.inter;
    uint n0 = tg.x * GEMM_BN;
    WeightRef rd = grouped_ref(down, down_scales, down_biases, down_table, sdown, sdown_scales, sdown_biases,
                               e, p.experts, width, p.group_size, p.shared_group_size);
    const device float* h0 = h + ulong(tile.y) * p.h_stride;
    simdgroup_float8x8 c00 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_float8x8 c01 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_float8x8 c10 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    simdgroup_float8x8 c11 = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    for (uint k0 = 0; k0 < width; k0 += GEMM_BK) {
        gemm_load_x(ht, h0, p.h_stride, 0, tile.z, width, k0, tid);
        gemm_load_w<F>(wd, rd, n0, p.hidden, k0, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        gemm_mma(ht, wd, sg, tile.z, c00, c01, c10, c11);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    gemm_store(cs, sg, c00, c01, c10, c11);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < GEMM_BM * GEMM_BN; i += GEMM_THREADS) {
        uint m = i / GEMM_BN;
        uint n = n0 + i % GEMM_BN;
        if (m < tile.z && n < p.hidden) {
            ye[ulong(tile.y + m) * p.hidden + n] = cs[i];
        }
    }
}

struct CombineParams {
    uint hidden;
    uint slots;
};

// Grid: (ceil(H/256), T); 256 threads. y[t] = Σ_slot weight·ye[row_of[t, slot]].
kernel void moe_combine_f32(constant CombineParams& p [[buffer(0)]],
                            const device float* ye [[buffer(1)]],
                            const device uint* row_of [[buffer(2)]],
                            const device float* weights [[buffer(3)]],
                            device float* y [[buffer(4)]],
                            uint2 gid [[thread_position_in_grid]]) {
    uint j = gid.x;
    uint t = gid.y;
    if (j >= p.hidden) {
        return;
    }
    float acc = 0.0f;
    for (uint s = 0; s < p.slots; s++) {
        uint i = t * p.slots + s;
        acc += weights[i] * ye[ulong(row_of[i]) * p.hidden + j];
    }
    y[ulong(t) * p.hidden + j] = acc;
}

// The half-operand grouped GEMMs. Tiles keep the block map's BM = 32 rows
// and BN = 32 outputs; half operands leave room for a 64-wide K step, half
// the barriers of the f32 tiles: x (hi and lo), gate and up take 4 KiB
// each, the two f32 results 4 KiB each (24 KiB; the down projection 16).
#define MOEH_BK 64

// Grid: (ceil(max(I, shared)/BN), bound); GEMM_THREADS threads.
template <typename F>
kernel void moe_gemm_gate_up_h(constant GroupedParams& p [[buffer(0)]],
                               const device uint4* tiles [[buffer(1)]],
                               const device float* x [[buffer(2)]],
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
                               const device uint* token_of [[buffer(18)]],
                               uint2 tg [[threadgroup_position_in_grid]],
                               uint tid [[thread_index_in_threadgroup]],
                               uint sg [[simdgroup_index_in_threadgroup]]) {
    threadgroup half xt[GEMM_BM * MOEH_BK];
    threadgroup half xtl[GEMM_BM * MOEH_BK];
    threadgroup half wg[GEMM_BN * MOEH_BK];
    threadgroup half wu[GEMM_BN * MOEH_BK];
    threadgroup float gs[GEMM_BM * GEMM_BN];
    threadgroup float us[GEMM_BM * GEMM_BN];
    uint4 tile = tiles[tg.y];
    if (tile.x == MOE_NO_TILE) {
        return;
    }
    uint e = tile.x;
    uint width = e >= p.experts ? p.shared_inter : p.inter;
    uint n0 = tg.x * GEMM_BN;
    if (n0 >= width) {
        return;
    }
    WeightRef rg = grouped_ref(gate, gate_scales, gate_biases, gate_table, sgate, sgate_scales, sgate_biases,
                               e, p.experts, p.hidden, p.group_size, p.shared_group_size);
    WeightRef ru = grouped_ref(up, up_scales, up_biases, up_table, sup, sup_scales, sup_biases,
                               e, p.experts, p.hidden, p.group_size, p.shared_group_size);
    GemmAcc<GEMM_BM / 16, GEMM_BN / 16> ga;
    GemmAcc<GEMM_BM / 16, GEMM_BN / 16> ua;
    gemmh_zero(ga);
    gemmh_zero(ua);
    for (uint k0 = 0; k0 < p.hidden; k0 += MOEH_BK) {
        gemmh_load_x_rows<GEMM_BM, MOEH_BK>(xt, xtl, x, p.x_stride, token_of + tile.y, tile.z, p.hidden, k0, tid);
        gemmh_load_w<F, GEMM_BN, MOEH_BK>(wg, rg, n0, width, k0, tid);
        gemmh_load_w<F, GEMM_BN, MOEH_BK>(wu, ru, n0, width, k0, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        gemmh_mma<GEMM_BM / 16, GEMM_BN / 16, MOEH_BK>(xt, xtl, wg, sg, tile.z, ga);
        gemmh_mma<GEMM_BM / 16, GEMM_BN / 16, MOEH_BK>(xt, xtl, wu, sg, tile.z, ua);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    gemmh_store<GEMM_BM / 16, GEMM_BN / 16, GEMM_BN>(gs, sg, ga);
    gemmh_store<GEMM_BM / 16, GEMM_BN / 16, GEMM_BN>(us, sg, ua);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < GEMM_BM * GEMM_BN; i += GEMM_THREADS) {
        uint m = i / GEMM_BN;
        uint n = n0 + i % GEMM_BN;
        if (m < tile.z && n < width) {
            h[ulong(tile.y + m) * p.h_stride + n] = silu(gs[i]) * us[i];
        }
    }
}

// Grid: (ceil(H/BN), bound); GEMM_THREADS threads. ye: [n, H].
template <typename F>
kernel void moe_gemm_down_h(constant GroupedParams& p [[buffer(0)]],
                            const device uint4* tiles [[buffer(1)]],
                            const device float* h [[buffer(2)]],
                            device float* ye [[buffer(3)]],
                            const device uchar* down [[buffer(4)]],
                            const device uchar* down_scales [[buffer(5)]],
                            const device uchar* down_biases [[buffer(6)]],
                            const device ulong* down_table [[buffer(7)]],
                            const device uchar* sdown [[buffer(8)]],
                            const device uchar* sdown_scales [[buffer(9)]],
                            const device uchar* sdown_biases [[buffer(10)]],
                            uint2 tg [[threadgroup_position_in_grid]],
                            uint tid [[thread_index_in_threadgroup]],
                            uint sg [[simdgroup_index_in_threadgroup]]) {
    threadgroup half ht[GEMM_BM * MOEH_BK];
    threadgroup half htl[GEMM_BM * MOEH_BK];
    threadgroup half wd[GEMM_BN * MOEH_BK];
    threadgroup float cs[GEMM_BM * GEMM_BN];
    uint4 tile = tiles[tg.y];
    if (tile.x == MOE_NO_TILE) {
        return;
    }
    uint e = tile.x;
    uint width = e >= p.experts ? p.shared_inter : p.inter;
    uint n0 = tg.x * GEMM_BN;
    WeightRef rd = grouped_ref(down, down_scales, down_biases, down_table, sdown, sdown_scales, sdown_biases,
                               e, p.experts, width, p.group_size, p.shared_group_size);
    const device float* h0 = h + ulong(tile.y) * p.h_stride;
    GemmAcc<GEMM_BM / 16, GEMM_BN / 16> acc;
    gemmh_zero(acc);
    for (uint k0 = 0; k0 < width; k0 += MOEH_BK) {
        gemmh_load_x<GEMM_BM, MOEH_BK>(ht, htl, h0, p.h_stride, 0, tile.z, width, k0, tid);
        gemmh_load_w<F, GEMM_BN, MOEH_BK>(wd, rd, n0, p.hidden, k0, tid);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        gemmh_mma<GEMM_BM / 16, GEMM_BN / 16, MOEH_BK>(ht, htl, wd, sg, tile.z, acc);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    gemmh_store<GEMM_BM / 16, GEMM_BN / 16, GEMM_BN>(cs, sg, acc);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < GEMM_BM * GEMM_BN; i += GEMM_THREADS) {
        uint m = i / GEMM_BN;
        uint n = n0 + i % GEMM_BN;
        if (m < tile.z && n < p.hidden) {
            ye[ulong(tile.y + m) * p.hidden + n] = cs[i];
        }
    }
}

template [[host_name("moe_gemm_gate_up_f32_f32")]] [[kernel]] decltype(moe_gemm_gate_up<FmtF32>) moe_gemm_gate_up<FmtF32>;
template [[host_name("moe_gemm_gate_up_f16_f32")]] [[kernel]] decltype(moe_gemm_gate_up<FmtF16>) moe_gemm_gate_up<FmtF16>;
template [[host_name("moe_gemm_gate_up_bf16_f32")]] [[kernel]] decltype(moe_gemm_gate_up<FmtBF16>) moe_gemm_gate_up<FmtBF16>;
template [[host_name("moe_gemm_gate_up_q4_f32")]] [[kernel]] decltype(moe_gemm_gate_up<FmtQ4>) moe_gemm_gate_up<FmtQ4>;
template [[host_name("moe_gemm_gate_up_q8_f32")]] [[kernel]] decltype(moe_gemm_gate_up<FmtQ8>) moe_gemm_gate_up<FmtQ8>;
template [[host_name("moe_gemm_down_f32_f32")]] [[kernel]] decltype(moe_gemm_down<FmtF32>) moe_gemm_down<FmtF32>;
template [[host_name("moe_gemm_down_f16_f32")]] [[kernel]] decltype(moe_gemm_down<FmtF16>) moe_gemm_down<FmtF16>;
template [[host_name("moe_gemm_down_bf16_f32")]] [[kernel]] decltype(moe_gemm_down<FmtBF16>) moe_gemm_down<FmtBF16>;
template [[host_name("moe_gemm_down_q4_f32")]] [[kernel]] decltype(moe_gemm_down<FmtQ4>) moe_gemm_down<FmtQ4>;
template [[host_name("moe_gemm_down_q8_f32")]] [[kernel]] decltype(moe_gemm_down<FmtQ8>) moe_gemm_down<FmtQ8>;
template [[host_name("moe_gemm_gate_up_half_f32_f32")]] [[kernel]] decltype(moe_gemm_gate_up_h<FmtF32>) moe_gemm_gate_up_h<FmtF32>;
template [[host_name("moe_gemm_gate_up_half_f16_f32")]] [[kernel]] decltype(moe_gemm_gate_up_h<FmtF16>) moe_gemm_gate_up_h<FmtF16>;
template [[host_name("moe_gemm_gate_up_half_bf16_f32")]] [[kernel]] decltype(moe_gemm_gate_up_h<FmtBF16>) moe_gemm_gate_up_h<FmtBF16>;
template [[host_name("moe_gemm_gate_up_half_q4_f32")]] [[kernel]] decltype(moe_gemm_gate_up_h<FmtQ4>) moe_gemm_gate_up_h<FmtQ4>;
template [[host_name("moe_gemm_gate_up_half_q8_f32")]] [[kernel]] decltype(moe_gemm_gate_up_h<FmtQ8>) moe_gemm_gate_up_h<FmtQ8>;
template [[host_name("moe_gemm_down_half_f32_f32")]] [[kernel]] decltype(moe_gemm_down_h<FmtF32>) moe_gemm_down_h<FmtF32>;
template [[host_name("moe_gemm_down_half_f16_f32")]] [[kernel]] decltype(moe_gemm_down_h<FmtF16>) moe_gemm_down_h<FmtF16>;
template [[host_name("moe_gemm_down_half_bf16_f32")]] [[kernel]] decltype(moe_gemm_down_h<FmtBF16>) moe_gemm_down_h<FmtBF16>;
template [[host_name("moe_gemm_down_half_q4_f32")]] [[kernel]] decltype(moe_gemm_down_h<FmtQ4>) moe_gemm_down_h<FmtQ4>;
template [[host_name("moe_gemm_down_half_q8_f32")]] [[kernel]] decltype(moe_gemm_down_h<FmtQ8>) moe_gemm_down_h<FmtQ8>;
