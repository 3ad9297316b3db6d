// embed.metal: the embedding gather. Token ids are read from a device buffer
// — the prompt's ids for prefill, or the slot the previous step's sampler
// wrote for decode — so a decode step never waits for the host to learn the
// token; each id is also appended to the sequence's history on the device.
// One thread per output element; rows are dequantized on the fly.
//
//   embed_<fmt>_f32       the rows of one sequence's pass (ids contiguous)
//   embed_seqs_<fmt>_f32  one decode step of each of up to 8 sequences
#include "common.h"

struct EmbedParams {
    uint hidden;     // row width
    uint vocab;      // rows in the table; out-of-range ids produce zeros
    uint group_size; // affine group size
    uint pos0;       // sequence position of the first row
};

template <typename F>
kernel void embed(constant EmbedParams& p [[buffer(0)]],
                  const device uchar* w [[buffer(1)]],
                  const device ushort* scales [[buffer(2)]],
                  const device ushort* biases [[buffer(3)]],
                  const device int* ids [[buffer(4)]],
                  device float* out [[buffer(5)]],
                  device int* history [[buffer(6)]],
                  uint2 gid [[thread_position_in_grid]]) {
    uint j = gid.x;
    uint t = gid.y;
    if (j >= p.hidden) {
        return;
    }
    if (j == 0) {
        // The sequence's token history, for the sampler's penalties.
        history[p.pos0 + t] = ids[t];
    }
    WeightRef wr;
    wr.data = w;
    wr.scales = scales;
    wr.biases = biases;
    wr.in = p.hidden;
    wr.group_size = p.group_size;
    wr.flags = 0; // element reads only
    int id = ids[t];
    float v = 0.0f;
    if (id >= 0 && uint(id) < p.vocab) {
        v = F::at(wr, uint(id), j);
    }
    out[ulong(t) * p.hidden + j] = v;
}

template [[host_name("embed_f32_f32")]] [[kernel]] decltype(embed<FmtF32>) embed<FmtF32>;
template [[host_name("embed_f16_f32")]] [[kernel]] decltype(embed<FmtF16>) embed<FmtF16>;
template [[host_name("embed_bf16_f32")]] [[kernel]] decltype(embed<FmtBF16>) embed<FmtBF16>;
template [[host_name("embed_q4_f32")]] [[kernel]] decltype(embed<FmtQ4>) embed<FmtQ4>;
template [[host_name("embed_q8_f32")]] [[kernel]] decltype(embed<FmtQ8>) embed<FmtQ8>;

struct EmbedSeqsParams {
    uint hidden;     // row width
    uint vocab;      // rows in the table; out-of-range ids produce zeros
    uint group_size; // affine group size
    uint rows;       // sequences, at most EMBED_MAX_SEQS
};

#define EMBED_MAX_SEQS 8 // sequences of one embed_seqs dispatch

// One decode step of each of p.rows ≤ EMBED_MAX_SEQS sequences: row z of
// out gathers the id at ids_z[0] (the host's id, or the ring slot the
// sequence's previous sampler wrote) and appends it at history_z[0] (the
// sequence's history at its position). Every buffer is bound at its own
// offset, so one dispatch serves sequences at different positions; the
// unused arguments are bound to any of them. Row z holds the bits embed
// gives that id alone. Grid: ceil(hidden/256) × rows threadgroups of 256.
template <typename F>
kernel void embed_seqs(constant EmbedSeqsParams& p [[buffer(0)]],
                       const device uchar* w [[buffer(1)]],
                       const device ushort* scales [[buffer(2)]],
                       const device ushort* biases [[buffer(3)]],
                       device float* out [[buffer(4)]],
                       const device int* ids0 [[buffer(5)]],
                       const device int* ids1 [[buffer(6)]],
                       const device int* ids2 [[buffer(7)]],
                       const device int* ids3 [[buffer(8)]],
                       const device int* ids4 [[buffer(9)]],
                       const device int* ids5 [[buffer(10)]],
                       const device int* ids6 [[buffer(11)]],
                       const device int* ids7 [[buffer(12)]],
                       device int* history0 [[buffer(13)]],
                       device int* history1 [[buffer(14)]],
                       device int* history2 [[buffer(15)]],
                       device int* history3 [[buffer(16)]],
                       device int* history4 [[buffer(17)]],
                       device int* history5 [[buffer(18)]],
                       device int* history6 [[buffer(19)]],
                       device int* history7 [[buffer(20)]],
                       uint2 gid [[thread_position_in_grid]]) {
    uint j = gid.x;
    uint z = gid.y;
    if (j >= p.hidden || z >= p.rows) {
        return;
    }
    int id = pick_seq(z, ids0, ids1, ids2, ids3, ids4, ids5, ids6, ids7)[0];
    if (j == 0) {
        pick_seq(z, history0, history1, history2, history3, history4, history5, history6, history7)[0] = id;
    }
    WeightRef wr;
    wr.data = w;
    wr.scales = scales;
    wr.biases = biases;
    wr.in = p.hidden;
    wr.group_size = p.group_size;
    wr.flags = 0; // element reads only
    float v = 0.0f;
    if (id >= 0 && uint(id) < p.vocab) {
        v = F::at(wr, uint(id), j);
    }
    out[ulong(z) * p.hidden + j] = v;
}

template [[host_name("embed_seqs_f32_f32")]] [[kernel]] decltype(embed_seqs<FmtF32>) embed_seqs<FmtF32>;
template [[host_name("embed_seqs_f16_f32")]] [[kernel]] decltype(embed_seqs<FmtF16>) embed_seqs<FmtF16>;
template [[host_name("embed_seqs_bf16_f32")]] [[kernel]] decltype(embed_seqs<FmtBF16>) embed_seqs<FmtBF16>;
template [[host_name("embed_seqs_q4_f32")]] [[kernel]] decltype(embed_seqs<FmtQ4>) embed_seqs<FmtQ4>;
template [[host_name("embed_seqs_q8_f32")]] [[kernel]] decltype(embed_seqs<FmtQ8>) embed_seqs<FmtQ8>;

struct CopyParams {
    uint count;
};

// dst = src, one float per thread: snapshots of the residual stream for the
// Hidden debug hook. Grid: ceil(count/256) × 256 threads.
kernel void copy_f32(constant CopyParams& p [[buffer(0)]],
                     const device float* src [[buffer(1)]],
                     device float* dst [[buffer(2)]],
                     uint i [[thread_position_in_grid]]) {
    if (i < p.count) {
        dst[i] = src[i];
    }
}
