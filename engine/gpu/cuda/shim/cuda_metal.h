// cuda_metal.h: the part of Metal Shading Language that the project's
// kernels use, for NVRTC. The .metal sources reach it through the host
// emulator's source pass (metalkernels/host: attributes and address-space
// keywords blanked, threadgroup variables rewritten), compiled with
// -default-device, so every function here and in the kernels is a device
// function without saying so.
//
// Semantics follow the emulator's shim (metalkernels/host/shim/emu_metal.h)
// where the kernels can tell: SIMD groups are CUDA warps of 32 lanes;
// reductions combine lanes pairwise (lane 2i with 2i+1, then pairs of
// pairs), the emulator's fixed tree; simdgroup matrices keep each lane's two
// elements in Apple's layout and multiply with f32 accumulation, k in order,
// multiply then add (the program is built with --fmad=false, as the
// emulator's with -ffp-contract=off).
#pragma once

#define __METAL_VERSION__ 310
#define __METAL_MACOS__ 1

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;

#define FLT_MAX 3.402823466e+38f
#define FLT_MIN 1.175494351e-38f
#define FLT_EPSILON 1.192092896e-07f
#define MAXFLOAT FLT_MAX
#define HALF_MAX 65504.0f
#define M_PI_F 3.14159265358979323846f
#define M_E_F 2.71828182845904523536f
#define M_LN2_F 0.693147180559945309417f
#define M_LOG2E_F 1.44269504088896340736f
#define M_SQRT2_F 1.41421356237309504880f
#define M_1_PI_F 0.318309886183790671538f
#define UINT_MAX 0xffffffffu
#define INT_MAX 2147483647
#define USHRT_MAX 0xffff

namespace metal {

// ---------------------------------------------------------------- traits

template <class T, T v>
struct integral_constant {
    static constexpr T value = v;
};
typedef integral_constant<bool, true> true_type;
typedef integral_constant<bool, false> false_type;
template <bool B, class T = void>
struct enable_if {};
template <class T>
struct enable_if<true, T> { typedef T type; };
template <bool B, class T = void>
using enable_if_t = typename enable_if<B, T>::type;
template <bool B, class T, class F>
struct conditional { typedef T type; };
template <class T, class F>
struct conditional<false, T, F> { typedef F type; };
template <bool B, class T, class F>
using conditional_t = typename conditional<B, T, F>::type;
template <class A, class B>
struct is_same : false_type {};
template <class A>
struct is_same<A, A> : true_type {};
template <class A, class B>
constexpr bool is_same_v = is_same<A, B>::value;
template <class T>
struct remove_cv { typedef T type; };
template <class T>
struct remove_cv<const T> { typedef T type; };
template <class T>
struct remove_cv<volatile T> { typedef T type; };
template <class T>
struct remove_cv<const volatile T> { typedef T type; };
template <class T>
using remove_cv_t = typename remove_cv<T>::type;

// ---------------------------------------------------------------- half

// half is 16-bit storage: conversions round to nearest even (the PTX cvt
// instructions); arithmetic happens on the float it converts to.
struct half {
    ushort bits;
    half() = default;
    half(float f) { asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(f)); }
    half(int i) : half(float(i)) {}
    half(uint i) : half(float(i)) {}
    operator float() const {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits));
        return f;
    }
};

struct bfloat_t {
    ushort bits;
    bfloat_t() = default;
    bfloat_t(float f) {
        uint u = __float_as_uint(f);
        if ((u & 0x7fffffffu) > 0x7f800000u) {
            bits = ushort((u >> 16) | 0x40u);
            return;
        }
        u += 0x7fffu + ((u >> 16) & 1u);
        bits = ushort(u >> 16);
    }
    operator float() const { return __uint_as_float(uint(bits) << 16); }
};

template <class X>
struct is_scalar : integral_constant<bool, false> {};
#define CU_SCALAR(T) \
    template <>      \
    struct is_scalar<T> : true_type {};
