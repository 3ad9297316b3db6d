// sample.metal: choosing the next token on the GPU, so that it can feed the
// next step's embedding gather without a trip through the host.
//
//   argmax_partial_seqs_f32  one SIMD group per chunk of a row of the
//                            vocabulary: its largest logit and the lowest
//                            id holding it
//   argmax_final_seqs_i32    one SIMD group per row merges its chunks and
//                            writes the id
//
// Both serve up to ARGMAX_MAX_SEQS rows in one dispatch — the greedy
// choices of every sequence of a decode step — each row bound as its own
// argument (logits_z, out_z), so the rows may lie anywhere; a row's choice
// is the same whatever other rows share the dispatch. Ties resolve to the
// lowest id, as a sequential scan would.
#include "common.h"

#define ARGMAX_MAX_SEQS 8 // rows of one argmax dispatch

struct ArgmaxParams {
    uint vocab;  // logits in the row
    uint chunk;  // logits per partial
    uint chunks; // partials per row
    uint rows;   // rows, at most ARGMAX_MAX_SEQS
};

// Grid: chunks × rows threadgroups of 32 threads. Row z's partials are
// part_val/part_id[z·chunks, (z+1)·chunks).
kernel void argmax_partial_seqs_f32(constant ArgmaxParams& p [[buffer(0)]],
                                    device float* part_val [[buffer(1)]],
                                    device int* part_id [[buffer(2)]],
                                    const device float* logits0 [[buffer(3)]],
                                    const device float* logits1 [[buffer(4)]],
                                    const device float* logits2 [[buffer(5)]],
                                    const device float* logits3 [[buffer(6)]],
                                    const device float* logits4 [[buffer(7)]],
                                    const device float* logits5 [[buffer(8)]],
                                    const device float* logits6 [[buffer(9)]],
                                    const device float* logits7 [[buffer(10)]],
                                    uint2 tg [[threadgroup_position_in_grid]],
                                    uint lane [[thread_index_in_simdgroup]]) {
    uint c = tg.x;
    uint z = tg.y;
    if (z >= p.rows) {
        return; // the whole threadgroup: no collective is skipped by part of it
    }
    const device float* logits = pick_seq(z, logits0, logits1, logits2, logits3, logits4, logits5, logits6, logits7);
    uint begin = c * p.chunk;
    uint end = min(begin + p.chunk, p.vocab);
    float best = NO_VALUE;
    uint best_id = 0xffffffffu;
    for (uint i = begin + lane; i < end; i += 32) {
        float v = logits[i];
        if (v > best) { // strictly greater: a lane's own ties keep its lowest id
            best = v;
            best_id = i;
        }
    }
    float top = simd_max(best);
    uint id = simd_min(best == top ? best_id : 0xffffffffu);
    if (lane == 0) {
        part_val[z * p.chunks + c] = top;
        part_id[z * p.chunks + c] = int(id);
    }
}

// Grid: rows threadgroups of 32 threads. out_z[0] receives row z's id.
kernel void argmax_final_seqs_i32(constant ArgmaxParams& p [[buffer(0)]],
                                  const device float* part_val [[buffer(1)]],
                                  const device int* part_id [[buffer(2)]],
                                  device int* out0 [[buffer(3)]],
                                  device int* out1 [[buffer(4)]],
                                  device int* out2 [[buffer(5)]],
                                  device int* out3 [[buffer(6)]],
                                  device int* out4 [[buffer(7)]],
                                  device int* out5 [[buffer(8)]],
                                  device int* out6 [[buffer(9)]],
                                  device int* out7 [[buffer(10)]],
                                  uint z [[threadgroup_position_in_grid]],
                                  uint lane [[thread_index_in_simdgroup]]) {
    if (z >= p.rows) {
        return;
    }
    const device float* vals = part_val + z * p.chunks;
    const device int* ids = part_id + z * p.chunks;
    float best = NO_VALUE;
    uint best_id = 0xffffffffu;
    for (uint c = lane; c < p.chunks; c += 32) {
        float v = vals[c];
        uint id = uint(ids[c]);
        if (v > best || (v == best && id < best_id)) {
            best = v;
            best_id = id;
        }
    }
    float top = simd_max(best);
    uint id = simd_min(best == top ? best_id : 0xffffffffu);
    if (lane == 0) {
        pick_seq(z, out0, out1, out2, out3, out4, out5, out6, out7)[0] = int(id);
    }
}

// ---------------------------------------------------------------- penalties
//
// The penalties of engine/sample on the device: repetition over every
// distinct token of the history, presence and frequency over the generated
// ones (history[from:]). Three passes over the history: clear the per-token
// counters of the tokens it holds, count, and apply once per distinct token
// (the first thread to claim a token's flag applies it). Counters of tokens
// outside the history are never read, so they need no clearing.

struct PenaltyParams {
    uint count;       // tokens in the history
    uint from;        // first generated position
    float repetition; // 1: off
    float presence;
    float frequency;
};

