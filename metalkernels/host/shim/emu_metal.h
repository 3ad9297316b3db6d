// emu_metal.h: Metal Shading Language's types and built-ins as C++17, so that
// the project's .metal sources compile unchanged (after the source pass in
// ../pass.go) with the system C++ compiler and run on the fiber runner.
//
// Layout follows MSL: a 3-component vector occupies 4 elements, vectors are
// aligned to their size, packed_* vectors are tight; half is _Float16; bfloat
// is 16-bit storage with f32 arithmetic (float→bfloat rounds to nearest
// even). Everything a kernel can name lives in namespace metal (kernels say
// `using namespace metal;`); the scalar and vector type names are global, as
// in MSL. The SIMD-group functions exchange values through the SIMD group's
// slot array in the runner (emu_simd_xchg), which is a barrier for the 32
// lanes; reductions combine lanes in a fixed order so that results never
// depend on which fiber ran first.
#pragma once

#include <cfloat>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <tuple>
#include <type_traits>

#include "emu_runtime.h"
#include "emu_swizzles.h"

// Kernels that test the language version see MSL 3.1 on macOS, the
// project's floor.
#ifndef __METAL_VERSION__
#define __METAL_VERSION__ 310
#endif
#ifndef __METAL_MACOS__
#define __METAL_MACOS__ 1
#endif

typedef unsigned char uchar;
typedef unsigned short ushort;
typedef unsigned int uint;
typedef unsigned long ulong;
typedef _Float16 half;

namespace metal {

// ---------------------------------------------------------------- bfloat

struct bfloat_t {
    uint16_t bits;
    bfloat_t() = default;
    // Round to nearest even, as Metal, torch and the Go side do; NaN stays a
    // quiet NaN.
    bfloat_t(float f) {
        uint32_t u;
        __builtin_memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u) {
            bits = uint16_t((u >> 16) | 0x40u);
            return;
        }
        u += 0x7fffu + ((u >> 16) & 1u);
        bits = uint16_t(u >> 16);
    }
    bfloat_t(double d) : bfloat_t(float(d)) {}
    bfloat_t(half h) : bfloat_t(float(h)) {}
    bfloat_t(int i) : bfloat_t(float(i)) {}
    bfloat_t(unsigned i) : bfloat_t(float(i)) {}
    operator float() const {
        uint32_t u = uint32_t(bits) << 16;
        float f;
        __builtin_memcpy(&f, &u, 4);
        return f;
    }
    template <class B>
    bfloat_t& operator+=(const B& b) { return *this = bfloat_t(float(*this) + float(b)); }
    template <class B>
    bfloat_t& operator-=(const B& b) { return *this = bfloat_t(float(*this) - float(b)); }
    template <class B>
    bfloat_t& operator*=(const B& b) { return *this = bfloat_t(float(*this) * float(b)); }
    template <class B>
    bfloat_t& operator/=(const B& b) { return *this = bfloat_t(float(*this) / float(b)); }
};

}  // namespace metal

typedef metal::bfloat_t bfloat;

namespace metal {

template <class X>
struct is_scalar : std::integral_constant<bool, std::is_arithmetic<X>::value> {};
template <>
struct is_scalar<half> : std::true_type {};
template <>
struct is_scalar<bfloat_t> : std::true_type {};

// ---------------------------------------------------------------- vectors

template <class T, int N>
struct vec;
template <class T, int N>
struct packed_vec;

// swz is a swizzle view (v.xy, v.zyx): it shares the vector's storage in its
// union and picks components I on read and write.
template <class T, int N, int... I>
struct swz {
    T d_[N == 3 ? 4 : N];
    static constexpr int K = sizeof...(I);
    T at(int i) const {
        constexpr int idx[K] = {I...};
        return d_[idx[i]];
    }
    operator vec<T, K>() const { return vec<T, K>(d_[I]...); }
    template <class V>
    swz& operator=(const V& v) {
        vec<T, K> t(v);  // read everything first: v may alias this vector
        int k = 0;
        ((d_[I] = t.d_[k++]), ...);
        return *this;
    }
    swz& operator=(const swz& o) { return *this = vec<T, K>(o); }
    template <class V>
    swz& operator+=(const V& v) { return *this = vec<T, K>(*this) + v; }
    template <class V>
    swz& operator-=(const V& v) { return *this = vec<T, K>(*this) - v; }
    template <class V>
    swz& operator*=(const V& v) { return *this = vec<T, K>(*this) * v; }
    template <class V>
    swz& operator/=(const V& v) { return *this = vec<T, K>(*this) / v; }
};

template <class X>
struct vinfo {
    static constexpr bool is = false;
    static constexpr int n = 1;
    using elem = X;
};
template <class T, int N>
struct vinfo<vec<T, N>> {
    static constexpr bool is = true;
    static constexpr int n = N;
    using elem = T;
};
template <class T, int N, int... I>
struct vinfo<swz<T, N, I...>> {
    static constexpr bool is = true;
    static constexpr int n = sizeof...(I);
    using elem = T;
};
template <class T, int N>
struct vinfo<packed_vec<T, N>> {
    static constexpr bool is = true;
    static constexpr int n = N;
    using elem = T;
};

template <class X>
using vec_of = vec<typename vinfo<X>::elem, vinfo<X>::n>;

template <class S, std::enable_if_t<is_scalar<S>::value, int> = 0>
inline S vget(const S& s, int) { return s; }
template <class T, int N>
inline T vget(const vec<T, N>& v, int i) { return v.d_[i]; }
template <class T, int N, int... I>
inline T vget(const swz<T, N, I...>& s, int i) { return s.at(i); }
template <class T, int N>
inline T vget(const packed_vec<T, N>& v, int i) { return v.d_[i]; }

template <class X>
constexpr int ncomp() {
    return vinfo<std::decay_t<X>>::n;
}
template <class X>
constexpr bool is_part() {
    return vinfo<std::decay_t<X>>::is || is_scalar<std::decay_t<X>>::value;
}

#define EMU_SWZ2(nm, ...) swz<T, 2, __VA_ARGS__> nm;
#define EMU_SWZ3(nm, ...) swz<T, 3, __VA_ARGS__> nm;
#define EMU_SWZ4(nm, ...) swz<T, 4, __VA_ARGS__> nm;

#define EMU_VSTORE_COPY(S)                                     \
    vstore() = default;                                        \
    vstore(const vstore& o) = default;                         \
    vstore& operator=(const vstore& o) {                       \
        for (int i = 0; i < S; i++) d_[i] = o.d_[i];           \
        return *this;                                          \
    }

template <class T, int N>
struct vstore;
template <class T>
struct vstore<T, 2> {
    union {
        T d_[2];
        struct { T x, y; };
        struct { T r, g; };
        EMU_SWIZZLES_2(EMU_SWZ2)
    };
    EMU_VSTORE_COPY(2)
};
template <class T>
struct vstore<T, 3> {
    union {
        T d_[4];
        struct { T x, y, z; };
        struct { T r, g, b; };
        EMU_SWIZZLES_3(EMU_SWZ3)
    };
    EMU_VSTORE_COPY(4)
};
template <class T>
struct vstore<T, 4> {
    union {
        T d_[4];
        struct { T x, y, z, w; };
        struct { T r, g, b, a; };
        EMU_SWIZZLES_4(EMU_SWZ4)
    };
    EMU_VSTORE_COPY(4)
};

template <class T, int N>
struct alignas(sizeof(T) * (N == 3 ? 4 : N)) vec : vstore<T, N> {
    using elem = T;
    vec() = default;
    vec(const vec&) = default;
    vec& operator=(const vec&) = default;
    // A scalar converts implicitly to a vector by replication, as in MSL.
    template <class S, std::enable_if_t<is_scalar<S>::value, int> = 0>
    vec(S s) {
        for (int i = 0; i < N; i++) this->d_[i] = T(s);
    }
    template <class A, class B, class... R,
              std::enable_if_t<is_part<A>() && is_part<B>() && (is_part<R>() && ... && true) &&
                                   ncomp<A>() + ncomp<B>() + (ncomp<R>() + ... + 0) == N,
                               int> = 0>
    vec(const A& a, const B& b, const R&... r) {
        int k = 0;
        put(k, a);
        put(k, b);
        (put(k, r), ...);
    }
    template <class U, std::enable_if_t<!std::is_same<U, T>::value, int> = 0>
    explicit vec(const vec<U, N>& o) {
        for (int i = 0; i < N; i++) this->d_[i] = T(o.d_[i]);
    }
    template <int M, int... I, std::enable_if_t<sizeof...(I) == N, int> = 0>
    vec(const swz<T, M, I...>& s) {
        for (int i = 0; i < N; i++) this->d_[i] = s.at(i);
    }
    template <class U, int M, int... I,
              std::enable_if_t<sizeof...(I) == N && !std::is_same<U, T>::value, int> = 0>
    explicit vec(const swz<U, M, I...>& s) {
        for (int i = 0; i < N; i++) this->d_[i] = T(s.at(i));
    }
    template <class U>
    vec(const packed_vec<U, N>& p) {
        for (int i = 0; i < N; i++) this->d_[i] = T(p.d_[i]);
    }
    T& operator[](int i) { return this->d_[i]; }
    const T& operator[](int i) const { return this->d_[i]; }
    template <class B>
    vec& operator+=(const B& b) { return *this = *this + b; }
    template <class B>
    vec& operator-=(const B& b) { return *this = *this - b; }
    template <class B>
    vec& operator*=(const B& b) { return *this = *this * b; }
    template <class B>
    vec& operator/=(const B& b) { return *this = *this / b; }
    template <class B>
    vec& operator%=(const B& b) { return *this = *this % b; }
    template <class B>
    vec& operator&=(const B& b) { return *this = *this & b; }
    template <class B>
    vec& operator|=(const B& b) { return *this = *this | b; }
    template <class B>
    vec& operator^=(const B& b) { return *this = *this ^ b; }
    template <class B>
    vec& operator<<=(const B& b) { return *this = *this << b; }
    template <class B>
    vec& operator>>=(const B& b) { return *this = *this >> b; }