CU_SCALAR(bool)
CU_SCALAR(char)
CU_SCALAR(signed char)
CU_SCALAR(uchar)
CU_SCALAR(short)
CU_SCALAR(ushort)
CU_SCALAR(int)
CU_SCALAR(uint)
CU_SCALAR(long)
CU_SCALAR(ulong)
CU_SCALAR(long long)
CU_SCALAR(unsigned long long)
CU_SCALAR(float)
CU_SCALAR(half)
CU_SCALAR(bfloat_t)
#undef CU_SCALAR

// ---------------------------------------------------------------- vectors

template <class T, int N>
struct vec;

template <class T>
struct alignas(sizeof(T) * 2) vec<T, 2> {
    T x, y;
    vec() = default;
    explicit vec(T s) : x(s), y(s) {}
    template <class A, class B>
    vec(A a, B b) : x(T(a)), y(T(b)) {}
    template <class U>
    explicit vec(const vec<U, 2>& o) : x(T(o.x)), y(T(o.y)) {}
    T& operator[](int i) { return (&x)[i]; }
    const T& operator[](int i) const { return (&x)[i]; }
};
template <class T>
struct alignas(sizeof(T) * 4) vec<T, 3> {
    T x, y, z;
    vec() = default;
    explicit vec(T s) : x(s), y(s), z(s) {}
    template <class A, class B, class C>
    vec(A a, B b, C c) : x(T(a)), y(T(b)), z(T(c)) {}
    template <class U>
    explicit vec(const vec<U, 3>& o) : x(T(o.x)), y(T(o.y)), z(T(o.z)) {}
    T& operator[](int i) { return (&x)[i]; }
    const T& operator[](int i) const { return (&x)[i]; }
};
template <class T>
struct alignas(sizeof(T) * 4) vec<T, 4> {
    T x, y, z, w;
    vec() = default;
    explicit vec(T s) : x(s), y(s), z(s), w(s) {}
    template <class A, class B, class C, class D>
    vec(A a, B b, C c, D d) : x(T(a)), y(T(b)), z(T(c)), w(T(d)) {}
    template <class U>
    explicit vec(const vec<U, 4>& o) : x(T(o.x)), y(T(o.y)), z(T(o.z)), w(T(o.w)) {}
    vec(const vec<T, 2>& a, const vec<T, 2>& b) : x(a.x), y(a.y), z(b.x), w(b.y) {}
    T& operator[](int i) { return (&x)[i]; }
    const T& operator[](int i) const { return (&x)[i]; }
};

#define CU_VEC_OP(op)                                                                    \
    template <class T, int N>                                                            \
    inline vec<T, N> operator op(const vec<T, N>& a, const vec<T, N>& b) {               \
        vec<T, N> r;                                                                     \
        for (int i = 0; i < N; i++) r[i] = a[i] op b[i];                                 \
        return r;                                                                        \
    }                                                                                    \
    template <class T, int N, class S, enable_if_t<is_scalar<S>::value, int> = 0>        \
    inline vec<T, N> operator op(const vec<T, N>& a, S b) {                              \
        vec<T, N> r;                                                                     \
        for (int i = 0; i < N; i++) r[i] = a[i] op T(b);                                 \
        return r;                                                                        \
    }                                                                                    \
    template <class T, int N, class S, enable_if_t<is_scalar<S>::value, int> = 0>        \
    inline vec<T, N> operator op(S a, const vec<T, N>& b) {                              \
        vec<T, N> r;                                                                     \
        for (int i = 0; i < N; i++) r[i] = T(a) op b[i];                                 \
        return r;                                                                        \
    }                                                                                    \
    template <class T, int N, class B>                                                   \
    inline vec<T, N>& operator op##=(vec<T, N>& a, const B& b) { return a = a op b; }
CU_VEC_OP(+)
CU_VEC_OP(-)
CU_VEC_OP(*)
CU_VEC_OP(/)
CU_VEC_OP(&)
CU_VEC_OP(|)
CU_VEC_OP(^)
CU_VEC_OP(<<)
CU_VEC_OP(>>)
#undef CU_VEC_OP
template <class T, int N>
inline vec<T, N> operator-(const vec<T, N>& a) {
    vec<T, N> r;
    for (int i = 0; i < N; i++) r[i] = -a[i];
    return r;
}

}  // namespace metal