// Grid: ceil(count/256) × 256 threads (for the three passes).
kernel void sample_penalty_clear_u32(constant PenaltyParams& p [[buffer(0)]],
                                     const device int* history [[buffer(1)]],
                                     device atomic_uint* counts [[buffer(2)]],
                                     device atomic_uint* flags [[buffer(3)]],
                                     uint i [[thread_position_in_grid]]) {
    if (i < p.count) {
        uint id = uint(history[i]);
        atomic_store_explicit(&counts[id], 0u, memory_order_relaxed);
        atomic_store_explicit(&flags[id], 0u, memory_order_relaxed);
    }
}

kernel void sample_penalty_count_u32(constant PenaltyParams& p [[buffer(0)]],
                                     const device int* history [[buffer(1)]],
                                     device atomic_uint* counts [[buffer(2)]],
                                     device atomic_uint* flags [[buffer(3)]],
                                     uint i [[thread_position_in_grid]]) {
    if (i < p.count) {
        uint id = uint(history[i]);
        if (i >= p.from) {
            atomic_fetch_add_explicit(&counts[id], 1u, memory_order_relaxed);
        }
        atomic_store_explicit(&flags[id], 1u, memory_order_relaxed);
    }
}

// logits is a private copy of the row, changed in place.
kernel void sample_penalty_apply_f32(constant PenaltyParams& p [[buffer(0)]],
                                     const device int* history [[buffer(1)]],
                                     device atomic_uint* counts [[buffer(2)]],
                                     device atomic_uint* flags [[buffer(3)]],
                                     device float* logits [[buffer(4)]],
                                     uint i [[thread_position_in_grid]]) {
    if (i >= p.count) {
        return;
    }
    uint id = uint(history[i]);
    if (atomic_exchange_explicit(&flags[id], 2u, memory_order_relaxed) != 1u) {
        return; // another thread has this token
    }
    float l = logits[id];
    if (p.repetition != 1.0f && p.repetition != 0.0f) {
        l = l > 0.0f ? l / p.repetition : l * p.repetition;
    }
    uint c = atomic_load_explicit(&counts[id], memory_order_relaxed);
    if (c > 0 && (p.presence != 0.0f || p.frequency != 0.0f)) {
        l -= p.presence + p.frequency * float(c);
    }
    logits[id] = l;
}

// ---------------------------------------------------------------- top-k draw
//
// Temperature, top-k, top-p, min-p and one seeded draw, as engine/sample
// defines them: the k largest finite logits in descending order (lower id
// first on ties), probabilities exp((l − max)/T) over them, top-p keeping
// the shortest descending prefix whose mass reaches TopP of the total, min-p
// keeping those at least MinP times the largest, then the first survivor
// whose cumulative mass exceeds u·total, u = Uniform(seed, position). The
// host computes the exponentials in float64, the GPU in float32: a draw can
// differ only when u falls within float rounding of a boundary.

#define TOPK_THREADS 256
#define TOPK_PER_THREAD 16 // chunk = TOPK_THREADS·TOPK_PER_THREAD logits
#define TOPK_MAX 256
#define TOPK_NONE 0xffffffffu

struct TopKParams {
    uint vocab;
    uint chunks;
    uint k;
    float temperature;
    float top_p;    // 0 or 1: off
    float min_p;    // 0: off
    uint seed_lo;   // Sampling.Seed
    uint seed_hi;
    uint position;  // position of the token being chosen (history length)
};

