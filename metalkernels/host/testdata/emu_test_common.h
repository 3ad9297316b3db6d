// emu_test_common.h: parameter structs shared by emu_test.metal and the Go
// tests (which write the same layout), and a #define used as a buffer
// index, as kernel headers may do.
#pragma once
#include <metal_stdlib>
using namespace metal;

#define TEST_OUT_BUFFER 3

struct AddParams {
    uint n;
    float scale;
};

struct SimdParams {
    uint n;
};

struct MatmulParams {
    uint m;
    uint n;
    uint k;
    uint b_transposed;
    float alpha;
};

struct HistParams {
    uint n;
    uint bins;
};
