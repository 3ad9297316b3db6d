// attention.metal: the gated full-attention mixer between its projections.
//
//   attn_q_norm_rope_f32   q = RoPE(RMSNorm(query part of Wq·x)) per head
//   attn_kv_write_<kv>     k = RoPE(RMSNorm(Wk·x)), v → the KV cache (bf16 or f32)
//   attn_split_<kv>_f32    one (query, kv head, key chunk): online softmax of
//                          each of the kv head's query heads over the chunk,
//                          partial outputs with their max and sum
//   attn_reduce_gate_f32   merges the chunks, applies sigmoid(gate)
//   attn_prefill_<kv>_f32  a prefill chunk's causal attention in one pass,
//                          key tiles in threadgroup memory shared by a block
//                          of queries
//   attn_q_norm_rope_seqs_f32, attn_kv_write_seqs_<kv>, attn_split_seqs_<kv>_f32
//                          the decode steps of up to ATTN_MAX_SEQS sequences
//                          in one dispatch: row z is sequence z's token, at
//                          its own position (seq_info[2z]) in its own cache
//                          (k_cache_z, v_cache_z, seq_info[2z+1] rows per kv
//                          head); attn_reduce_gate_f32 then serves them all,
//                          chunks past a row's keys being empty
//
// Splitting over the key length keeps every GPU core busy when a single
// decode query faces a long context; the same pair also serves passes of a
// few rows (grid z = query rows, each attending causally to its own
// prefix). Both attention kernels stage key and value rows in threadgroup
// tiles read by several SIMD groups (the query heads of a kv head, or a
// block of queries), one SIMD group per query: lanes split the head
// dimension, so a lane holds at most ATTN_MAX_DIM/32 elements of q and of
// the running output, and four dot products are one simd_sum.
//
// Layouts: qg [T, q_heads, 2·head_dim] (query ‖ gate per head, as Wq writes
// it); k, v [T, kv_heads·head_dim]; cache [kv_heads, max_seq, head_dim];
// q [T, q_heads, head_dim]; partials [T, q_heads, splits, head_dim] with
// max and sum [T, q_heads, splits]; o [T, q_heads·head_dim].
#include "common.h"

#define ATTN_MAX_DIM 512
#define ATTN_PER_LANE (ATTN_MAX_DIM / 32)
#define PREFILL_QUERIES 8
#define PREFILL_TILE 2048 // floats per K (and per V) tile: 16 KiB in all
#define ATTN_MAX_SEQS 8

struct AttnParams {
    uint head_dim;
    uint rotary_dim; // leading dims that RoPE rotates (NeoX pairing i, i+rotary_dim/2)
    uint q_heads;
    uint kv_heads;
    uint pos0;      // position of the pass's first token
    uint max_seq;   // cache capacity in tokens
    uint split_len; // keys per chunk
    uint splits;    // chunks in the grid
    float eps;      // RMSNorm epsilon
    float scale;    // 1/sqrt(head_dim)
    uint rows;      // query rows in the pass
};

// Normalise one head vector src with weight w, rotate its leading rotary_dim
// dims by angle pos·inv_freq[i], and hand each finished element to put.
// Every lane reads the raw inputs of both elements of its rotation pairs, so
// no lane needs another lane's result.
template <typename Put>
inline void norm_rope_head(const device float* src, const device float* w,
                           const device float* inv_freq, constant AttnParams& p,
                           uint pos, uint lane, Put put) {
    float ss = 0.0f;
    for (uint j = lane; j < p.head_dim; j += 32) {
        ss += src[j] * src[j];
    }
    float inv = rsqrt(simd_sum(ss) / float(p.head_dim) + p.eps);
    uint half_rot = p.rotary_dim / 2;
    for (uint i = lane; i < half_rot; i += 32) {
        float x1 = src[i] * inv * w[i];
        float x2 = src[i + half_rot] * inv * w[i + half_rot];
        float angle = float(pos) * inv_freq[i];
        float c = precise::cos(angle);
        float s = precise::sin(angle);
        put(i, x1 * c - x2 * s);
        put(i + half_rot, x2 * c + x1 * s);
    }
    for (uint j = p.rotary_dim + lane; j < p.head_dim; j += 32) {
        put(j, src[j] * inv * w[j]);
    }
}

struct PutF32 {
    device float* dst;
    void operator()(uint j, float v) const { dst[j] = v; }
};