   private:
    template <class X>
    void put(int& k, const X& x) {
        for (int i = 0; i < ncomp<X>(); i++) this->d_[k++] = T(vget(x, i));
    }
};

// packed_vec is MSL's packed_T3 and friends: element-aligned, no padding.
template <class T, int N>
struct pstore;
template <class T>
struct pstore<T, 2> {
    union {
        T d_[2];
        struct { T x, y; };
    };
};
template <class T>
struct pstore<T, 3> {
    union {
        T d_[3];
        struct { T x, y, z; };
    };
};
template <class T>
struct pstore<T, 4> {
    union {
        T d_[4];
        struct { T x, y, z, w; };
    };
};

template <class T, int N>
struct packed_vec : pstore<T, N> {
    using pstore<T, N>::d_;
    packed_vec() = default;
    template <class U>
    packed_vec(const vec<U, N>& v) {
        for (int i = 0; i < N; i++) d_[i] = T(v.d_[i]);
    }
    template <class S, std::enable_if_t<is_scalar<S>::value, int> = 0>
    packed_vec(S s) {
        for (int i = 0; i < N; i++) d_[i] = T(s);
    }
    template <class A, class B, class... R,
              std::enable_if_t<ncomp<A>() + ncomp<B>() + (ncomp<R>() + ... + 0) == N, int> = 0>
    packed_vec(const A& a, const B& b, const R&... r) {
        vec<T, N> v(a, b, r...);
        for (int i = 0; i < N; i++) d_[i] = v.d_[i];
    }
    operator vec<T, N>() const {
        vec<T, N> v;
        for (int i = 0; i < N; i++) v.d_[i] = d_[i];
        return v;
    }
    T& operator[](int i) { return d_[i]; }
    const T& operator[](int i) const { return d_[i]; }
};

template <class A, class B>
struct binres {
    static constexpr bool va = vinfo<A>::is, vb = vinfo<B>::is;
    using elem = std::conditional_t<va, typename vinfo<A>::elem, typename vinfo<B>::elem>;
    static constexpr int n = va ? vinfo<A>::n : vinfo<B>::n;
    static constexpr bool valid = (va || vb) && (!(va && vb) || vinfo<A>::n == vinfo<B>::n) &&
                                  (va || is_scalar<A>::value) && (vb || is_scalar<B>::value);
};

#define EMU_VBIN(op)                                                                   \
    template <class A, class B, class R = binres<A, B>, std::enable_if_t<R::valid, int> = 0> \
    inline vec<typename R::elem, R::n> operator op(const A& a, const B& b) {           \
        vec<typename R::elem, R::n> r;                                                 \
        for (int i = 0; i < R::n; i++)                                                 \
            r.d_[i] = typename R::elem(vget(a, i) op vget(b, i));                      \
        return r;                                                                      \
    }
#define EMU_VCMP(op)                                                                   \
    template <class A, class B, class R = binres<A, B>, std::enable_if_t<R::valid, int> = 0> \
    inline vec<bool, R::n> operator op(const A& a, const B& b) {                       \
        vec<bool, R::n> r;                                                             \
        for (int i = 0; i < R::n; i++) r.d_[i] = vget(a, i) op vget(b, i);            \
        return r;                                                                      \
    }
EMU_VBIN(+)
EMU_VBIN(-)
EMU_VBIN(*)
EMU_VBIN(/)
EMU_VBIN(%)
EMU_VBIN(&)
EMU_VBIN(|)
EMU_VBIN(^)
EMU_VBIN(<<)
EMU_VBIN(>>)
EMU_VCMP(==)
EMU_VCMP(!=)
EMU_VCMP(<)
EMU_VCMP(>)
EMU_VCMP(<=)
EMU_VCMP(>=)
EMU_VCMP(&&)
EMU_VCMP(||)
#undef EMU_VBIN
#undef EMU_VCMP

#define EMU_VUN(op)                                                    \
    template <class V, std::enable_if_t<vinfo<V>::is, int> = 0>       \
    inline vec_of<V> operator op(const V& v) {                         \
        vec_of<V> r;                                                   \
        for (int i = 0; i < vinfo<V>::n; i++)                          \
            r.d_[i] = typename vinfo<V>::elem(op vget(v, i));          \
        return r;                                                      \
    }
EMU_VUN(-)
EMU_VUN(+)
EMU_VUN(~)
#undef EMU_VUN
template <class V, std::enable_if_t<vinfo<V>::is, int> = 0>
inline vec<bool, vinfo<V>::n> operator!(const V& v) {
    vec<bool, vinfo<V>::n> r;
    for (int i = 0; i < vinfo<V>::n; i++) r.d_[i] = !vget(v, i);
    return r;
}

template <class V, std::enable_if_t<vinfo<V>::is, int> = 0>
inline bool all(const V& v) {
    for (int i = 0; i < vinfo<V>::n; i++)
        if (!vget(v, i)) return false;
    return true;
}
template <class V, std::enable_if_t<vinfo<V>::is, int> = 0>
inline bool any(const V& v) {
    for (int i = 0; i < vinfo<V>::n; i++)
        if (vget(v, i)) return true;
    return false;
}
inline bool all(bool b) { return b; }
inline bool any(bool b) { return b; }

// ---------------------------------------------------------------- as_type

template <class T, class U>
inline T as_type(const U& u) {
    static_assert(sizeof(T) == sizeof(U), "as_type: sizes differ");
    T t;
    __builtin_memcpy((void*)&t, (const void*)&u, sizeof(T));
    return t;
}

// ---------------------------------------------------------------- math

#define EMU_F1(name, expr)                                                          \
    inline float name(float x) { return expr; }                                     \
    inline float name(double x) { return name(float(x)); }                          \
    inline half name(half x) { return half(name(float(x))); }                       \
    template <class V, std::enable_if_t<vinfo<V>::is, int> = 0>                     \
    inline vec_of<V> name(const V& v) {                                             \
        vec_of<V> r;                                                                \
        for (int i = 0; i < vinfo<V>::n; i++)                                       \
            r.d_[i] = typename vinfo<V>::elem(name(float(vget(v, i))));             \
        return r;                                                                   \
    }

EMU_F1(sqrt, __builtin_sqrtf(x))
EMU_F1(rsqrt, 1.0f / __builtin_sqrtf(x))
EMU_F1(exp, __builtin_expf(x))
EMU_F1(exp2, __builtin_exp2f(x))
EMU_F1(exp10, __builtin_powf(10.0f, x))
EMU_F1(log, __builtin_logf(x))
EMU_F1(log2, __builtin_log2f(x))
EMU_F1(log10, __builtin_log10f(x))
EMU_F1(sin, __builtin_sinf(x))
EMU_F1(cos, __builtin_cosf(x))
EMU_F1(tan, __builtin_tanf(x))
EMU_F1(asin, __builtin_asinf(x))
EMU_F1(acos, __builtin_acosf(x))
EMU_F1(atan, __builtin_atanf(x))
EMU_F1(sinh, __builtin_sinhf(x))
EMU_F1(cosh, __builtin_coshf(x))
EMU_F1(tanh, __builtin_tanhf(x))
EMU_F1(floor, __builtin_floorf(x))
EMU_F1(ceil, __builtin_ceilf(x))
EMU_F1(round, __builtin_roundf(x))
EMU_F1(rint, __builtin_rintf(x))
EMU_F1(trunc, __builtin_truncf(x))
EMU_F1(fabs, __builtin_fabsf(x))
EMU_F1(fract, x - __builtin_floorf(x))
EMU_F1(saturate, x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x))
EMU_F1(sign, x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f * x))
EMU_F1(recip, 1.0f / x)
#undef EMU_F1