// CUDA's own float4 and friends are declared before this header (NVRTC's
// built-ins), so Metal's names are macros for the shim's vectors.
#define float2 ::metal::vec<float, 2>
#define float3 ::metal::vec<float, 3>
#define float4 ::metal::vec<float, 4>
#define half2 ::metal::vec<::metal::half, 2>
#define half3 ::metal::vec<::metal::half, 3>
#define half4 ::metal::vec<::metal::half, 4>
#define int2 ::metal::vec<int, 2>
#define int3 ::metal::vec<int, 3>
#define int4 ::metal::vec<int, 4>
#define uint2 ::metal::vec<uint, 2>
#define uint3 ::metal::vec<uint, 3>
#define uint4 ::metal::vec<uint, 4>
#define short2 ::metal::vec<short, 2>
#define short3 ::metal::vec<short, 3>
#define short4 ::metal::vec<short, 4>
#define ushort2 ::metal::vec<ushort, 2>
#define ushort3 ::metal::vec<ushort, 3>
#define ushort4 ::metal::vec<ushort, 4>
#define char2 ::metal::vec<char, 2>
#define char3 ::metal::vec<char, 3>
#define char4 ::metal::vec<char, 4>
#define uchar2 ::metal::vec<uchar, 2>
#define uchar3 ::metal::vec<uchar, 3>
#define uchar4 ::metal::vec<uchar, 4>
#define long2 ::metal::vec<long, 2>
#define long3 ::metal::vec<long, 3>
#define long4 ::metal::vec<long, 4>
#define ulong2 ::metal::vec<ulong, 2>
#define ulong3 ::metal::vec<ulong, 3>
#define ulong4 ::metal::vec<ulong, 4>
#define bool2 ::metal::vec<bool, 2>
#define bool3 ::metal::vec<bool, 3>
#define bool4 ::metal::vec<bool, 4>
typedef metal::half half;
typedef metal::bfloat_t bfloat;

namespace metal {

// ---------------------------------------------------------------- as_type

template <class T, class U>
inline T as_type(const U& u) {
    static_assert(sizeof(T) == sizeof(U), "as_type needs types of one size");
    T t;
    memcpy(&t, &u, sizeof(T));
    return t;
}

// ---------------------------------------------------------------- math

// CUDA's own float overloads (exp(float) and friends, min and max of
// every scalar type) are global: they are named here, so that calls under
// `using namespace metal` find one function, and the shim adds the half and
// vector forms.
#define CU_F1(name, fn)                                   \
    using ::name;                                         \
    inline float name(half x) { return fn(float(x)); }    \
    template <class T, int N>                             \
    inline vec<T, N> name(const vec<T, N>& v) {           \
        vec<T, N> r;                                      \
        for (int i = 0; i < N; i++) r[i] = T(fn(float(v[i]))); \
        return r;                                         \
    }
CU_F1(exp, ::expf)
CU_F1(exp2, ::exp2f)
CU_F1(log, ::logf)
CU_F1(log2, ::log2f)
CU_F1(log10, ::log10f)
CU_F1(sqrt, ::sqrtf)
CU_F1(rsqrt, ::rsqrtf)
CU_F1(sin, ::sinf)
CU_F1(cos, ::cosf)
CU_F1(tan, ::tanf)
CU_F1(tanh, ::tanhf)
CU_F1(sinh, ::sinhf)
CU_F1(cosh, ::coshf)
CU_F1(asin, ::asinf)
CU_F1(acos, ::acosf)
CU_F1(atan, ::atanf)
CU_F1(floor, ::floorf)
CU_F1(ceil, ::ceilf)
CU_F1(round, ::roundf)
CU_F1(rint, ::rintf)
CU_F1(trunc, ::truncf)
CU_F1(fabs, ::fabsf)
#undef CU_F1
inline float exp10(float x) { return ::exp10f(x); }
inline float fract(float x) { return x - ::floorf(x); }
using ::atan2;
using ::copysign;
using ::fma;
using ::fmax;
using ::fmin;
using ::fmod;
using ::pow;
inline float powr(float a, float b) { return ::powf(a, b); }
inline float mad(float a, float b, float c) { return ::fmaf(a, b, c); }
inline float divide(float a, float b) { return a / b; }
inline float recip(float a) { return 1.0f / a; }
inline float saturate(float x) { return ::fminf(::fmaxf(x, 0.0f), 1.0f); }
inline float sign(float x) { return x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : x; }

// abs, min, max, clamp: floats as Metal (fmin/fmax), integers plainly.
using ::abs;
using ::max;
using ::min;
template <class T, enable_if_t<is_scalar<T>::value, int> = 0>
inline T min(T a, T b) { return b < a ? b : a; }
template <class T, enable_if_t<is_scalar<T>::value, int> = 0>
inline T max(T a, T b) { return a < b ? b : a; }
inline float clamp(float x, float lo, float hi) { return min(max(x, lo), hi); }
template <class T, enable_if_t<is_scalar<T>::value, int> = 0>
inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }
template <class T, int N>
inline vec<T, N> min(const vec<T, N>& a, const vec<T, N>& b) {
    vec<T, N> r;
    for (int i = 0; i < N; i++) r[i] = min(a[i], b[i]);
    return r;
}
template <class T, int N>
inline vec<T, N> max(const vec<T, N>& a, const vec<T, N>& b) {
    vec<T, N> r;
    for (int i = 0; i < N; i++) r[i] = max(a[i], b[i]);
    return r;
}
template <class T, enable_if_t<is_scalar<T>::value, int> = 0>
inline T select(T a, T b, bool c) { return c ? b : a; }
template <class T, int N>
inline T dot(const vec<T, N>& a, const vec<T, N>& b) {
    T s = a[0] * b[0];
    for (int i = 1; i < N; i++) s += a[i] * b[i];
    return s;
}
inline uint popcount(uint x) { return uint(__popc(x)); }
inline uint clz(uint x) { return uint(__clz(int(x))); }
inline uint ctz(uint x) { return x == 0 ? 32u : uint(__ffs(int(x)) - 1); }
inline uint mulhi(uint a, uint b) { return __umulhi(a, b); }