// The KV cache element: bf16 halves the cache (20 KiB per token on the
// real model); f32 keeps keys and values exact, for checking against
// references and for users who would rather spend the memory.
struct CacheBF16 {
    typedef ushort T;
    static float load(ushort v) { return bf16_to_float(v); }
    static ushort store(float v) { return float_to_bf16(v); }
};

struct CacheF32 {
    typedef float T;
    static float load(float v) { return v; }
    static float store(float v) { return v; }
};

template <typename C>
struct PutCache {
    device typename C::T* dst;
    void operator()(uint j, float v) const { dst[j] = C::store(v); }
};

// Grid: (q_heads, T), 32 threads.
kernel void attn_q_norm_rope_f32(constant AttnParams& p [[buffer(0)]],
                                 const device float* qg [[buffer(1)]],
                                 const device float* q_norm [[buffer(2)]],
                                 const device float* inv_freq [[buffer(3)]],
                                 device float* q [[buffer(4)]],
                                 uint2 tg [[threadgroup_position_in_grid]],
                                 uint lane [[thread_index_in_simdgroup]]) {
    uint h = tg.x;
    uint t = tg.y;
    const device float* src = qg + (ulong(t) * p.q_heads + h) * 2 * p.head_dim;
    PutF32 put;
    put.dst = q + (ulong(t) * p.q_heads + h) * p.head_dim;
    norm_rope_head(src, q_norm, inv_freq, p, p.pos0 + t, lane, put);
}

// Grid: (q_heads, sequences), 32 threads; row t at position seq_info[2t].
kernel void attn_q_norm_rope_seqs_f32(constant AttnParams& p [[buffer(0)]],
                                      const device float* qg [[buffer(1)]],
                                      const device float* q_norm [[buffer(2)]],
                                      const device float* inv_freq [[buffer(3)]],
                                      device float* q [[buffer(4)]],
                                      const device uint* seq_info [[buffer(5)]],
                                      uint2 tg [[threadgroup_position_in_grid]],
                                      uint lane [[thread_index_in_simdgroup]]) {
    uint h = tg.x;
    uint t = tg.y;
    const device float* src = qg + (ulong(t) * p.q_heads + h) * 2 * p.head_dim;
    PutF32 put;
    put.dst = q + (ulong(t) * p.q_heads + h) * p.head_dim;
    norm_rope_head(src, q_norm, inv_freq, p, seq_info[2 * t], lane, put);
}

// kv_write_head normalises and rotates row t's key of kv head h, and writes
// it and the value at position pos of a cache of max_seq rows per head.
template <typename C>
inline void kv_write_head(constant AttnParams& p, const device float* k, const device float* v,
                          const device float* k_norm, const device float* inv_freq, device typename C::T* k_cache,
                          device typename C::T* v_cache, uint t, uint h, uint pos, uint max_seq, uint lane) {
    ulong src = (ulong(t) * p.kv_heads + h) * p.head_dim;
    ulong dst = (ulong(h) * max_seq + pos) * p.head_dim;
    PutCache<C> put;
    put.dst = k_cache + dst;
    norm_rope_head(k + src, k_norm, inv_freq, p, pos, lane, put);
    for (uint j = lane; j < p.head_dim; j += 32) {
        v_cache[dst + j] = C::store(v[src + j]);
    }
}

// Grid: (kv_heads, T), 32 threads. The cache keeps keys after norm and RoPE.
template <typename C>
kernel void attn_kv_write(constant AttnParams& p [[buffer(0)]],
                          const device float* k [[buffer(1)]],
                          const device float* v [[buffer(2)]],
                          const device float* k_norm [[buffer(3)]],
                          const device float* inv_freq [[buffer(4)]],
                          device typename C::T* k_cache [[buffer(5)]],
                          device typename C::T* v_cache [[buffer(6)]],
                          uint2 tg [[threadgroup_position_in_grid]],
                          uint lane [[thread_index_in_simdgroup]]) {
    kv_write_head<C>(p, k, v, k_norm, inv_freq, k_cache, v_cache, tg.y, tg.x, p.pos0 + tg.y, p.max_seq, lane);
}