#define EMU_F2(name, expr)                                                          \
    inline float name(float x, float y) { return expr; }                            \
    inline half name(half x, half y) { return half(name(float(x), float(y))); }     \
    template <class A, class B, class R = binres<A, B>, std::enable_if_t<R::valid, int> = 0> \
    inline vec<typename R::elem, R::n> name(const A& a, const B& b) {               \
        vec<typename R::elem, R::n> r;                                              \
        for (int i = 0; i < R::n; i++)                                              \
            r.d_[i] = typename R::elem(name(float(vget(a, i)), float(vget(b, i)))); \
        return r;                                                                   \
    }
EMU_F2(pow, __builtin_powf(x, y))
EMU_F2(powr, __builtin_powf(x, y))
EMU_F2(atan2, __builtin_atan2f(x, y))
EMU_F2(fmod, __builtin_fmodf(x, y))
EMU_F2(fmin, __builtin_fminf(x, y))
EMU_F2(fmax, __builtin_fmaxf(x, y))
EMU_F2(copysign, __builtin_copysignf(x, y))
EMU_F2(step, y < x ? 0.0f : 1.0f)
EMU_F2(divide, x / y)
#undef EMU_F2

// abs, min, max, clamp: any scalar type (integers too), and vectors.
template <class T, std::enable_if_t<is_scalar<T>::value, int> = 0>
inline T abs(T x) { return x < T(0) ? T(-x) : x; }
inline float abs(float x) { return __builtin_fabsf(x); }
template <class T, std::enable_if_t<is_scalar<T>::value, int> = 0>
inline T min(T a, T b) { return b < a ? b : a; }
template <class T, std::enable_if_t<is_scalar<T>::value, int> = 0>
inline T max(T a, T b) { return a < b ? b : a; }
// Metal's min/max of floats return the other operand when one is NaN (fmin).
inline float min(float a, float b) { return __builtin_fminf(a, b); }
inline float max(float a, float b) { return __builtin_fmaxf(a, b); }
template <class T, std::enable_if_t<is_scalar<T>::value, int> = 0>
inline T clamp(T x, T lo, T hi) { return min(max(x, lo), hi); }

template <class V, std::enable_if_t<vinfo<V>::is, int> = 0>
inline vec_of<V> abs(const V& v) {
    vec_of<V> r;
    for (int i = 0; i < vinfo<V>::n; i++) r.d_[i] = abs(vget(v, i));
    return r;
}
template <class A, class B, class R = binres<A, B>, std::enable_if_t<R::valid, int> = 0>
inline vec<typename R::elem, R::n> min(const A& a, const B& b) {
    using E = typename R::elem;
    vec<E, R::n> r;
    for (int i = 0; i < R::n; i++) r.d_[i] = min(E(vget(a, i)), E(vget(b, i)));
    return r;
}
template <class A, class B, class R = binres<A, B>, std::enable_if_t<R::valid, int> = 0>
inline vec<typename R::elem, R::n> max(const A& a, const B& b) {
    using E = typename R::elem;
    vec<E, R::n> r;
    for (int i = 0; i < R::n; i++) r.d_[i] = max(E(vget(a, i)), E(vget(b, i)));
    return r;
}
template <class V, class L, class H, std::enable_if_t<vinfo<V>::is, int> = 0>
inline vec_of<V> clamp(const V& x, const L& lo, const H& hi) {
    using E = typename vinfo<V>::elem;
    vec_of<V> r;
    for (int i = 0; i < vinfo<V>::n; i++)
        r.d_[i] = clamp(E(vget(x, i)), E(vget(lo, i)), E(vget(hi, i)));
    return r;
}

inline float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline half fma(half a, half b, half c) { return half(__builtin_fmaf(a, b, c)); }
template <class A, class B, class C, std::enable_if_t<vinfo<A>::is, int> = 0>
inline vec_of<A> fma(const A& a, const B& b, const C& c) {
    using E = typename vinfo<A>::elem;
    vec_of<A> r;
    for (int i = 0; i < vinfo<A>::n; i++)
        r.d_[i] = E(__builtin_fmaf(float(vget(a, i)), float(vget(b, i)), float(vget(c, i))));
    return r;
}
template <class A, class B, class C>
inline auto mad(const A& a, const B& b, const C& c) { return fma(a, b, c); }

template <class A, class B, class T>
inline auto mix(const A& a, const B& b, const T& t) { return a + (b - a) * t; }
template <class E0, class E1, class X>
inline auto smoothstep(const E0& e0, const E1& e1, const X& x) {
    auto t = clamp((x - e0) / (e1 - e0), 0.0f, 1.0f);
    return t * t * (3.0f - 2.0f * t);
}