namespace precise {
using metal::abs; using metal::cos; using metal::exp; using metal::log; using metal::max;
using metal::min; using metal::rsqrt; using metal::sin; using metal::sqrt; using metal::tanh;
using metal::exp2; using metal::log2; using metal::pow; using metal::floor; using metal::ceil;
using metal::fma; using metal::fmax; using metal::fmin; using metal::clamp; using metal::divide;
}  // namespace precise
namespace fast {
using namespace precise;
}  // namespace fast

template <class T>
struct numeric_limits;
template <>
struct numeric_limits<float> {
    static constexpr float max() { return FLT_MAX; }
    static constexpr float min() { return FLT_MIN; }
    static constexpr float lowest() { return -FLT_MAX; }
    static constexpr float epsilon() { return FLT_EPSILON; }
};
template <>
struct numeric_limits<uint> {
    static constexpr uint max() { return 0xffffffffu; }
    static constexpr uint min() { return 0u; }
    static constexpr uint lowest() { return 0u; }
};
template <>
struct numeric_limits<int> {
    static constexpr int max() { return 2147483647; }
    static constexpr int min() { return -2147483647 - 1; }
    static constexpr int lowest() { return -2147483647 - 1; }
};

// ---------------------------------------------------------------- sync

enum class mem_flags : unsigned { mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4 };
inline mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags(unsigned(a) | unsigned(b)); }
inline void threadgroup_barrier(mem_flags = mem_flags::mem_none) { __syncthreads(); }
inline void simdgroup_barrier(mem_flags = mem_flags::mem_none) { __syncwarp(__activemask()); }

// ---------------------------------------------------------------- SIMD groups