// Picks the best (value, lowest id) among the threadgroup's candidates:
// every thread passes its own, every thread gets the winner.
inline void topk_reduce(thread float& val, thread uint& id, threadgroup float* red_val,
                        threadgroup uint* red_id, uint sg, uint lane) {
    float top = simd_max(val);
    uint best = simd_min(val == top ? id : TOPK_NONE);
    if (lane == 0) {
        red_val[sg] = top;
        red_id[sg] = best;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float v = NO_VALUE;
    uint b = TOPK_NONE;
    for (uint s = 0; s < TOPK_THREADS / 32; s++) {
        if (red_val[s] > v || (red_val[s] == v && red_id[s] < b)) {
            v = red_val[s];
            b = red_id[s];
        }
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    val = v;
    id = b;
}

// Grid: chunks threadgroups of TOPK_THREADS. Writes each chunk's k best
// finite logits in order to cand_val/cand_id [chunks, k], padded with
// (−inf, none).
kernel void sample_topk_partial_f32(constant TopKParams& p [[buffer(0)]],
                                    const device float* logits [[buffer(1)]],
                                    device float* cand_val [[buffer(2)]],
                                    device uint* cand_id [[buffer(3)]],
                                    uint c [[threadgroup_position_in_grid]],
                                    uint tid [[thread_index_in_threadgroup]],
                                    uint sg [[simdgroup_index_in_threadgroup]],
                                    uint lane [[thread_index_in_simdgroup]]) {
    threadgroup float red_val[TOPK_THREADS / 32];
    threadgroup uint red_id[TOPK_THREADS / 32];
    float v[TOPK_PER_THREAD];
    uint base = c * TOPK_THREADS * TOPK_PER_THREAD;
    for (uint r = 0; r < TOPK_PER_THREAD; r++) {
        uint i = base + r * TOPK_THREADS + tid;
        float x = i < p.vocab ? logits[i] : NO_VALUE;
        v[r] = is_nan_or_neg_inf(x) ? NO_VALUE : x; // NaN and −inf never compete
    }
    for (uint s = 0; s < p.k; s++) {
        float best = NO_VALUE;
        uint best_id = TOPK_NONE;
        for (uint r = 0; r < TOPK_PER_THREAD; r++) {
            if (v[r] > best) { // ids rise with r: ties keep the lower id; NO_VALUE never wins
                best = v[r];
                best_id = base + r * TOPK_THREADS + tid;
            }
        }
        topk_reduce(best, best_id, red_val, red_id, sg, lane);
        if (best_id != TOPK_NONE && best_id >= base && (best_id - base) % TOPK_THREADS == tid) {
            v[(best_id - base) / TOPK_THREADS] = NO_VALUE;
        }
        if (tid == 0) {
            cand_val[c * p.k + s] = best;
            cand_id[c * p.k + s] = best_id; // TOPK_NONE when nothing was left
        }
    }
}

// Uniform(seed, pos) of engine/sample: SplitMix64 of seed + (pos+1)·γ, the
// top 53 bits scaled to [0, 1).
inline float uniform_draw(ulong seed, uint pos) {
    ulong z = seed + ulong(pos + 1) * 0x9e3779b97f4a7c15ul;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ul;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebul;
    z ^= z >> 31;
    return float(z >> 11) * (1.0f / 9007199254740992.0f);
}

// Grid: one threadgroup of TOPK_THREADS. Merges the chunks' candidates into
// the global top k (cand_val is consumed), then draws; out[0] gets the id.
kernel void sample_topk_final_f32(constant TopKParams& p [[buffer(0)]],
                                  device float* cand_val [[buffer(1)]],
                                  const device uint* cand_id [[buffer(2)]],
                                  device int* out [[buffer(3)]],
                                  uint tid [[thread_index_in_threadgroup]],
                                  uint sg [[simdgroup_index_in_threadgroup]],
                                  uint lane [[thread_index_in_simdgroup]]) {
    threadgroup float red_val[TOPK_THREADS / 32];
    threadgroup uint red_id[TOPK_THREADS / 32];
    threadgroup float top_val[TOPK_MAX];
    threadgroup uint top_id[TOPK_MAX];
    uint n = p.chunks * p.k;
    for (uint s = 0; s < p.k; s++) {
        float best = NO_VALUE;
        uint best_id = TOPK_NONE;
        uint best_at = TOPK_NONE;
        for (uint i = tid; i < n; i += TOPK_THREADS) {
            float x = cand_val[i];
            uint id = cand_id[i];
            if (id != TOPK_NONE && x > NO_VALUE && (x > best || (x == best && id < best_id))) {
                best = x;
                best_id = id;
                best_at = i;
            }
        }
        uint mine = best_id;
        topk_reduce(best, best_id, red_val, red_id, sg, lane);
        if (best_id != TOPK_NONE && mine == best_id) {
            cand_val[best_at] = NO_VALUE; // taken
        }
        if (tid == 0) {
            top_val[s] = best;
            top_id[s] = best_id;
        }
        threadgroup_barrier(mem_flags::mem_device | mem_flags::mem_threadgroup);
    }
    if (tid != 0) {
        return;
    }
    uint count = 0;
    while (count < p.k && top_id[count] != TOPK_NONE) {
        count++;
    }
    if (count == 0) {
        out[0] = 0; // every logit was −inf or NaN
        return;
    }
    float inv_t = 1.0f / p.temperature;
    float max_l = top_val[0];
    float total = 0.0f;
    for (uint i = 0; i < count; i++) {
        total += exp((top_val[i] - max_l) * inv_t);
    }
    float pmax = 1.0f; // exp(0) for the largest
    uint keep = count;
    if (p.top_p > 0.0f && p.top_p < 1.0f) {
        float target = p.top_p * total;
        float cum = 0.0f;
        for (uint i = 0; i < count; i++) {
            cum += exp((top_val[i] - max_l) * inv_t);
            if (cum >= target) {
                keep = i + 1;
                break;
            }
        }
    }
    if (p.min_p > 0.0f) {
        float min_keep = p.min_p * pmax;
        uint m = 0;
        while (m < keep && exp((top_val[m] - max_l) * inv_t) >= min_keep) {
            m++;
        }
        keep = max(m, 1u);
    }
    float kept = 0.0f;
    for (uint i = 0; i < keep; i++) {
        kept += exp((top_val[i] - max_l) * inv_t);
    }
    ulong seed = (ulong(p.seed_hi) << 32) | ulong(p.seed_lo);
    float u = uniform_draw(seed, p.position) * kept;
    uint pick = keep - 1;
    for (uint i = 0; i < keep; i++) {
        u -= exp((top_val[i] - max_l) * inv_t);
        if (u < 0.0f) {
            pick = i;
            break;
        }
    }
    out[0] = int(top_id[pick]);
}