template <class T, std::enable_if_t<is_scalar<T>::value, int> = 0>
inline T select(T a, T b, bool c) { return c ? b : a; }
template <class A, class B, class C, std::enable_if_t<vinfo<C>::is, int> = 0>
inline vec_of<A> select(const A& a, const B& b, const C& c) {
    using E = typename vinfo<A>::elem;
    vec_of<A> r;
    for (int i = 0; i < vinfo<A>::n; i++) r.d_[i] = vget(c, i) ? E(vget(b, i)) : E(vget(a, i));
    return r;
}
template <class A, class B, std::enable_if_t<vinfo<A>::is, int> = 0>
inline vec_of<A> select(const A& a, const B& b, bool c) {
    return c ? vec_of<A>(b) : vec_of<A>(a);
}

inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isinf(float x) { return __builtin_isinf(x); }
inline bool isfinite(float x) { return __builtin_isfinite(x); }
inline bool signbit(float x) { return __builtin_signbit(x); }
inline bool isnan(half x) { return __builtin_isnan(float(x)); }
inline bool isinf(half x) { return __builtin_isinf(float(x)); }
inline bool isfinite(half x) { return __builtin_isfinite(float(x)); }
#define EMU_PRED(name)                                                    \
    template <class V, std::enable_if_t<vinfo<V>::is, int> = 0>          \
    inline vec<bool, vinfo<V>::n> name(const V& v) {                      \
        vec<bool, vinfo<V>::n> r;                                         \
        for (int i = 0; i < vinfo<V>::n; i++) r.d_[i] = name(float(vget(v, i))); \
        return r;                                                         \
    }
EMU_PRED(isnan)
EMU_PRED(isinf)
EMU_PRED(isfinite)
EMU_PRED(signbit)
#undef EMU_PRED

template <class A, class B, std::enable_if_t<vinfo<A>::is, int> = 0>
inline typename vinfo<A>::elem dot(const A& a, const B& b) {
    float s = 0.0f;
    for (int i = 0; i < vinfo<A>::n; i++) s += float(vget(a, i)) * float(vget(b, i));
    return typename vinfo<A>::elem(s);
}
template <class A, std::enable_if_t<vinfo<A>::is, int> = 0>
inline typename vinfo<A>::elem length_squared(const A& a) { return dot(a, a); }
template <class A, std::enable_if_t<vinfo<A>::is, int> = 0>
inline typename vinfo<A>::elem length(const A& a) {
    return typename vinfo<A>::elem(__builtin_sqrtf(float(dot(a, a))));
}
template <class A, class B, std::enable_if_t<vinfo<A>::is, int> = 0>
inline typename vinfo<A>::elem distance(const A& a, const B& b) { return length(a - b); }
template <class A, std::enable_if_t<vinfo<A>::is, int> = 0>
inline vec_of<A> normalize(const A& a) { return a * rsqrt(float(dot(a, a))); }
template <class A, class B>
inline vec_of<A> cross(const A& a, const B& b) {
    using V = vec_of<A>;
    return V(vget(a, 1) * vget(b, 2) - vget(a, 2) * vget(b, 1),
             vget(a, 2) * vget(b, 0) - vget(a, 0) * vget(b, 2),
             vget(a, 0) * vget(b, 1) - vget(a, 1) * vget(b, 0));
}

// Integer built-ins.
template <class T>
inline T clz(T x) {
    constexpr int bits = sizeof(T) * 8;
    using U = std::make_unsigned_t<T>;
    U u = U(x);
    if (u == 0) return T(bits);
    return T(__builtin_clzll((unsigned long long)u) - (64 - bits));
}
template <class T>
inline T ctz(T x) {
    using U = std::make_unsigned_t<T>;
    U u = U(x);
    if (u == 0) return T(sizeof(T) * 8);
    return T(__builtin_ctzll((unsigned long long)u));
}
template <class T>
inline T popcount(T x) {
    using U = std::make_unsigned_t<T>;
    return T(__builtin_popcountll((unsigned long long)U(x)));
}
inline uint mulhi(uint a, uint b) { return uint((uint64_t(a) * b) >> 32); }
inline int mulhi(int a, int b) { return int((int64_t(a) * b) >> 32); }
template <class T>
inline T rotate(T v, T n) {
    using U = std::make_unsigned_t<T>;
    constexpr unsigned bits = sizeof(T) * 8;
    unsigned s = unsigned(n) % bits;
    U u = U(v);
    return T(s == 0 ? u : U((u << s) | (u >> (bits - s))));
}
template <class T>
inline T extract_bits(T x, uint offset, uint bits) {
    using U = std::make_unsigned_t<T>;
    if (bits == 0) return T(0);
    U u = U(U(x) >> offset);
    if (bits < sizeof(T) * 8) u &= U((U(1) << bits) - 1);
    if (std::is_signed<T>::value && bits < sizeof(T) * 8 && ((u >> (bits - 1)) & 1))
        u |= U(~U(0) << bits);
    return T(u);
}
template <class T>
inline T insert_bits(T base, T insert, uint offset, uint bits) {
    using U = std::make_unsigned_t<T>;
    if (bits == 0) return base;
    U mask = bits >= sizeof(T) * 8 ? U(~U(0)) : U((U(1) << bits) - 1);
    return T((U(base) & U(~(mask << offset))) | ((U(insert) & mask) << offset));
}
template <class T>
inline T reverse_bits(T x) {
    using U = std::make_unsigned_t<T>;
    U u = U(x), r = 0;
    for (unsigned i = 0; i < sizeof(T) * 8; i++) r = U((r << 1) | ((u >> i) & 1));
    return T(r);
}

template <class T>
inline auto min3(T a, T b, T c) { return min(min(a, b), c); }
template <class T>
inline auto max3(T a, T b, T c) { return max(max(a, b), c); }
template <class T>
inline auto fmin3(T a, T b, T c) { return fmin(fmin(a, b), c); }
template <class T>
inline auto fmax3(T a, T b, T c) { return fmax(fmax(a, b), c); }
template <class T>
inline auto median3(T a, T b, T c) { return max(min(a, b), min(max(a, b), c)); }

// <metal_type_traits> names, which templated kernels use.
using std::conditional;
using std::conditional_t;
using std::enable_if;
using std::enable_if_t;
using std::false_type;
using std::integral_constant;
using std::is_floating_point;
using std::is_integral;
using std::is_same;
using std::is_same_v;
using std::is_signed;
using std::is_unsigned;
using std::make_signed;
using std::make_unsigned;
using std::remove_cv;
using std::remove_cv_t;
using std::true_type;

namespace precise {
using metal::abs; using metal::acos; using metal::asin; using metal::atan; using metal::atan2;
using metal::ceil; using metal::copysign; using metal::cos; using metal::cosh; using metal::divide;
using metal::exp; using metal::exp10; using metal::exp2; using metal::fabs; using metal::floor;
using metal::fma; using metal::fmax; using metal::fmin; using metal::fmod; using metal::fract;
using metal::log; using metal::log10; using metal::log2; using metal::max; using metal::min;
using metal::pow; using metal::powr; using metal::recip; using metal::rint; using metal::round;
using metal::rsqrt; using metal::saturate; using metal::sign; using metal::sin; using metal::sinh;
using metal::sqrt; using metal::tan; using metal::tanh; using metal::trunc; using metal::clamp;
using metal::normalize; using metal::length; using metal::distance;
}  // namespace precise
namespace fast {
using namespace precise;
}  // namespace fast