namespace detail {
inline uint lane() {
    uint l;
    asm("mov.u32 %0, %%laneid;" : "=r"(l));
    return l;
}
inline float shfl(float v, uint src, uint mask) { return __shfl_sync(mask, v, src); }
inline int shfl(int v, uint src, uint mask) { return __shfl_sync(mask, v, src); }
inline uint shfl(uint v, uint src, uint mask) { return __shfl_sync(mask, v, src); }
inline ushort shfl(ushort v, uint src, uint mask) { return ushort(__shfl_sync(mask, uint(v), src)); }
inline short shfl(short v, uint src, uint mask) { return short(__shfl_sync(mask, int(v), src)); }
inline uchar shfl(uchar v, uint src, uint mask) { return uchar(__shfl_sync(mask, uint(v), src)); }
inline bool shfl(bool v, uint src, uint mask) { return __shfl_sync(mask, int(v), src) != 0; }
inline half shfl(half v, uint src, uint mask) {
    half r;
    r.bits = ushort(__shfl_sync(mask, uint(v.bits), src));
    return r;
}
inline ulong shfl(ulong v, uint src, uint mask) {
    return ulong(__shfl_sync(mask, (unsigned long long)v, src));
}
template <class T, int N>
inline vec<T, N> shfl(const vec<T, N>& v, uint src, uint mask) {
    vec<T, N> r;
    for (int i = 0; i < N; i++) r[i] = shfl(v[i], src, mask);
    return r;
}
struct Add {
    template <class T>
    T operator()(const T& a, const T& b) const { return a + b; }
};
struct Mul {
    template <class T>
    T operator()(const T& a, const T& b) const { return a * b; }
};
struct Max {
    template <class T>
    T operator()(const T& a, const T& b) const { return max(a, b); }
};
struct Min {
    template <class T>
    T operator()(const T& a, const T& b) const { return min(a, b); }
};
struct And {
    template <class T>
    T operator()(const T& a, const T& b) const { return a & b; }
};
struct Or {
    template <class T>
    T operator()(const T& a, const T& b) const { return a | b; }
};
struct Xor {
    template <class T>
    T operator()(const T& a, const T& b) const { return a ^ b; }
};
// reduce: the butterfly over lanes 1, 2, 4, 8, 16 apart is the emulator's
// tree (pairs, then pairs of pairs); lanes that have returned are skipped.
// The lower lane's value is always the left operand, so every lane forms
// the same expression and gets the same bits.
template <class T, class F>
inline T reduce(T v, F f) {
    uint mask = __activemask();
    uint l = lane();
    for (uint off = 1; off < 32; off <<= 1) {
        T o = shfl(v, l ^ off, mask);
        if ((mask >> (l ^ off)) & 1u) v = (l & off) ? f(o, v) : f(v, o);
    }
    return v;
}
template <class T, class F>
inline T scan(T v, bool inclusive, T identity, F f) {
    uint mask = __activemask();
    uint l = lane();
    T acc = v;
    for (uint off = 1; off < 32; off <<= 1) {
        T o = shfl(acc, l >= off ? l - off : l, mask);
        if (l >= off && ((mask >> (l - off)) & 1u)) acc = f(o, acc);
    }
    if (inclusive) return acc;
    T prev = shfl(acc, l > 0 ? l - 1 : 0, mask);
    return l == 0 ? identity : prev;
}
}  // namespace detail

template <class T>
inline T simd_sum(T v) { return detail::reduce(v, detail::Add()); }
template <class T>
inline T simd_product(T v) { return detail::reduce(v, detail::Mul()); }
template <class T>
inline T simd_max(T v) { return detail::reduce(v, detail::Max()); }
template <class T>
inline T simd_min(T v) { return detail::reduce(v, detail::Min()); }
template <class T>
inline T simd_and(T v) { return detail::reduce(v, detail::And()); }
template <class T>
inline T simd_or(T v) { return detail::reduce(v, detail::Or()); }
template <class T>
inline T simd_xor(T v) { return detail::reduce(v, detail::Xor()); }
template <class T>
inline T simd_prefix_inclusive_sum(T v) { return detail::scan(v, true, T(0), detail::Add()); }
template <class T>
inline T simd_prefix_exclusive_sum(T v) { return detail::scan(v, false, T(0), detail::Add()); }