// Grid: (kv_heads, sequences), 32 threads; row t goes to sequence t's cache.
template <typename C>
kernel void attn_kv_write_seqs(constant AttnParams& p [[buffer(0)]],
                               const device float* k [[buffer(1)]],
                               const device float* v [[buffer(2)]],
                               const device float* k_norm [[buffer(3)]],
                               const device float* inv_freq [[buffer(4)]],
                               const device uint* seq_info [[buffer(5)]],
                               device typename C::T* k0 [[buffer(6)]],
                               device typename C::T* k1 [[buffer(7)]],
                               device typename C::T* k2 [[buffer(8)]],
                               device typename C::T* k3 [[buffer(9)]],
                               device typename C::T* k4 [[buffer(10)]],
                               device typename C::T* k5 [[buffer(11)]],
                               device typename C::T* k6 [[buffer(12)]],
                               device typename C::T* k7 [[buffer(13)]],
                               device typename C::T* v0 [[buffer(14)]],
                               device typename C::T* v1 [[buffer(15)]],
                               device typename C::T* v2 [[buffer(16)]],
                               device typename C::T* v3 [[buffer(17)]],
                               device typename C::T* v4 [[buffer(18)]],
                               device typename C::T* v5 [[buffer(19)]],
                               device typename C::T* v6 [[buffer(20)]],
                               device typename C::T* v7 [[buffer(21)]],
                               uint2 tg [[threadgroup_position_in_grid]],
                               uint lane [[thread_index_in_simdgroup]]) {
    uint t = tg.y;
    kv_write_head<C>(p, k, v, k_norm, inv_freq, pick_seq(t, k0, k1, k2, k3, k4, k5, k6, k7),
                     pick_seq(t, v0, v1, v2, v3, v4, v5, v6, v7), t, tg.x, seq_info[2 * t], seq_info[2 * t + 1], lane);
}

template [[host_name("attn_kv_write_seqs_bf16")]] [[kernel]] decltype(attn_kv_write_seqs<CacheBF16>) attn_kv_write_seqs<CacheBF16>;
template [[host_name("attn_kv_write_seqs_f32")]] [[kernel]] decltype(attn_kv_write_seqs<CacheF32>) attn_kv_write_seqs<CacheF32>;
template [[host_name("attn_kv_write_bf16")]] [[kernel]] decltype(attn_kv_write<CacheBF16>) attn_kv_write<CacheBF16>;
template [[host_name("attn_kv_write_f32")]] [[kernel]] decltype(attn_kv_write<CacheF32>) attn_kv_write<CacheF32>;

// load_tile stages cache rows [k0, k0+count) of one kv head as f32 in
// threadgroup memory, all threads of the group taking part.
template <typename C>
inline void load_tile(threadgroup float* k_tile, threadgroup float* v_tile, const device typename C::T* kb,
                      const device typename C::T* vb, uint k0, uint count, uint n, uint tid, uint nthreads) {
    for (uint i = tid; i < count * n; i += nthreads) {
        k_tile[i] = C::load(kb[ulong(k0) * n + i]);
        v_tile[i] = C::load(vb[ulong(k0) * n + i]);
    }
}

// attend runs one query's online softmax over the staged keys [k0, k1)
// (the tile starts at key tile0): running max m, sum l and output acc in
// registers, lanes splitting the head dimension. Four keys per step: their
// partial dot products reduce in one vector simd_sum, and the state is
// rescaled once per step.
inline void attend(const threadgroup float* k_tile, const threadgroup float* v_tile, uint tile0, uint k0, uint k1,
                   uint n, uint lane, thread float* qr, thread float* acc, thread float& m, thread float& l) {
    for (uint key = k0; key < k1; key += 4) {
        float4 s4 = float4(0.0f);
        for (uint u = 0; u < 4; u++) {
            if (key + u < k1) {
                const threadgroup float* kr = k_tile + (key + u - tile0) * n;
                float d = 0.0f;
                for (uint i = 0; i < ATTN_PER_LANE; i++) {
                    uint j = lane + 32 * i;
                    if (j < n) {
                        d += qr[i] * kr[j];
                    }
                }
                s4[u] = d;
            }
        }
        s4 = simd_sum(s4);
        float m_new = m;
        for (uint u = 0; u < 4; u++) {
            if (key + u < k1) {
                m_new = max(m_new, s4[u]);
            }
        }
        float correction = exp(m - m_new);
        l *= correction;
        for (uint i = 0; i < ATTN_PER_LANE; i++) {
            acc[i] *= correction;
        }
        for (uint u = 0; u < 4; u++) {
            if (key + u < k1) {
                float e = exp(s4[u] - m_new);
                l += e;
                const threadgroup float* vr = v_tile + (key + u - tile0) * n;
                for (uint i = 0; i < ATTN_PER_LANE; i++) {
                    uint j = lane + 32 * i;
                    if (j < n) {
                        acc[i] += e * vr[j];
                    }
                }
            }
        }
        m = m_new;
    }
}