template <class T>
struct numeric_limits : std::numeric_limits<T> {};
template <>
struct numeric_limits<half> {
    static constexpr bool is_specialized = true;
    static half min() { return half(6.103515625e-05f); }
    static half max() { return half(65504.0f); }
    static half lowest() { return half(-65504.0f); }
    static half epsilon() { return half(0.0009765625f); }
    static half infinity() { return half(__builtin_inff()); }
    static half quiet_NaN() { return half(__builtin_nanf("")); }
};

// ---------------------------------------------------------------- sync

enum class mem_flags : unsigned {
    mem_none = 0,
    mem_device = 1,
    mem_threadgroup = 2,
    mem_texture = 4,
    mem_threadgroup_imageblock = 8,
    mem_object_data = 16,
};
inline mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags(unsigned(a) | unsigned(b)); }

inline void threadgroup_barrier(mem_flags = mem_flags::mem_none) { emu_tg_barrier(); }
inline void simdgroup_barrier(mem_flags = mem_flags::mem_none) {
    uint32_t m;
    emu_simd_xchg(emu::kOpBarrier, nullptr, 0, &m);
}

// ---------------------------------------------------------------- SIMD groups

namespace detail {

template <class T>
struct xchg {
    const unsigned char (*slots)[16];
    uint32_t mask;
    xchg(int op, const T& v) {
        static_assert(sizeof(T) <= 16, "SIMD-group functions take values of at most 16 bytes");
        slots = emu_simd_xchg(op, &v, sizeof(T), &mask);
    }
    bool has(uint32_t lane) const { return lane < 32 && ((mask >> lane) & 1u); }
    T get(uint32_t lane) const {
        T t;
        __builtin_memcpy((void*)&t, slots[lane], sizeof(T));
        return t;
    }
};

inline uint32_t lane() { return emu::cur->lane; }

// reduce combines the present lanes pairwise (lane 2i with 2i+1, then pairs
// of pairs...), a fixed tree independent of fiber order.
template <class T, class F>
inline T reduce(int op, const T& v, F f) {
    xchg<T> x(op, v);
    // Every lane gets the same result: the first to resume computes it.
    // The collective just completed used the row before the current one.
    emu::Simd& sm = emu::cur->g->simd[emu::cur->sg];
    uint32_t ph = sm.phase ^ 1u;
    if (sm.cached[ph]) {
        T r;
        __builtin_memcpy((void*)&r, sm.cache[ph], sizeof(T));
        return r;
    }
    T vals[32];
    bool present[32];
    for (int i = 0; i < 32; i++) {
        present[i] = x.has(i);
        if (present[i]) vals[i] = x.get(i);
    }
    for (int s = 1; s < 32; s *= 2) {
        for (int i = 0; i + s < 32; i += 2 * s) {
            if (present[i] && present[i + s]) {
                vals[i] = f(vals[i], vals[i + s]);
            } else if (present[i + s]) {
                vals[i] = vals[i + s];
                present[i] = true;
            }
        }
    }
    __builtin_memcpy(sm.cache[ph], (const void*)&vals[0], sizeof(T));
    sm.cached[ph] = 1;
    return vals[0];
}

template <class T, class F>
inline T scan(const T& v, bool inclusive, T identity, F f) {
    xchg<T> x(emu::kOpScan, v);
    uint32_t me = lane();
    T acc = identity;
    for (uint32_t i = 0; i < me; i++)
        if (x.has(i)) acc = f(acc, x.get(i));
    return inclusive ? f(acc, v) : acc;
}

}  // namespace detail

template <class T>
inline T simd_sum(T v) {
    return detail::reduce(emu::kOpReduce, v, [](const T& a, const T& b) { return T(a + b); });
}
template <class T>
inline T simd_product(T v) {
    return detail::reduce(emu::kOpReduce, v, [](const T& a, const T& b) { return T(a * b); });
}
template <class T>
inline T simd_max(T v) {
    return detail::reduce(emu::kOpReduce, v, [](const T& a, const T& b) { return T(max(a, b)); });
}
template <class T>
inline T simd_min(T v) {
    return detail::reduce(emu::kOpReduce, v, [](const T& a, const T& b) { return T(min(a, b)); });
}
template <class T>
inline T simd_and(T v) {
    return detail::reduce(emu::kOpReduce, v, [](const T& a, const T& b) { return T(a & b); });
}
template <class T>
inline T simd_or(T v) {
    return detail::reduce(emu::kOpReduce, v, [](const T& a, const T& b) { return T(a | b); });
}
template <class T>
inline T simd_xor(T v) {
    return detail::reduce(emu::kOpReduce, v, [](const T& a, const T& b) { return T(a ^ b); });
}
template <class T>
inline T simd_prefix_inclusive_sum(T v) {
    return detail::scan(v, true, T(0), [](const T& a, const T& b) { return T(a + b); });
}
template <class T>
inline T simd_prefix_exclusive_sum(T v) {
    return detail::scan(v, false, T(0), [](const T& a, const T& b) { return T(a + b); });
}
template <class T>
inline T simd_prefix_inclusive_product(T v) {
    return detail::scan(v, true, T(1), [](const T& a, const T& b) { return T(a * b); });
}
template <class T>
inline T simd_prefix_exclusive_product(T v) {
    return detail::scan(v, false, T(1), [](const T& a, const T& b) { return T(a * b); });
}

// Shuffles read another lane's value; a source lane outside the SIMD group
// or not taking part leaves the caller's own value, as Metal does at the
// edges of simd_shuffle_up/down.
template <class T>
inline T simd_shuffle(T v, ushort src) {
    detail::xchg<T> x(emu::kOpShuffle, v);
    return x.has(src) ? x.get(src) : v;
}
template <class T>
inline T simd_broadcast(T v, ushort src) { return simd_shuffle(v, src); }
template <class T>
inline T simd_shuffle_xor(T v, ushort mask) {
    return simd_shuffle(v, ushort((detail::lane() ^ mask) & 31u));
}
template <class T>
inline T simd_shuffle_up(T v, ushort delta) {
    uint32_t me = detail::lane();
    detail::xchg<T> x(emu::kOpShuffle, v);
    return delta <= me && x.has(me - delta) ? x.get(me - delta) : v;
}
template <class T>
inline T simd_shuffle_down(T v, ushort delta) {
    uint32_t me = detail::lane();
    detail::xchg<T> x(emu::kOpShuffle, v);
    return me + delta < 32 && x.has(me + delta) ? x.get(me + delta) : v;
}
template <class T>
inline T simd_shuffle_rotate_down(T v, ushort delta) {
    return simd_shuffle(v, ushort((detail::lane() + delta) & 31u));
}
template <class T>
inline T simd_shuffle_rotate_up(T v, ushort delta) {
    return simd_shuffle(v, ushort((detail::lane() + 32u - (delta & 31u)) & 31u));
}
// simd_shuffle_and_fill_down/up: like shuffle_down/up, but lanes whose
// source falls off the end (of the SIMD group, or of a window of modulo
// lanes) take the filling value's lane instead.
template <class T>
inline T simd_shuffle_and_fill_down(T v, T fill, ushort delta, ushort modulo = 32) {
    uint32_t me = detail::lane();
    uint32_t base = me - me % modulo, pos = me % modulo;
    detail::xchg<T> x(emu::kOpShuffle, v);
    detail::xchg<T> y(emu::kOpShuffle, fill);
    uint32_t src = pos + delta;
    if (src < modulo) return x.has(base + src) ? x.get(base + src) : v;
    src -= modulo;
    return y.has(base + src) ? y.get(base + src) : fill;
}
template <class T>
inline T simd_shuffle_and_fill_up(T v, T fill, ushort delta, ushort modulo = 32) {
    uint32_t me = detail::lane();
    uint32_t base = me - me % modulo, pos = me % modulo;
    detail::xchg<T> x(emu::kOpShuffle, v);
    detail::xchg<T> y(emu::kOpShuffle, fill);
    if (pos >= delta) return x.has(base + pos - delta) ? x.get(base + pos - delta) : v;
    uint32_t src = pos + modulo - delta;
    return y.has(base + src) ? y.get(base + src) : fill;
}