// Shuffles from a lane outside the SIMD group or not taking part leave the
// caller's own value.
template <class T>
inline T simd_shuffle(T v, ushort src) {
    uint mask = __activemask();
    T o = detail::shfl(v, uint(src) & 31u, mask);
    return (src < 32 && ((mask >> src) & 1u)) ? o : v;
}
template <class T>
inline T simd_broadcast(T v, ushort src) { return simd_shuffle(v, src); }
template <class T>
inline T simd_shuffle_xor(T v, ushort m) { return simd_shuffle(v, ushort(detail::lane() ^ m)); }
template <class T>
inline T simd_shuffle_up(T v, ushort d) {
    uint l = detail::lane();
    uint mask = __activemask();
    T o = detail::shfl(v, l >= d ? l - d : l, mask);
    return l >= d && ((mask >> (l - d)) & 1u) ? o : v;
}
template <class T>
inline T simd_shuffle_down(T v, ushort d) {
    uint l = detail::lane();
    uint mask = __activemask();
    T o = detail::shfl(v, l + d < 32 ? l + d : l, mask);
    return l + d < 32 && ((mask >> (l + d)) & 1u) ? o : v;
}
template <class T>
inline T simd_broadcast_first(T v) {
    uint mask = __activemask();
    return detail::shfl(v, uint(__ffs(int(mask)) - 1), mask);
}
inline bool simd_any(bool b) { return __any_sync(__activemask(), b) != 0; }
inline bool simd_all(bool b) { return __all_sync(__activemask(), b) != 0; }
inline bool simd_is_first() { return detail::lane() == uint(__ffs(int(__activemask())) - 1); }

// ---------------------------------------------------------------- simdgroup matrices

// Each lane holds its two elements in Apple's layout (MLX's steel kernels
// document it): lane l owns row (q & 4) + (l / 2) % 4 and columns c, c + 1
// with c = (q & 2) * 2 + (l % 2) * 2, q = l / 4. In bits of l
// (b4 b3 b2 b1 b0): row = 4 b4 + 2 b2 + b1, col = 4 b3 + 2 b0.
template <class T, int R, int C>
struct simdgroup_matrix {
    static_assert(R == 8 && C == 8, "simdgroup_matrix is 8x8");
    T e0, e1;
    simdgroup_matrix() = default;
    explicit simdgroup_matrix(T v) : e0(v), e1(v) {}
    static void owned(uint l, int& row, int& col) {
        uint q = l / 4;
        row = int((q & 4) + (l / 2) % 4);
        col = int((q & 2) * 2 + (l % 2) * 2);
    }
    // owner is the lane holding (row, col) (col even: that lane's first).
    static uint owner(uint row, uint col) {
        return ((row >> 2) & 1u) << 4 | ((col >> 2) & 1u) << 3 | ((row >> 1) & 1u) << 2 | (row & 1u) << 1 |
               ((col >> 1) & 1u);
    }
    vec<T, 2> thread_elements() const { return vec<T, 2>(e0, e1); }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat_t, 8, 8> simdgroup_bfloat8x8;

template <class T, int R, int C>
inline simdgroup_matrix<T, R, C> make_filled_simdgroup_matrix(T v) {
    return simdgroup_matrix<T, R, C>(v);
}

template <class T, class S>
inline void simdgroup_load(simdgroup_matrix<T, 8, 8>& d, const S* src, ulong elements_per_row = 8,
                           vec<ulong, 2> origin = vec<ulong, 2>(0ul), bool transpose = false) {
    const S* base = src + origin.y * elements_per_row + origin.x;
    int row, col;
    simdgroup_matrix<T, 8, 8>::owned(detail::lane(), row, col);
    if (transpose) {
        d.e0 = T(base[ulong(col) * elements_per_row + ulong(row)]);
        d.e1 = T(base[ulong(col + 1) * elements_per_row + ulong(row)]);
    } else {
        d.e0 = T(base[ulong(row) * elements_per_row + ulong(col)]);
        d.e1 = T(base[ulong(row) * elements_per_row + ulong(col + 1)]);
    }
}

template <class T, class S>
inline void simdgroup_store(const simdgroup_matrix<T, 8, 8>& a, S* dst, ulong elements_per_row = 8,
                            vec<ulong, 2> origin = vec<ulong, 2>(0ul), bool transpose = false) {
    S* base = dst + origin.y * elements_per_row + origin.x;
    int row, col;
    simdgroup_matrix<T, 8, 8>::owned(detail::lane(), row, col);
    if (transpose) {
        base[ulong(col) * elements_per_row + ulong(row)] = S(a.e0);
        base[ulong(col + 1) * elements_per_row + ulong(row)] = S(a.e1);
    } else {
        base[ulong(row) * elements_per_row + ulong(col)] = S(a.e0);
        base[ulong(row) * elements_per_row + ulong(col + 1)] = S(a.e1);
    }
}

// d = a·b + c with f32 accumulation, k in order (multiply, then add): a's
// row and b's columns come from the lanes that own them.
template <class D, class A, class B, class C>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<D, 8, 8>& d, const simdgroup_matrix<A, 8, 8>& a,
                                          const simdgroup_matrix<B, 8, 8>& b,
                                          const simdgroup_matrix<C, 8, 8>& c) {
    int row, col;
    simdgroup_matrix<D, 8, 8>::owned(detail::lane(), row, col);
    float a0 = float(a.e0), a1 = float(a.e1), b0 = float(b.e0), b1 = float(b.e1);
    float r0 = float(c.e0), r1 = float(c.e1);
#pragma unroll
    for (uint k = 0; k < 8; k++) {
        uint la = simdgroup_matrix<A, 8, 8>::owner(uint(row), k & ~1u);
        float av = __shfl_sync(0xffffffffu, (k & 1u) ? a1 : a0, la);
        uint lb = simdgroup_matrix<B, 8, 8>::owner(k, uint(col));
        float bv0 = __shfl_sync(0xffffffffu, b0, lb);
        float bv1 = __shfl_sync(0xffffffffu, b1, lb);
        r0 += av * bv0;
        r1 += av * bv1;
    }
    d.e0 = D(r0);
    d.e1 = D(r1);
}

