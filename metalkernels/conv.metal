// conv.metal: the DeltaNet's causal depthwise convolution with its state,
// followed by SiLU. One thread per channel walks the pass's tokens in order,
// holding the last kernel−1 inputs in registers; the rows before the pass
// come from the state, and the state is left holding the pass's last
// kernel−1 rows (earlier state rows when the pass is shorter). Channels are
// independent, so no thread ever reads another's data.
// Grid: x = ceil(channels / 256); threads per threadgroup = 256.
#include "common.h"

#define CONV_MAX_KERNEL 8

struct ConvParams {
    uint channels;
    uint taps;   // kernel width, at most CONV_MAX_KERNEL
    uint rows;   // tokens in the pass
};

// x, out: [rows, channels]; w: [channels, taps]; state: [taps−1, channels],
// oldest row first.
kernel void conv1d_causal_silu_f32(constant ConvParams& p [[buffer(0)]],
                                   const device float* x [[buffer(1)]],
                                   const device float* w [[buffer(2)]],
                                   device float* state [[buffer(3)]],
                                   device float* out [[buffer(4)]],
                                   uint ch [[thread_position_in_grid]]) {
    if (ch >= p.channels) {
        return;
    }
    uint hist = p.taps - 1;
    float win[CONV_MAX_KERNEL];
    float w_taps[CONV_MAX_KERNEL];
    for (uint j = 0; j < p.taps; j++) {
        w_taps[j] = w[ulong(ch) * p.taps + j];
    }
    for (uint j = 0; j < hist; j++) {
        win[j] = state[ulong(j) * p.channels + ch];
    }
    for (uint t = 0; t < p.rows; t++) {
        float xt = x[ulong(t) * p.channels + ch];
        float acc = w_taps[hist] * xt;
        for (uint j = 0; j < hist; j++) {
            acc += w_taps[j] * win[j];
        }
        out[ulong(t) * p.channels + ch] = silu(acc);
        for (uint j = 0; j + 1 < hist; j++) {
            win[j] = win[j + 1];
        }
        if (hist > 0) {
            win[hist - 1] = xt;
        }
    }
    for (uint j = 0; j < hist; j++) {
        state[ulong(j) * p.channels + ch] = win[j];
    }
}
