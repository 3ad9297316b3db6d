// sample.metal: choosing the next token on the GPU, so that it can feed the
// next step's embedding gather without a trip through the host.
//
//   argmax_partial_f32  one SIMD group per chunk of the vocabulary: its
//                       largest logit and the lowest id holding it
//   argmax_final_i32    one SIMD group merges the chunks and writes the id
//
// Ties resolve to the lowest id, as a sequential scan would.
#include "common.h"

struct ArgmaxParams {
    uint vocab;  // logits in the row
    uint chunk;  // logits per partial
    uint chunks; // partials
};

// Grid: x = chunks; 32 threads.
kernel void argmax_partial_f32(constant ArgmaxParams& p [[buffer(0)]],
                               const device float* logits [[buffer(1)]],
                               device float* part_val [[buffer(2)]],
                               device int* part_id [[buffer(3)]],
                               uint c [[threadgroup_position_in_grid]],
                               uint lane [[thread_index_in_simdgroup]]) {
    uint begin = c * p.chunk;
    uint end = min(begin + p.chunk, p.vocab);
    float best = -INFINITY;
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
        part_val[c] = top;
        part_id[c] = int(id);
    }
}

// Grid: 1 threadgroup of 32 threads. out[0] receives the token id.
kernel void argmax_final_i32(constant ArgmaxParams& p [[buffer(0)]],
                             const device float* part_val [[buffer(1)]],
                             const device int* part_id [[buffer(2)]],
                             device int* out [[buffer(3)]],
                             uint lane [[thread_index_in_simdgroup]]) {
    float best = -INFINITY;
    uint best_id = 0xffffffffu;
    for (uint c = lane; c < p.chunks; c += 32) {
        float v = part_val[c];
        uint id = uint(part_id[c]);
        if (v > best || (v == best && id < best_id)) {
            best = v;
            best_id = id;
        }
    }
    float top = simd_max(best);
    uint id = simd_min(best == top ? best_id : 0xffffffffu);
    if (lane == 0) {
        out[0] = int(id);
    }
}