template <class T>
inline T simd_broadcast_first(T v) {
    detail::xchg<T> x(emu::kOpShuffle, v);
    for (uint32_t i = 0; i < 32; i++)
        if (x.has(i)) return x.get(i);
    return v;
}

struct simd_vote {
    typedef uint64_t vote_t;
    vote_t v;
    explicit constexpr simd_vote(vote_t x = 0) : v(x) {}
    explicit operator vote_t() const { return v; }
    bool all() const;
    bool any() const { return v != 0; }
};

inline simd_vote simd_ballot(bool b) {
    uint8_t v = b;
    detail::xchg<uint8_t> x(emu::kOpVote, v);
    uint64_t r = 0;
    for (uint32_t i = 0; i < 32; i++)
        if (x.has(i) && x.get(i)) r |= uint64_t(1) << i;
    return simd_vote(r);
}
inline simd_vote simd_active_threads_mask() {
    uint8_t v = 1;
    detail::xchg<uint8_t> x(emu::kOpVote, v);
    return simd_vote(x.mask);
}
inline bool simd_vote::all() const {
    // True when every active lane voted; the vote itself cannot see which
    // lanes were active, so this asks the group again.
    return v == uint64_t(simd_active_threads_mask().v);
}
inline bool simd_any(bool b) { return simd_ballot(b).v != 0; }
inline bool simd_all(bool b) {
    uint8_t v = b;
    detail::xchg<uint8_t> x(emu::kOpVote, v);
    for (uint32_t i = 0; i < 32; i++)
        if (x.has(i) && !x.get(i)) return false;
    return true;
}
inline bool simd_is_first() {
    uint8_t v = 1;
    detail::xchg<uint8_t> x(emu::kOpVote, v);
    for (uint32_t i = 0; i < 32; i++)
        if (x.has(i)) return i == detail::lane();
    return false;
}

// Quad-group functions act on lanes in fours within the SIMD group.
template <class T>
inline T quad_sum(T v) {
    detail::xchg<T> x(emu::kOpQuad, v);
    uint32_t base = detail::lane() & ~3u;
    T acc = T(0);
    for (uint32_t i = base; i < base + 4; i++)
        if (x.has(i)) acc = T(acc + x.get(i));
    return acc;
}
template <class T>
inline T quad_shuffle(T v, ushort src) {
    detail::xchg<T> x(emu::kOpQuad, v);
    uint32_t l = (detail::lane() & ~3u) | (src & 3u);
    return x.has(l) ? x.get(l) : v;
}
template <class T>
inline T quad_shuffle_xor(T v, ushort mask) {
    return quad_shuffle(v, ushort((detail::lane() ^ mask) & 3u));
}
template <class T>
inline T quad_broadcast(T v, ushort src) { return quad_shuffle(v, src); }

// ---------------------------------------------------------------- simdgroup matrices

// A lane holds the whole 8×8 tile, since MSL code never sees the per-lane
// layout — except that, to save 32× redundant work, the result of a
// multiply is computed only at the two elements Apple's layout gives the
// lane (its thread_elements()); such a matrix is marked partial. That is
// all an accumulator needs: d = a·b + c at (i, j) reads c only at (i, j),
// and a store writes each lane's own elements. A partial matrix used as
// the a or b operand of a multiply is first rebuilt from all 32 lanes (one
// SIMD-group exchange). Writing through thread_elements() also leaves a
// matrix partial.
template <class T, int R, int C>
struct simdgroup_matrix {
    static_assert(R == 8 && C == 8, "simdgroup_matrix is 8x8");
    alignas(16) T e[8][8];
    bool dirty_ = false;  // only this lane's two elements are current

    simdgroup_matrix() = default;
    explicit simdgroup_matrix(T v) {
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 8; j++) e[i][j] = v;
    }
    // Apple's layout (as documented by MLX's steel kernels): lane l owns
    // row (q & 4) + (l / 2) % 4 and columns c, c + 1 with
    // c = (q & 2) * 2 + (l % 2) * 2, where q = l / 4.
    static void owned(uint32_t l, int& row, int& col) {
        uint32_t q = l / 4;
        row = int((q & 4) + (l / 2) % 4);
        col = int((q & 2) * 2 + (l % 2) * 2);
    }
    vec<T, 2>& thread_elements() {
        int row, col;
        owned(detail::lane(), row, col);
        dirty_ = true;
        return *reinterpret_cast<vec<T, 2>*>(&e[row][col]);
    }
    const vec<T, 2>& thread_elements() const {
        int row, col;
        owned(detail::lane(), row, col);
        return *reinterpret_cast<const vec<T, 2>*>(&e[row][col]);
    }
    // sync rebuilds the whole tile from every lane's own elements: a
    // SIMD-group collective.
    void sync() {
        if (!dirty_) return;
        int row, col;
        owned(detail::lane(), row, col);
        vec<T, 2> mine(e[row][col], e[row][col + 1]);
        detail::xchg<vec<T, 2>> x(emu::kOpMatrix, mine);
        for (uint32_t l = 0; l < 32; l++) {
            if (!x.has(l)) continue;
            vec<T, 2> v = x.get(l);
            owned(l, row, col);
            e[row][col] = v[0];
            e[row][col + 1] = v[1];
        }
        dirty_ = false;
    }
};

typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat_t, 8, 8> simdgroup_bfloat8x8;

namespace detail {
// full gives a matrix with every element current, syncing a copy if needed.
template <class T>
struct full {
    const simdgroup_matrix<T, 8, 8>* p;
    simdgroup_matrix<T, 8, 8> tmp;
    explicit full(const simdgroup_matrix<T, 8, 8>& m) {
        if (m.dirty_) {
            tmp = m;
            tmp.sync();
            p = &tmp;
        } else {
            p = &m;
        }
    }
};
// full_simdgroup: the SIMD group has all 32 lanes (its static size; lanes
// that already returned still count, since fibers without barriers run to
// the end one after another).
inline bool full_simdgroup() {
    const emu::Fiber* f = emu::cur;
    return f->g->simd[f->sg].size == 32;
}
}  // namespace detail

template <class T, int R, int C>
inline simdgroup_matrix<T, R, C> make_filled_simdgroup_matrix(T v) {
    return simdgroup_matrix<T, R, C>(v);
}

template <class T, class S>
inline void simdgroup_load(simdgroup_matrix<T, 8, 8>& d, const S* src, ulong elements_per_row = 8,
                           vec<ulong, 2> origin = vec<ulong, 2>(0), bool transpose = false) {
    const S* base = src + origin.y * elements_per_row + origin.x;
    if (transpose) {
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 8; j++) d.e[i][j] = T(base[ulong(j) * elements_per_row + ulong(i)]);
    } else {
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 8; j++) d.e[i][j] = T(base[ulong(i) * elements_per_row + ulong(j)]);
    }
    d.dirty_ = false;
}