template <class D, class A, class B>
inline void simdgroup_multiply(simdgroup_matrix<D, 8, 8>& d, const simdgroup_matrix<A, 8, 8>& a,
                               const simdgroup_matrix<B, 8, 8>& b) {
    simdgroup_multiply_accumulate(d, a, b, simdgroup_matrix<D, 8, 8>(D(0.0f)));
}

// ---------------------------------------------------------------- atomics

enum memory_order { memory_order_relaxed, memory_order_acquire, memory_order_release, memory_order_acq_rel, memory_order_seq_cst };

template <class T>
struct atomic {
    T v;
};
typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<float> atomic_float;

template <class T, class U>
inline void atomic_store_explicit(volatile atomic<T>* o, U v, memory_order = memory_order_relaxed) {
    atomicExch((T*)&o->v, T(v));
}
template <class T>
inline T atomic_load_explicit(const volatile atomic<T>* o, memory_order = memory_order_relaxed) {
    return o->v;
}
template <class T, class U>
inline T atomic_exchange_explicit(volatile atomic<T>* o, U v, memory_order = memory_order_relaxed) {
    return atomicExch((T*)&o->v, T(v));
}
template <class T, class U>
inline T atomic_fetch_add_explicit(volatile atomic<T>* o, U v, memory_order = memory_order_relaxed) {
    return atomicAdd((T*)&o->v, T(v));
}
template <class T, class U>
inline T atomic_fetch_sub_explicit(volatile atomic<T>* o, U v, memory_order = memory_order_relaxed) {
    return atomicSub((T*)&o->v, T(v));
}
template <class T, class U>
inline T atomic_fetch_max_explicit(volatile atomic<T>* o, U v, memory_order = memory_order_relaxed) {
    return atomicMax((T*)&o->v, T(v));
}
template <class T, class U>
inline T atomic_fetch_min_explicit(volatile atomic<T>* o, U v, memory_order = memory_order_relaxed) {
    return atomicMin((T*)&o->v, T(v));
}
template <class T, class U>
inline T atomic_fetch_or_explicit(volatile atomic<T>* o, U v, memory_order = memory_order_relaxed) {
    return atomicOr((T*)&o->v, T(v));
}
template <class T, class U>
inline T atomic_fetch_and_explicit(volatile atomic<T>* o, U v, memory_order = memory_order_relaxed) {
    return atomicAnd((T*)&o->v, T(v));
}
template <class T, class U>
inline T atomic_fetch_xor_explicit(volatile atomic<T>* o, U v, memory_order = memory_order_relaxed) {
    return atomicXor((T*)&o->v, T(v));
}
template <class T>
inline bool atomic_compare_exchange_weak_explicit(volatile atomic<T>* o, T* expected, T desired, memory_order,
                                                  memory_order) {
    T old = atomicCAS((T*)&o->v, *expected, desired);
    if (old == *expected) return true;
    *expected = old;
    return false;
}

}  // namespace metal

