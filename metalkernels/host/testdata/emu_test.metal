// emu_test.metal: small kernels that exercise the emulator itself — each
// one isolates a feature (barriers, SIMD-group functions, simdgroup
// matrices, atomics, positions, conversions) that emu_test.go checks
// against plain Go. Written as ordinary MSL, as the model's kernels are.
#include <metal_stdlib>
#include "emu_test_common.h"
using namespace metal;

// Constant parameters by reference, a 1D grid with a ragged tail.
kernel void add_f32(constant AddParams& p [[buffer(0)]],
                    const device float* a [[buffer(1)]],
                    const device float* b [[buffer(2)]],
                    device float* c [[buffer(TEST_OUT_BUFFER)]],
                    uint gid [[thread_position_in_grid]]) {
    if (gid >= p.n) {
        return;
    }
    c[gid] = a[gid] * p.scale + b[gid];
}

// Reverses each threadgroup's block through threadgroup memory. Without the
// barrier a thread reads slots other threads have not written yet.
template <bool Barrier>
kernel void reverse_block(const device float* in [[buffer(0)]],
                          device float* out [[buffer(1)]],
                          uint gid [[thread_position_in_grid]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint n [[threads_per_threadgroup]]) {
    threadgroup float tile[1024];
    tile[tid] = in[gid];
    if (Barrier) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    out[gid] = tile[n - 1 - tid];
}
template [[host_name("reverse_block_f32")]] kernel void reverse_block<true>(const device float* in [[buffer(0)]], device float* out [[buffer(1)]], uint gid [[thread_position_in_grid]], uint tid [[thread_index_in_threadgroup]], uint n [[threads_per_threadgroup]]);
template [[host_name("reverse_block_racy_f32")]] [[kernel]] decltype(reverse_block<false>) reverse_block<false>;

// A tree reduction through a [[threadgroup(0)]] argument: log2(n) barriers.
kernel void tree_sum_f32(const device float* in [[buffer(0)]],
                         device float* out [[buffer(1)]],
                         threadgroup float* scratch [[threadgroup(0)]],
                         uint gid [[thread_position_in_grid]],
                         uint tid [[thread_index_in_threadgroup]],
                         uint tg [[threadgroup_position_in_grid]],
                         uint n [[threads_per_threadgroup]]) {
    scratch[tid] = in[gid];
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint s = n / 2; s > 0; s /= 2) {
        if (tid < s) {
            scratch[tid] += scratch[tid + s];
        }
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (tid == 0) {
        out[tg] = scratch[0];
    }
}

// Every SIMD-group function once per lane; out has SIMD_OPS rows of n.
// Lanes past n return first, so the last SIMD group is partial.
kernel void simd_ops(constant SimdParams& p [[buffer(0)]],
                     const device float* x [[buffer(1)]],
                     const device uint* u [[buffer(2)]],
                     device float* out [[buffer(3)]],
                     uint gid [[thread_position_in_grid]],
                     ushort lane [[thread_index_in_simdgroup]]) {
    if (gid >= p.n) {
        return;
    }
    float v = x[gid];
    uint w = u[gid];
    uint n = p.n;
    out[0 * n + gid] = simd_sum(v);
    out[1 * n + gid] = simd_max(v);
    out[2 * n + gid] = simd_min(v);
    out[3 * n + gid] = simd_prefix_inclusive_sum(v);
    out[4 * n + gid] = simd_prefix_exclusive_sum(v);
    out[5 * n + gid] = simd_shuffle(v, ushort((lane * 7u + 3u) & 31u));
    out[6 * n + gid] = simd_shuffle_xor(v, ushort(5));
    out[7 * n + gid] = simd_shuffle_up(v, ushort(3));
    out[8 * n + gid] = simd_shuffle_down(v, ushort(3));
    out[9 * n + gid] = simd_broadcast(v, ushort(2));
    out[10 * n + gid] = float(uint(uint64_t(simd_ballot(v > 0.0f)) & 0xffffu));
    out[11 * n + gid] = float(uint(uint64_t(simd_ballot(v > 0.0f)) >> 16));
    out[12 * n + gid] = simd_any(v > 2.5f) ? 1.0f : 0.0f;
    out[13 * n + gid] = simd_all(v > -2.5f) ? 1.0f : 0.0f;
    out[14 * n + gid] = float(simd_sum(w));
    out[15 * n + gid] = float(simd_max(w));
    out[16 * n + gid] = float(simd_or(w) & 0xffffu);
    out[17 * n + gid] = float(simd_xor(w) & 0xffffu);
    out[18 * n + gid] = quad_sum(v);
    out[19 * n + gid] = simd_broadcast_first(v);
    out[20 * n + gid] = simd_is_first() ? 1.0f : 0.0f;
    out[21 * n + gid] = simd_shuffle_rotate_down(v, ushort(5));
    float2 f2 = simd_sum(float2(v, 2.0f * v));
    out[22 * n + gid] = f2.y;
    simdgroup_barrier(mem_flags::mem_none);
    out[23 * n + gid] = float(simd_prefix_exclusive_sum(w));
}

// C = A·B with one SIMD group per 8×8 tile of C, operands of type T.
// Rows of A and B are padded to multiples of 8 by the caller.
template <typename T>
kernel void matmul_sg(constant MatmulParams& p [[buffer(0)]],
                      const device T* a [[buffer(1)]],
                      const device T* b [[buffer(2)]],
                      device float* c [[buffer(3)]],
                      uint2 tg [[threadgroup_position_in_grid]]) {
    simdgroup_float8x8 acc = make_filled_simdgroup_matrix<float, 8, 8>(0.0f);
    for (uint k = 0; k < p.k; k += 8) {
        simdgroup_matrix<T, 8, 8> ma;
        simdgroup_matrix<T, 8, 8> mb;
        simdgroup_load(ma, a + ulong(tg.y) * 8 * p.k + k, p.k);
        if (p.b_transposed) {
            // b holds Bᵀ: [n, k].
            simdgroup_load(mb, b + ulong(tg.x) * 8 * p.k + k, p.k, ulong2(0, 0), true);
        } else {
            simdgroup_load(mb, b + ulong(k) * p.n + tg.x * 8, p.n);
        }
        simdgroup_multiply_accumulate(acc, ma, mb, acc);
    }
    // Scale through the lane's own elements, as kernels that post-process
    // accumulators in registers do.
    thread auto& el = acc.thread_elements();
    el *= p.alpha;
    simdgroup_store(acc, c + ulong(tg.y) * 8 * p.n + tg.x * 8, p.n);
}
template [[host_name("matmul_sg_f32")]] [[kernel]] decltype(matmul_sg<float>) matmul_sg<float>;
template [[host_name("matmul_sg_f16")]] [[kernel]] decltype(matmul_sg<half>) matmul_sg<half>;

// Histogram: threadgroup atomics per group, then device atomics.
kernel void histogram_u32(constant HistParams& p [[buffer(0)]],
                          const device uint* keys [[buffer(1)]],
                          device atomic_uint* bins [[buffer(2)]],
                          uint gid [[thread_position_in_grid]],
                          uint tid [[thread_index_in_threadgroup]],
                          uint nt [[threads_per_threadgroup]]) {
    threadgroup atomic_uint local[64];
    for (uint i = tid; i < p.bins; i += nt) {
        atomic_store_explicit(&local[i], 0u, memory_order_relaxed);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (gid < p.n) {
        atomic_fetch_add_explicit(&local[keys[gid] % p.bins], 1u, memory_order_relaxed);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint i = tid; i < p.bins; i += nt) {
        uint v = atomic_load_explicit(&local[i], memory_order_relaxed);
        if (v != 0) {
            atomic_fetch_add_explicit(&bins[i], v, memory_order_relaxed);
        }
    }
}

// Float atomics and min/max from many threadgroups.
kernel void atomic_misc(const device int* v [[buffer(0)]],
                        device atomic_int* minmax [[buffer(1)]],
                        device atomic_float* total [[buffer(2)]],
                        constant uint& n [[buffer(3)]],
                        uint gid [[thread_position_in_grid]]) {
    if (gid >= n) {
        return;
    }
    atomic_fetch_min_explicit(&minmax[0], v[gid], memory_order_relaxed);
    atomic_fetch_max_explicit(&minmax[1], v[gid], memory_order_relaxed);
    atomic_fetch_add_explicit(total, 0.5f, memory_order_relaxed);
}

// Writes every position attribute of every thread: 3D grid, 3D groups.
kernel void positions(device uint* out [[buffer(0)]],
                      uint3 gpos [[thread_position_in_grid]],
                      uint3 tgpos [[threadgroup_position_in_grid]],
                      ushort3 lpos [[thread_position_in_threadgroup]],
                      uint tid [[thread_index_in_threadgroup]],
                      ushort3 tpg [[threads_per_threadgroup]], // MSL: the type of thread_position_in_threadgroup
                      uint3 groups [[threadgroups_per_grid]],
                      uint3 grid [[threads_per_grid]],
                      uint sg [[simdgroup_index_in_threadgroup]],
                      uint lane [[thread_index_in_simdgroup]],
                      uint sgs [[simdgroups_per_threadgroup]],
                      uint width [[threads_per_simdgroup]]) {
    uint linear = (gpos.z * grid.y + gpos.y) * grid.x + gpos.x;
    device uint* o = out + linear * 16;
    o[0] = gpos.x;
    o[1] = gpos.y;
    o[2] = gpos.z;
    o[3] = tgpos.x;
    o[4] = tgpos.y;
    o[5] = tgpos.z;
    o[6] = lpos.x;
    o[7] = lpos.y;
    o[8] = lpos.z;
    o[9] = tid;
    o[10] = uint(tpg.x) * tpg.y * tpg.z;
    o[11] = groups.x * groups.y * groups.z;
    o[12] = sg;
    o[13] = lane;
    o[14] = sgs;
    o[15] = width;
}

// Conversions: float → bfloat (round to nearest even) and → half, and back.
kernel void convert(const device float* x [[buffer(0)]],
                    device ushort* bf_bits [[buffer(1)]],
                    device half* h [[buffer(2)]],
                    device float* back [[buffer(3)]],
                    uint gid [[thread_position_in_grid]]) {
    bfloat b = bfloat(x[gid]);
    bf_bits[gid] = as_type<ushort>(b);
    h[gid] = half(x[gid]);
    back[gid] = float(b) * 1.0h; // a half literal, rewritten by the pass
}

// Vectors, swizzles, packed types and math built-ins.
kernel void vectors(const device float4* in [[buffer(0)]],
                    const device packed_float3* p3 [[buffer(1)]],
                    device float4* out [[buffer(2)]],
                    uint gid [[thread_position_in_grid]]) {
    float4 v = in[gid];
    float3 q = p3[gid];
    float4 r = float4(v.yx, q.z, 1.0f);
    r.xy += v.zw * 2.0f;
    r.zw = max(r.zw, float2(0.5f));
    float2 s = select(float2(1.0f), float2(-1.0f), v.xy < 0.0f);
    r.x += dot(s, q.xy);
    r.w = fma(r.w, 2.0f, clamp(q.x, -1.0f, 1.0f));
    int2 iv = int2(v.xy * 10.0f);
    r.y += float(iv.x & 7) + float(clz(uint(gid) + 1u));
    out[gid] = r;
}

// A barrier only some threads reach: a deadlock the runner must report.
kernel void divergent_barrier(device float* out [[buffer(0)]],
                              uint tid [[thread_index_in_threadgroup]]) {
    if (tid == 3) {
        return;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tid] = 1.0f;
}

// Asks for more threadgroup memory than Apple GPUs have.
kernel void too_much_threadgroup(device float* out [[buffer(0)]],
                                 uint tid [[thread_index_in_threadgroup]]) {
    threadgroup float big[9000];
    big[tid] = 1.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[tid] = big[0];
}

// The last thread writes one element past the end of out.
kernel void write_past_end(device float* out [[buffer(0)]],
                           constant uint& n [[buffer(1)]],
                           uint gid [[thread_position_in_grid]]) {
    if (gid < n) {
        out[gid] = 1.0f;
    }
    if (gid == n + 64) {
        out[n] = 2.0f;
    }
}

// Locals beyond the fiber stack.
kernel void stack_hog(device float* out [[buffer(0)]],
                      uint tid [[thread_index_in_threadgroup]]) {
    volatile float big[20000];
    for (uint i = 0; i < 20000; i++) {
        big[i] = float(i + tid);
    }
    out[tid] = big[tid * 7];
}

// Q = (A·B)·C for 8×8 tiles: the first product, computed per lane, is the
// left operand of the second, so the runner must rebuild it from all lanes.
// threads may be 32 (one full SIMD group) or fewer (a partial one).
kernel void matmul_chain(const device float* a [[buffer(0)]],
                         const device float* b [[buffer(1)]],
                         const device float* c [[buffer(2)]],
                         device float* q [[buffer(3)]]) {
    simdgroup_float8x8 ma, mb, mc, p, r;
    simdgroup_load(ma, a);
    simdgroup_load(mb, b);
    simdgroup_load(mc, c);
    simdgroup_multiply(p, ma, mb);
    simdgroup_multiply(r, p, mc);
    simdgroup_store(r, q);
}

// A wide sweep of built-ins, one result each, for one SIMD group of 32.
// x holds quarters, so every expected value is exact.
kernel void builtins(const device float* x [[buffer(0)]],
                     device float* out [[buffer(1)]],
                     uint i [[thread_index_in_threadgroup]]) {
    threadgroup atomic_int slot;
    threadgroup atomic_uint cas_target;
    if (i == 0) {
        atomic_store_explicit(&slot, 0, memory_order_relaxed);
        atomic_store_explicit(&cas_target, 0u, memory_order_relaxed);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    float a = x[i];
    device float* o = out + i * 24;

    float4 v = float4(a, a + 1.0f, a + 2.0f, a + 3.0f);
    v.xy = v.yx;                                   // aliasing swizzle swap
    o[0] = v.x - v.y;                              // 1
    float3 c = cross(float3(1.0f, 0.0f, 0.0f), float3(0.0f, 1.0f, 0.0f));
    o[1] = c.z + c.x;                              // 1
    half4 h = half4(half(a), half(2.0f * a), half(3.0f), half(4.0f));
    o[2] = float(dot(h, half4(1.0h)));             // 3a + 7
    int4 iv = int4(3, -7, 5, int(a * 4.0f));
    o[3] = float((iv >> 1).y + (iv % 3).x + (iv & 1).z);  // -4 + 0 + 1
    uint2 u = as_type<uint2>(float2(1.0f, -2.0f));
    o[4] = float(u.x >> 16) + float(u.y >> 31);    // 16256 + 1
    o[5] = float(atomic_fetch_add_explicit(&slot, 1, memory_order_relaxed) < 32); // 1
    float4 cl = clamp(v, 0.0f, 1.0f);
    o[6] = cl.x + cl.w;
    float4 sel = select(float4(-1.0f), float4(2.0f), v > float4(0.0f));
    o[7] = sel.x + sel.y + sel.z + sel.w;
    o[8] = precise::sqrt(16.0f) + fast::exp(0.0f) + metal::abs(-2.5f);  // 7.5
    float4 mx = simd_max(v);
    o[9] = mx.z;                                   // max over lanes of a+2
    o[10] = float(simd_sum(half(a)));
    o[11] = quad_shuffle(a, ushort(1));
    packed_half4 ph = packed_half4(half4(half(1.0f), half(2.0f), half(a), half(4.0f)));
    o[12] = float(ph[2]) + float(sizeof(packed_half4)) + float(sizeof(half3)) * 10.0f;  // a + 8 + 80
    bfloat2 bv = bfloat2(a, 3.0f);
    o[13] = float(bv.y) + float(bv.x);             // 3 + a
    o[14] = length(float2(3.0f, 4.0f)) + distance(float2(1.0f), float2(1.0f));  // 5
    uint bits = 0x00f0u + i;
    o[15] = float(popcount(bits) + clz(bits) + ctz(0x100u) + (reverse_bits(1u) >> 31) + extract_bits(0xabcdu, 4u, 8u));
    o[16] = fract(a) + sign(a) + step(0.5f, a) + smoothstep(0.0f, 1.0f, 0.5f);
    o[17] = float(min(int(a * 4.0f), 3) + max(-1, abs(int(a * 4.0f))));
    uint expected = 0u;
    bool won = false;
    for (uint k = 0; k < 64 && !won; k++) {
        expected = atomic_load_explicit(&cas_target, memory_order_relaxed);
        won = atomic_compare_exchange_weak_explicit(&cas_target, &expected, expected + 1u, memory_order_relaxed, memory_order_relaxed);
    }
    o[18] = won ? 1.0f : 0.0f;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    o[19] = float(atomic_load_explicit(&cas_target, memory_order_relaxed));  // 32
    o[20] = float(atomic_exchange_explicit(&slot, 5, memory_order_relaxed) >= 5 ? 1 : 0) + float(all(v.zw > v.xy));
    short2 s2 = short2(ushort2(65535u, 2u));
    o[21] = float(s2.x) + float(s2.y);             // -1 + 2
    float2 m2 = max(v.xy, float2(a + 0.5f));
    o[22] = m2.x + m2.y;
    o[23] = fma(a, 2.0f, 1.0f) + mix(0.0f, 4.0f, 0.25f) + float(signbit(-1.0f)) + trunc(1.5f);
}

// Lanes leave at different points while the rest keep exchanging values:
// the last lane to arrive at a collective may be one that returns instead.
kernel void simd_after_exit(device float* out [[buffer(0)]],
                            uint lane [[thread_index_in_simdgroup]]) {
    float v = float(lane);
    float a = simd_sum(v);
    if (lane % 5 == 4) {
        return;
    }
    float b = simd_sum(v * 2.0f);
    if (lane > 20) {
        return;
    }
    float c = simd_shuffle_down(v, ushort(1));
    float d = simd_sum(v + 1.0f);
    out[lane * 4 + 0] = a;
    out[lane * 4 + 1] = b;
    out[lane * 4 + 2] = c;
    out[lane * 4 + 3] = d;
}

// Fill-shuffles, three-way min/max/median, type traits and quad positions.
kernel void extras(const device float* x [[buffer(0)]],
                   device float* out [[buffer(1)]],
                   uint lane [[thread_index_in_simdgroup]],
                   ushort qlane [[thread_index_in_quadgroup]],
                   uint quad [[quadgroup_index_in_threadgroup]]) {
    float v = x[lane];
    device float* o = out + lane * 8;
    o[0] = simd_shuffle_and_fill_down(v, -v, ushort(3));
    o[1] = simd_shuffle_and_fill_up(v, -v, ushort(2), ushort(8));
    o[2] = max3(v, 1.0f, -1.0f) + min3(v, 1.0f, -1.0f) + median3(v, 1.0f, -1.0f);
    o[3] = is_same_v<conditional_t<true, float, int>, float> ? 1.0f : 0.0f;
    o[4] = float(qlane) + 10.0f * float(quad);
    o[5] = fmax3(v, 0.5f, 0.25f);
    o[6] = 0.0f;
    o[7] = 0.0f;
}

// Declares its own threadgroup size limit.
[[max_total_threads_per_threadgroup(64)]]
kernel void limited(device float* out [[buffer(0)]],
                    uint i [[thread_position_in_grid]]) {
    out[i] = 1.0f;
}

// Many collectives and barriers, for measuring the runner's switching cost.
kernel void collectives(device float* out [[buffer(0)]],
                        uint tid [[thread_index_in_threadgroup]],
                        uint tg [[threadgroup_position_in_grid]]) {
    float v = float(tid);
    for (uint i = 0; i < 50; i++) {
        v = simd_sum(v) * 0.001f + float(i);
        threadgroup_barrier(mem_flags::mem_none);
    }
    out[tg * 128 + tid] = v;
}

// Reads back floats before its buffer's start (the test passes one page's
// worth): inside the guard page for any buffer shorter than a page.
kernel void read_before_start(device float* out [[buffer(0)]],
                              constant uint& back [[buffer(1)]],
                              uint i [[thread_position_in_grid]]) {
    out[i] = out[int(i) - int(back)];
}