template <class T, class S>
inline void simdgroup_store(const simdgroup_matrix<T, 8, 8>& a, S* dst, ulong elements_per_row = 8,
                            vec<ulong, 2> origin = vec<ulong, 2>(0), bool transpose = false) {
    S* base = dst + origin.y * elements_per_row + origin.x;
    auto put = [&](const simdgroup_matrix<T, 8, 8>& m, int i, int j) {
        ulong r = ulong(transpose ? j : i), c = ulong(transpose ? i : j);
        base[r * elements_per_row + c] = S(m.e[i][j]);
    };
    if (detail::full_simdgroup()) {
        // Each lane writes the two elements it owns, as the hardware does.
        int row, col;
        simdgroup_matrix<T, 8, 8>::owned(detail::lane(), row, col);
        put(a, row, col);
        put(a, row, col + 1);
    } else {
        detail::full<T> m(a);
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 8; j++) put(*m.p, i, j);
    }
}

// d = a·b + c with f32 accumulation, k in order (multiply, then add).
template <class D, class A, class B, class C>
inline void simdgroup_multiply_accumulate(simdgroup_matrix<D, 8, 8>& d, const simdgroup_matrix<A, 8, 8>& a,
                                          const simdgroup_matrix<B, 8, 8>& b,
                                          const simdgroup_matrix<C, 8, 8>& c) {
    detail::full<A> fa(a);
    detail::full<B> fb(b);
    const auto& ea = fa.p->e;
    const auto& eb = fb.p->e;
    if (detail::full_simdgroup()) {
        int row, col;
        simdgroup_matrix<D, 8, 8>::owned(detail::lane(), row, col);
        float r0 = float(c.e[row][col]), r1 = float(c.e[row][col + 1]);
        for (int k = 0; k < 8; k++) {
            float av = float(ea[row][k]);
            r0 += av * float(eb[k][col]);
            r1 += av * float(eb[k][col + 1]);
        }
        d.e[row][col] = D(r0);
        d.e[row][col + 1] = D(r1);
        d.dirty_ = true;
        return;
    }
    // A partial SIMD group: no lane owns the missing lanes' elements, so
    // every lane computes the whole tile.
    detail::full<C> fc(c);
    simdgroup_matrix<D, 8, 8> r;
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            float acc = float(fc.p->e[i][j]);
            for (int k = 0; k < 8; k++) acc += float(ea[i][k]) * float(eb[k][j]);
            r.e[i][j] = D(acc);
        }
    r.dirty_ = false;
    d = r;
}

template <class D, class A, class B>
inline void simdgroup_multiply(simdgroup_matrix<D, 8, 8>& d, const simdgroup_matrix<A, 8, 8>& a,
                               const simdgroup_matrix<B, 8, 8>& b) {
    simdgroup_multiply_accumulate(d, a, b, simdgroup_matrix<D, 8, 8>(D(0)));
}

// ---------------------------------------------------------------- atomics

enum memory_order {
    memory_order_relaxed = __ATOMIC_RELAXED,
    memory_order_acquire = __ATOMIC_ACQUIRE,
    memory_order_release = __ATOMIC_RELEASE,
    memory_order_acq_rel = __ATOMIC_ACQ_REL,
    memory_order_seq_cst = __ATOMIC_SEQ_CST,
};

// atomic<T> is plain storage; every access goes through __atomic builtins,
// which are real atomics because threadgroups run on several OS threads.
template <class T>
struct atomic {
    T v_;
};
typedef atomic<int> atomic_int;
typedef atomic<uint> atomic_uint;
typedef atomic<bool> atomic_bool;
typedef atomic<float> atomic_float;
typedef atomic<ulong> atomic_ulong;

