// embed.metal: the embedding gather. Token ids are read from a device buffer
// — the prompt's ids for prefill, or the slot the previous step's sampler
// wrote for decode — so a decode step never waits for the host to learn the
// token; each id is also appended to the sequence's history on the device.
// One thread per output element; rows are dequantized on the fly.
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