// split_chunk runs query row t's heads of kv head kvh over key chunk c of
// its cache (kb, vb: the kv head's rows), last being its last key.
template <typename C>
inline void split_chunk(constant AttnParams& p, const device float* q, const device typename C::T* kb,
                        const device typename C::T* vb, device float* part_o, device float* part_m,
                        device float* part_l, threadgroup float* k_tile, threadgroup float* v_tile, uint kvh,
                        uint c, uint t, uint last, uint tid, uint sg, uint lane, uint nthreads) {
    uint h = kvh * (p.q_heads / p.kv_heads) + sg;
    uint n = p.head_dim;
    uint k0 = c * p.split_len;
    uint k1 = min(k0 + p.split_len, last + 1);

    float qr[ATTN_PER_LANE];
    float acc[ATTN_PER_LANE];
    const device float* qh = q + (ulong(t) * p.q_heads + h) * n;
    for (uint i = 0; i < ATTN_PER_LANE; i++) {
        uint j = lane + 32 * i;
        qr[i] = j < n ? qh[j] * p.scale : 0.0f;
        acc[i] = 0.0f;
    }
    float m = NO_VALUE;
    float l = 0.0f;
    uint tile_keys = PREFILL_TILE / n;
    for (uint t0 = k0; t0 < k1; t0 += tile_keys) {
        uint count = min(tile_keys, k1 - t0);
        load_tile<C>(k_tile, v_tile, kb, vb, t0, count, n, tid, nthreads);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        attend(k_tile, v_tile, t0, t0, t0 + count, n, lane, qr, acc, m, l);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    ulong slot = (ulong(t) * p.q_heads + h) * p.splits + c;
    for (uint i = 0; i < ATTN_PER_LANE; i++) {
        uint j = lane + 32 * i;
        if (j < n) {
            part_o[slot * n + j] = acc[i];
        }
    }
    if (lane == 0) {
        part_m[slot] = m;
        part_l[slot] = l;
    }
}

// Grid: (kv_heads, splits, T); 32 threads per query head sharing the kv
// head (q_heads/kv_heads SIMD groups). Query t sees keys [0, pos0+t]; chunk
// c covers keys [c·split_len, (c+1)·split_len), staged tile by tile in
// threadgroup memory so that the kv head's rows are read once for all its
// query heads (GQA). A chunk wholly past the query's last key writes sum 0,
// which the reduce skips.
template <typename C>
kernel void attn_split(constant AttnParams& p [[buffer(0)]],
                       const device float* q [[buffer(1)]],
                       const device typename C::T* k_cache [[buffer(2)]],
                       const device typename C::T* v_cache [[buffer(3)]],
                       device float* part_o [[buffer(4)]],
                       device float* part_m [[buffer(5)]],
                       device float* part_l [[buffer(6)]],
                       uint3 tg [[threadgroup_position_in_grid]],
                       uint tid [[thread_index_in_threadgroup]],
                       uint sg [[simdgroup_index_in_threadgroup]],
                       uint lane [[thread_index_in_simdgroup]],
                       uint3 tg_size [[threads_per_threadgroup]]) {
    // MSL wants [[threads_per_threadgroup]] with as many components as
    // [[threadgroup_position_in_grid]] (uint3 here); a scalar beside a
    // vector is rejected by Apple's compiler, though C++ takes it.
    uint nthreads = tg_size.x * tg_size.y * tg_size.z;
    threadgroup float k_tile[PREFILL_TILE];
    threadgroup float v_tile[PREFILL_TILE];
    ulong head = ulong(tg.x) * p.max_seq * p.head_dim;
    split_chunk<C>(p, q, k_cache + head, v_cache + head, part_o, part_m, part_l, k_tile, v_tile, tg.x, tg.y, tg.z,
                   p.pos0 + tg.z, tid, sg, lane, nthreads);
}

// Grid: (kv_heads, splits of the longest, sequences); row t attends to its
// own cache up to its own position, its chunks past that left empty.
template <typename C>
kernel void attn_split_seqs(constant AttnParams& p [[buffer(0)]],
                            const device float* q [[buffer(1)]],
                            device float* part_o [[buffer(2)]],
                            device float* part_m [[buffer(3)]],
                            device float* part_l [[buffer(4)]],
                            const device uint* seq_info [[buffer(5)]],
                            const device typename C::T* k0 [[buffer(6)]],
                            const device typename C::T* k1 [[buffer(7)]],
                            const device typename C::T* k2 [[buffer(8)]],
                            const device typename C::T* k3 [[buffer(9)]],
                            const device typename C::T* k4 [[buffer(10)]],
                            const device typename C::T* k5 [[buffer(11)]],
                            const device typename C::T* k6 [[buffer(12)]],
                            const device typename C::T* k7 [[buffer(13)]],
                            const device typename C::T* v0 [[buffer(14)]],
                            const device typename C::T* v1 [[buffer(15)]],
                            const device typename C::T* v2 [[buffer(16)]],
                            const device typename C::T* v3 [[buffer(17)]],
                            const device typename C::T* v4 [[buffer(18)]],
                            const device typename C::T* v5 [[buffer(19)]],
                            const device typename C::T* v6 [[buffer(20)]],
                            const device typename C::T* v7 [[buffer(21)]],
                            uint3 tg [[threadgroup_position_in_grid]],
                            uint tid [[thread_index_in_threadgroup]],
                            uint sg [[simdgroup_index_in_threadgroup]],
                            uint lane [[thread_index_in_simdgroup]],
                            uint3 tg_size [[threads_per_threadgroup]]) {
    uint nthreads = tg_size.x * tg_size.y * tg_size.z;
    threadgroup float k_tile[PREFILL_TILE];
    threadgroup float v_tile[PREFILL_TILE];
    uint t = tg.z;
    ulong head = ulong(tg.x) * seq_info[2 * t + 1] * p.head_dim;
    split_chunk<C>(p, q, pick_seq(t, k0, k1, k2, k3, k4, k5, k6, k7) + head,
                   pick_seq(t, v0, v1, v2, v3, v4, v5, v6, v7) + head, part_o, part_m, part_l, k_tile, v_tile, tg.x,
                   tg.y, t, seq_info[2 * t], tid, sg, lane, nthreads);
}

template [[host_name("attn_split_seqs_bf16_f32")]] [[kernel]] decltype(attn_split_seqs<CacheBF16>) attn_split_seqs<CacheBF16>;
template [[host_name("attn_split_seqs_f32_f32")]] [[kernel]] decltype(attn_split_seqs<CacheF32>) attn_split_seqs<CacheF32>;
template [[host_name("attn_split_bf16_f32")]] [[kernel]] decltype(attn_split<CacheBF16>) attn_split<CacheBF16>;
template [[host_name("attn_split_f32_f32")]] [[kernel]] decltype(attn_split<CacheF32>) attn_split<CacheF32>;

// Grid: (q_heads, T), 32 threads. o = Σ_c e^{m_c−M}·o_c / Σ_c e^{m_c−M}·l_c,
// times sigmoid(gate).
kernel void attn_reduce_gate_f32(constant AttnParams& p [[buffer(0)]],
                                 const device float* part_o [[buffer(1)]],
                                 const device float* part_m [[buffer(2)]],
                                 const device float* part_l [[buffer(3)]],
                                 const device float* qg [[buffer(4)]],
                                 device float* o [[buffer(5)]],
                                 uint2 tg [[threadgroup_position_in_grid]],
                                 uint lane [[thread_index_in_simdgroup]]) {
    uint h = tg.x;
    uint t = tg.y;
    uint n = p.head_dim;
    ulong base = (ulong(t) * p.q_heads + h) * p.splits;
    float big = NO_VALUE;
    for (uint c = 0; c < p.splits; c++) {
        if (part_l[base + c] > 0.0f) { // chunks past the query's keys hold nothing
            big = max(big, part_m[base + c]);
        }
    }
    float denom = 0.0f;
    for (uint c = 0; c < p.splits; c++) {
        if (part_l[base + c] > 0.0f) {
            denom += exp(part_m[base + c] - big) * part_l[base + c];
        }
    }
    const device float* gate = qg + (ulong(t) * p.q_heads + h) * 2 * n + n;
    device float* out = o + (ulong(t) * p.q_heads + h) * n;
    for (uint j = lane; j < n; j += 32) {
        float num = 0.0f;
        for (uint c = 0; c < p.splits; c++) {
            if (part_l[base + c] > 0.0f) {
                num += exp(part_m[base + c] - big) * part_o[(base + c) * n + j];
            }
        }
        out[j] = num / denom * sigmoid(gate[j]);
    }
}

// attn_prefill_<kv>_f32: causal attention for a prefill chunk, tiled. A
// threadgroup takes PREFILL_QUERIES consecutive queries of one query head
// (one SIMD group each) and walks the keys they need in tiles staged in
// threadgroup memory, so each key and value row is read from the cache once
// per block of queries instead of once per query. Each SIMD group keeps the
// online softmax of its query (running max, sum, output in registers) and
// reduces four keys per simd_sum; the gate is applied at the end, so no
// reduce pass follows. Query head h reads kv head h / (q_heads/kv_heads).
// Grid: (ceil(T / PREFILL_QUERIES), q_heads); threads 32·PREFILL_QUERIES.

template <typename C>
kernel void attn_prefill(constant AttnParams& p [[buffer(0)]],
                         const device float* q [[buffer(1)]],
                         const device typename C::T* k_cache [[buffer(2)]],
                         const device typename C::T* v_cache [[buffer(3)]],
                         const device float* qg [[buffer(4)]],
                         device float* o [[buffer(5)]],
                         uint2 tg [[threadgroup_position_in_grid]],
                         uint tid [[thread_index_in_threadgroup]],
                         uint sg [[simdgroup_index_in_threadgroup]],
                         uint lane [[thread_index_in_simdgroup]]) {
    threadgroup float k_tile[PREFILL_TILE];
    threadgroup float v_tile[PREFILL_TILE];
    uint h = tg.y;
    uint n = p.head_dim;
    uint kvh = h / (p.q_heads / p.kv_heads);
    uint first = tg.x * PREFILL_QUERIES;        // first query row of the block
    uint t = first + sg;                        // this SIMD group's query row
    bool live = t < p.rows;                     // past the chunk: loads only
    uint last = p.pos0 + min(t, p.rows - 1);    // its last key (inclusive)
    uint block_end = p.pos0 + min(first + PREFILL_QUERIES, p.rows); // keys the block needs
    uint tile_keys = PREFILL_TILE / n;

    float qr[ATTN_PER_LANE];
    float acc[ATTN_PER_LANE];
    const device float* qh = q + (ulong(min(t, p.rows - 1)) * p.q_heads + h) * n;
    for (uint i = 0; i < ATTN_PER_LANE; i++) {
        uint j = lane + 32 * i;
        qr[i] = j < n ? qh[j] * p.scale : 0.0f;
        acc[i] = 0.0f;
    }
    float m = NO_VALUE;
    float l = 0.0f;
    const device typename C::T* kb = k_cache + ulong(kvh) * p.max_seq * n;
    const device typename C::T* vb = v_cache + ulong(kvh) * p.max_seq * n;
    for (uint k0 = 0; k0 < block_end; k0 += tile_keys) {
        uint count = min(tile_keys, block_end - k0);
        load_tile<C>(k_tile, v_tile, kb, vb, k0, count, n, tid, 32 * PREFILL_QUERIES);
        threadgroup_barrier(mem_flags::mem_threadgroup);
        // Keys of this tile this query may see: [k0, min(k0+count, last+1)).
        attend(k_tile, v_tile, k0, k0, min(k0 + count, last + 1), n, lane, qr, acc, m, l);
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (live) {
        const device float* gate = qg + (ulong(t) * p.q_heads + h) * 2 * n + n;
        device float* out = o + (ulong(t) * p.q_heads + h) * n;
        for (uint i = 0; i < ATTN_PER_LANE; i++) {
            uint j = lane + 32 * i;
            if (j < n) {
                out[j] = acc[i] / l * sigmoid(gate[j]);
            }
        }
    }
}

template [[host_name("attn_prefill_bf16_f32")]] [[kernel]] decltype(attn_prefill<CacheBF16>) attn_prefill<CacheBF16>;
template [[host_name("attn_prefill_f32_f32")]] [[kernel]] decltype(attn_prefill<CacheF32>) attn_prefill<CacheF32>;