namespace detail {
template <class T, class F>
inline T atomic_update(volatile T* p, F f) {
    T old = __atomic_load_n(p, __ATOMIC_RELAXED);
    while (!__atomic_compare_exchange_n(p, &old, f(old), true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
    return old;
}
inline float atomic_update_float(volatile atomic<float>* o, float add) {
    volatile uint32_t* p = reinterpret_cast<volatile uint32_t*>(&o->v_);
    uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
    for (;;) {
        float f = as_type<float>(old) + add;
        if (__atomic_compare_exchange_n(p, &old, as_type<uint32_t>(f), true, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            return as_type<float>(old);
    }
}
}  // namespace detail

template <class T, class U>
inline void atomic_store_explicit(volatile atomic<T>* o, U v, memory_order = memory_order_relaxed) {
    T t = T(v);
    if constexpr (std::is_same<T, float>::value)
        __atomic_store_n(reinterpret_cast<volatile uint32_t*>(&o->v_), as_type<uint32_t>(t), __ATOMIC_RELAXED);
    else
        __atomic_store_n(&o->v_, t, __ATOMIC_RELAXED);
}
template <class T>
inline T atomic_load_explicit(const volatile atomic<T>* o, memory_order = memory_order_relaxed) {
    if constexpr (std::is_same<T, float>::value)
        return as_type<float>(__atomic_load_n(reinterpret_cast<const volatile uint32_t*>(&o->v_), __ATOMIC_RELAXED));
    else
        return __atomic_load_n(&o->v_, __ATOMIC_RELAXED);
}
template <class T, class U>
inline T atomic_exchange_explicit(volatile atomic<T>* o, U v, memory_order = memory_order_relaxed) {
    T t = T(v);
    if constexpr (std::is_same<T, float>::value)
        return as_type<float>(__atomic_exchange_n(reinterpret_cast<volatile uint32_t*>(&o->v_),
                                                  as_type<uint32_t>(t), __ATOMIC_RELAXED));
    else
        return __atomic_exchange_n(&o->v_, t, __ATOMIC_RELAXED);
}
template <class T, class U>
inline bool atomic_compare_exchange_weak_explicit(volatile atomic<T>* o, T* expected, U desired,
                                                  memory_order = memory_order_relaxed,
                                                  memory_order = memory_order_relaxed) {
    T d = T(desired);
    if constexpr (std::is_same<T, float>::value) {
        uint32_t e = as_type<uint32_t>(*expected);
        bool ok = __atomic_compare_exchange_n(reinterpret_cast<volatile uint32_t*>(&o->v_), &e,
                                              as_type<uint32_t>(d), false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        *expected = as_type<float>(e);
        return ok;
    } else {
        // Strong CAS: a spurious failure would only make callers loop.
        return __atomic_compare_exchange_n(&o->v_, expected, d, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
}
template <class T, class U>
inline bool atomic_compare_exchange_strong_explicit(volatile atomic<T>* o, T* expected, U desired,
                                                    memory_order a = memory_order_relaxed,
                                                    memory_order b = memory_order_relaxed) {
    return atomic_compare_exchange_weak_explicit(o, expected, desired, a, b);
}

#define EMU_ATOMIC_RMW(name, builtin, op)                                                        \
    template <class T, class U>                                                                  \
    inline T atomic_fetch_##name##_explicit(volatile atomic<T>* o, U v, memory_order = memory_order_relaxed) { \
        return builtin(&o->v_, T(v), __ATOMIC_RELAXED);                                          \
    }
EMU_ATOMIC_RMW(add, __atomic_fetch_add, +)
EMU_ATOMIC_RMW(sub, __atomic_fetch_sub, -)
EMU_ATOMIC_RMW(and, __atomic_fetch_and, &)
EMU_ATOMIC_RMW(or, __atomic_fetch_or, |)
EMU_ATOMIC_RMW(xor, __atomic_fetch_xor, ^)
#undef EMU_ATOMIC_RMW
template <class U>
inline float atomic_fetch_add_explicit(volatile atomic<float>* o, U v, memory_order = memory_order_relaxed) {
    return detail::atomic_update_float(o, float(v));
}
template <class U>
inline float atomic_fetch_sub_explicit(volatile atomic<float>* o, U v, memory_order = memory_order_relaxed) {
    return detail::atomic_update_float(o, -float(v));
}
template <class T, class U>
inline T atomic_fetch_min_explicit(volatile atomic<T>* o, U v, memory_order = memory_order_relaxed) {
    T t = T(v);
    return detail::atomic_update(&o->v_, [t](T old) { return t < old ? t : old; });
}
template <class T, class U>
inline T atomic_fetch_max_explicit(volatile atomic<T>* o, U v, memory_order = memory_order_relaxed) {
    T t = T(v);
    return detail::atomic_update(&o->v_, [t](T old) { return old < t ? t : old; });
}

}  // namespace metal

// ---------------------------------------------------------------- global names

#define EMU_VEC_TYPES(T, name)                                   \
    typedef metal::vec<T, 2> name##2;                            \
    typedef metal::vec<T, 3> name##3;                            \
    typedef metal::vec<T, 4> name##4;                            \
    typedef metal::packed_vec<T, 2> packed_##name##2;            \
    typedef metal::packed_vec<T, 3> packed_##name##3;            \
    typedef metal::packed_vec<T, 4> packed_##name##4;
EMU_VEC_TYPES(float, float)
EMU_VEC_TYPES(half, half)
EMU_VEC_TYPES(bfloat, bfloat)
EMU_VEC_TYPES(int, int)
EMU_VEC_TYPES(uint, uint)
EMU_VEC_TYPES(short, short)
EMU_VEC_TYPES(ushort, ushort)
EMU_VEC_TYPES(char, char)
EMU_VEC_TYPES(uchar, uchar)
EMU_VEC_TYPES(long, long)
EMU_VEC_TYPES(ulong, ulong)
EMU_VEC_TYPES(bool, bool)
#undef EMU_VEC_TYPES

#ifndef INFINITY
#define INFINITY (__builtin_inff())
#endif
#ifndef NAN
#define NAN (__builtin_nanf(""))
#endif
#ifndef HUGE_VALF
#define HUGE_VALF (__builtin_huge_valf())
#endif
#define MAXFLOAT FLT_MAX
#define HALF_MAX 65504.0f
#define HALF_MIN 6.103515625e-05f
#define M_E_F 2.71828182845904523536f
#define M_LOG2E_F 1.44269504088896340736f
#define M_LOG10E_F 0.434294481903251827651f
#define M_LN2_F 0.693147180559945309417f
#define M_LN10_F 2.30258509299404568402f
#define M_PI_F 3.14159265358979323846f
#define M_PI_2_F 1.57079632679489661923f
#define M_PI_4_F 0.785398163397448309616f
#define M_1_PI_F 0.318309886183790671538f
#define M_2_PI_F 0.636619772367581343076f
#define M_2_SQRTPI_F 1.12837916709551257390f
#define M_SQRT2_F 1.41421356237309504880f
#define M_SQRT1_2_F 0.707106781186547524401f

// ---------------------------------------------------------------- entry support

namespace emu {

// tg_var backs a threadgroup variable declared in a kernel body: every
// thread of the group runs the same declarations in the same order, so the
// same bump offset names the same shared bytes in all of them.
template <class T>
inline T& tg_var() {
    return *reinterpret_cast<T*>(emu_tg_alloc(sizeof(T), alignof(T)));
}

// BufArg binds a [[buffer(n)]] or [[threadgroup(n)]] parameter: it converts
// to whatever pointer or reference type the kernel declares.
struct BufArg {
    void* p;
    template <class T>
    operator T*() const { return static_cast<T*>(p); }
    template <class T, std::enable_if_t<!std::is_pointer<T>::value, int> = 0>
    operator T&() const { return *static_cast<T*>(p); }
};

inline BufArg buf(int i) { return BufArg{reinterpret_cast<void*>(cur->g->d->buf[i])}; }
inline BufArg tgbuf(int i) { return BufArg{cur->g->shared + cur->g->tgoff[i]}; }

template <class T>
struct pos_conv {
    static T from(const uint32_t v[3]) { return T(v[0]); }
};
template <class E, int N>
struct pos_conv<metal::vec<E, N>> {
    static metal::vec<E, N> from(const uint32_t v[3]) {
        metal::vec<E, N> r;
        for (int i = 0; i < N; i++) r.d_[i] = E(v[i]);
        return r;
    }
};

// PosArg binds a position attribute (uint, ushort, uint2, uint3, …).
struct PosArg {
    uint32_t v[3];
    template <class T>
    operator T() const { return pos_conv<T>::from(v); }
};

inline PosArg pos(Pos kind) {
    const Fiber* f = cur;
    const Group* g = f->g;
    const Desc* d = g->d;
    PosArg a{{0, 0, 0}};
    switch (kind) {
        case kThreadPositionInGrid:
            for (int i = 0; i < 3; i++) a.v[i] = g->pos[i] * g->size[i] + f->local[i];
            break;
        case kThreadgroupPositionInGrid:
            for (int i = 0; i < 3; i++) a.v[i] = g->pos[i];
            break;
        case kThreadPositionInThreadgroup:
            for (int i = 0; i < 3; i++) a.v[i] = f->local[i];
            break;
        case kThreadIndexInThreadgroup:
            a.v[0] = f->tid;
            break;
        case kThreadsPerThreadgroup:
            for (int i = 0; i < 3; i++) a.v[i] = g->size[i];
            break;
        case kThreadgroupsPerGrid:
            for (int i = 0; i < 3; i++) a.v[i] = d->groups[i];
            break;
        case kThreadsPerGrid:
            for (int i = 0; i < 3; i++) a.v[i] = d->groups[i] * g->size[i];
            break;
        case kSimdgroupIndexInThreadgroup:
            a.v[0] = f->sg;
            break;
        case kThreadIndexInSimdgroup:
            a.v[0] = f->lane;
            break;
        case kSimdgroupsPerThreadgroup:
            a.v[0] = uint32_t(g->nsimd);
            break;
        case kThreadsPerSimdgroup:
            a.v[0] = kSimdWidth;
            break;
        case kThreadIndexInQuadgroup:
            a.v[0] = f->lane % 4;
            break;
        case kQuadgroupIndexInThreadgroup:
            a.v[0] = f->tid / 4;
            break;
    }
    return a;
}

// Function traits give the byte size a [[buffer(n)]] parameter must at
// least have (the referenced struct, or one element), for the Go side's
// bounds check of bound arguments.
template <class F>
struct fn_args;
template <class R, class... A>
struct fn_args<R (*)(A...)> {
    template <int I>
    using at = std::tuple_element_t<I, std::tuple<A...>>;
};
template <class P>
constexpr long long min_size() {
    if constexpr (std::is_reference<P>::value) {
        return sizeof(std::remove_reference_t<P>);
    } else if constexpr (std::is_pointer<P>::value) {
        using E = std::remove_cv_t<std::remove_pointer_t<P>>;
        if constexpr (std::is_void<E>::value)
            return 1;
        else
            return sizeof(E);
    } else {
        return 0;
    }
}

}  // namespace emu
