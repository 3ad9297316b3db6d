// conv.metal: the DeltaNet's causal depthwise convolution with its state,
// followed by SiLU. One thread per channel walks the pass's tokens in order,
// holding the last kernel−1 inputs in registers; the rows before the pass
// come from the state, and the state is left holding the pass's last
// kernel−1 rows (earlier state rows when the pass is shorter). Channels are
// independent, so no thread ever reads another's data.
// Grid: x = ceil(channels / 256); threads per threadgroup = 256.
// conv1d_step_seqs_f32 runs the decode steps of up to CONV_MAX_SEQS
// sequences in one dispatch, each with its own state (grid y: the sequence;
// row y of x and out is its token).
#include "common.h"

#define CONV_MAX_KERNEL 8
#define CONV_MAX_SEQS 8

struct ConvParams {
    uint channels;
    uint taps;   // kernel width, at most CONV_MAX_KERNEL
    uint rows;   // tokens in the pass
};

// conv_channel runs rows tokens of channel ch. x, out: [rows, channels];
// w: [channels, taps]; state: [taps−1, channels], oldest row first.
inline void conv_channel(constant ConvParams& p, const device float* x, const device float* w,
                         device float* state, device float* out, uint rows, uint ch) {
    uint hist = p.taps - 1;
    float win[CONV_MAX_KERNEL];
    float w_taps[CONV_MAX_KERNEL];
    for (uint j = 0; j < p.taps; j++) {
        w_taps[j] = w[ulong(ch) * p.taps + j];
    }
    for (uint j = 0; j < hist; j++) {
        win[j] = state[ulong(j) * p.channels + ch];
    }
    for (uint t = 0; t < rows; t++) {
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

kernel void conv1d_causal_silu_f32(constant ConvParams& p [[buffer(0)]],
                                   const device float* x [[buffer(1)]],
                                   const device float* w [[buffer(2)]],
                                   device float* state [[buffer(3)]],
                                   device float* out [[buffer(4)]],
                                   uint ch [[thread_position_in_grid]]) {
    if (ch >= p.channels) {
        return;
    }
    conv_channel(p, x, w, state, out, p.rows, ch);
}

// One token of each of p.rows ≤ CONV_MAX_SEQS sequences; sequence z's state
// is state_z (the unused arguments bound to any of them).
kernel void conv1d_step_seqs_f32(constant ConvParams& p [[buffer(0)]],
                                 const device float* x [[buffer(1)]],
                                 const device float* w [[buffer(2)]],
                                 device float* out [[buffer(3)]],
                                 device float* state0 [[buffer(4)]],
                                 device float* state1 [[buffer(5)]],
                                 device float* state2 [[buffer(6)]],
                                 device float* state3 [[buffer(7)]],
                                 device float* state4 [[buffer(8)]],
                                 device float* state5 [[buffer(9)]],
                                 device float* state6 [[buffer(10)]],
                                 device float* state7 [[buffer(11)]],
                                 uint2 gid [[thread_position_in_grid]]) {
    uint ch = gid.x;
    uint z = gid.y;
    if (ch >= p.channels || z >= p.rows) {
        return;
    }
    device float* state = pick_seq(z, state0, state1, state2, state3, state4, state5, state6, state7);
    conv_channel(p, x + ulong(z) * p.channels, w, state, out + ulong(z) * p.channels, 1, ch);
}