// ---------------------------------------------------------------- entry points

namespace emu {
// The kernel's arguments, passed by value: [[buffer(n)]] addresses (setBytes
// data is copied into device memory by the host) and [[threadgroup(n)]]
// offsets into the dynamic shared memory.
struct Args {
    unsigned long long buf[31];
    unsigned int tgoff[31];
};
struct BufArg {
    void* p;
    template <class T>
    operator T*() const { return static_cast<T*>(p); }
    template <class T>
    operator T&() const { return *static_cast<T*>(p); }
};
extern __shared__ unsigned char dyn_shared[];
inline BufArg buf(const Args& a, int i) { return BufArg{reinterpret_cast<void*>(a.buf[i])}; }
inline BufArg tgbuf(const Args& a, int i) { return BufArg{dyn_shared + a.tgoff[i]}; }

struct PosArg {
    uint x, y, z;
    operator uint() const { return x; }
    operator ushort() const { return ushort(x); }
    operator int() const { return int(x); }
    operator uint2() const { return uint2(x, y); }
    operator uint3() const { return uint3(x, y, z); }
    operator ushort2() const { return ushort2(x, y); }
    operator ushort3() const { return ushort3(x, y, z); }
};
enum Pos {
    kThreadPositionInGrid,
    kThreadgroupPositionInGrid,
    kThreadPositionInThreadgroup,
    kThreadIndexInThreadgroup,
    kThreadsPerThreadgroup,
    kThreadgroupsPerGrid,
    kThreadsPerGrid,
    kSimdgroupIndexInThreadgroup,
    kThreadIndexInSimdgroup,
    kSimdgroupsPerThreadgroup,
    kThreadsPerSimdgroup,
    kThreadIndexInQuadgroup,
    kQuadgroupIndexInThreadgroup,
};
inline uint tid() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
inline PosArg pos(Pos k) {
    switch (k) {
    case kThreadPositionInGrid:
        return PosArg{blockIdx.x * blockDim.x + threadIdx.x, blockIdx.y * blockDim.y + threadIdx.y,
                      blockIdx.z * blockDim.z + threadIdx.z};
    case kThreadgroupPositionInGrid: return PosArg{blockIdx.x, blockIdx.y, blockIdx.z};
    case kThreadPositionInThreadgroup: return PosArg{threadIdx.x, threadIdx.y, threadIdx.z};
    case kThreadIndexInThreadgroup: return PosArg{tid(), 0, 0};
    case kThreadsPerThreadgroup: return PosArg{blockDim.x, blockDim.y, blockDim.z};
    case kThreadgroupsPerGrid: return PosArg{gridDim.x, gridDim.y, gridDim.z};
    case kThreadsPerGrid:
        return PosArg{gridDim.x * blockDim.x, gridDim.y * blockDim.y, gridDim.z * blockDim.z};
    case kSimdgroupIndexInThreadgroup: return PosArg{tid() / 32, 0, 0};
    case kThreadIndexInSimdgroup: return PosArg{tid() % 32, 0, 0};
    case kSimdgroupsPerThreadgroup: return PosArg{(blockDim.x * blockDim.y * blockDim.z + 31) / 32, 0, 0};
    case kThreadsPerSimdgroup: return PosArg{32, 0, 0};
    case kThreadIndexInQuadgroup: return PosArg{tid() % 4, 0, 0};
    case kQuadgroupIndexInThreadgroup: return PosArg{tid() / 4, 0, 0};
    }
    return PosArg{0, 0, 0};
}
}  // namespace emu
