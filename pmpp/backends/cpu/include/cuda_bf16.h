// cuda_bf16.h shim for pmpp's CPU engine: __nv_bfloat16 and __nv_bfloat162.
// Storage is bfloat16 (the upper 16 bits of an IEEE binary32: 2 bytes, 4 for __nv_bfloat162), so
// arrays are numpy uint16 arrays of those bits (or ml_dtypes.bfloat16). Conversions from float round
// to nearest even, as __float2bfloat16 does; arithmetic is done in float and rounded to nearest even,
// which gives the correctly rounded bfloat16 result for + - * / (float has more than 2*8+2
// significand bits), as the GPU's bfloat16 instructions give; fma rounds once (to odd twice, then
// to nearest even).
#ifndef PMPP_CUDA_BF16_H
#define PMPP_CUDA_BF16_H

#include "pmpp_cuda.h"

namespace pmpp {
// float -> bfloat16 bits, round to nearest even; a NaN becomes the canonical NaN 0x7fff, as the
// GPU's cvt.rn.bf16.f32 makes it.
PMPP_NOCOV inline unsigned short f2bf(float f) {
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fffu;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}
PMPP_NOCOV inline float bf2f(unsigned short h) {
    const uint32_t u = uint32_t(h) << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}
// double -> float rounded to odd: rounding that float to bfloat16 then gives the bfloat16 nearest
// the double, as one rounding would.
inline float bf_round_to_odd(double x) {
    float f = float(x);
    if (double(f) == x) return f;
    unsigned int bits;
    __builtin_memcpy(&bits, &f, sizeof bits);
    if ((double(f) < 0 ? -double(f) : double(f)) > (x < 0 ? -x : x)) bits -= 1;   // toward zero
    bits |= 1u;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
}
// p + c rounded to odd in double (TwoSum finds what rounding to nearest dropped): with a product p
// of two bfloat16s (exact in double) and a tiny c, rounding to nearest could land on a bfloat16 tie
// that the exact sum is not on; rounded to odd it cannot.
inline double bf_sum_round_to_odd(double p, double c) {
    const double s = p + c, bb = s - p, e = (p - (s - bb)) + (c - bb);
    uint64_t bits;
    __builtin_memcpy(&bits, &s, 8);
    if (e == 0 || (bits & 1u) || !(s - s == 0)) return s;
    return nextafter(s, e > 0 ? HUGE_VAL : -HUGE_VAL);
}
}  // namespace pmpp

struct __nv_bfloat16_raw {
    unsigned short x;
};
struct __nv_bfloat162_raw {
    unsigned short x, y;
};

struct __attribute__((aligned(2))) __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    constexpr __nv_bfloat16(const __nv_bfloat16_raw &r) : __x(r.x) {}
    __nv_bfloat16(float f) : __x(::pmpp::f2bf(f)) {}
    __nv_bfloat16(double d) : __x(::pmpp::f2bf(::pmpp::bf_round_to_odd(d))) {}
    __nv_bfloat16(int i) : __x(::pmpp::f2bf(::pmpp::bf_round_to_odd(double(i)))) {}
    __nv_bfloat16(unsigned int i) : __x(::pmpp::f2bf(::pmpp::bf_round_to_odd(double(i)))) {}
    __nv_bfloat16(short i) : __x(::pmpp::f2bf(float(i))) {}
    __nv_bfloat16(unsigned short i) : __x(::pmpp::f2bf(float(i))) {}
    operator float() const { return ::pmpp::bf2f(__x); }
    operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
    __nv_bfloat16 &operator=(const __nv_bfloat16_raw &r) {
        __x = r.x;
        return *this;
    }
};

struct __attribute__((aligned(4))) __nv_bfloat162 {
    __nv_bfloat16 x, y;
    __nv_bfloat162() = default;
    constexpr __nv_bfloat162(const __nv_bfloat16 &a, const __nv_bfloat16 &b) : x(a), y(b) {}
    __nv_bfloat162(const __nv_bfloat162_raw &r) : x(__nv_bfloat16_raw{r.x}), y(__nv_bfloat16_raw{r.y}) {}
    operator __nv_bfloat162_raw() const { return __nv_bfloat162_raw{x.__x, y.__x}; }
};

typedef __nv_bfloat16 nv_bfloat16;
typedef __nv_bfloat162 nv_bfloat162;

namespace pmpp {
template <>
struct type_name<__nv_bfloat16> {
    static constexpr const char *value = "__nv_bfloat16";
};
template <>
struct type_name<__nv_bfloat162> {
    static constexpr const char *value = "__nv_bfloat162";
};
}  // namespace pmpp

// ---- conversions -----------------------------------------------------------------------------
static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rz(float f) {
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    return __nv_bfloat16(__nv_bfloat16_raw{(unsigned short)(u >> 16)});
}
static inline __nv_bfloat16 __double2bfloat16(double d) { return __nv_bfloat16(d); }
static inline float __bfloat162float(__nv_bfloat16 h) { return float(h); }
static inline __nv_bfloat16 __int2bfloat16_rn(int i) { return __nv_bfloat16(i); }
static inline int __bfloat162int_rn(__nv_bfloat16 h) { return int(nearbyintf(float(h))); }
static inline int __bfloat162int_rz(__nv_bfloat16 h) { return int(float(h)); }
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) {
    return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(b));
}
static inline __nv_bfloat162 __float22bfloat162_rn(float2 v) {
    return __nv_bfloat162(__nv_bfloat16(v.x), __nv_bfloat16(v.y));
}
static inline __nv_bfloat162 __float2bfloat162_rn(float a) {
    return __nv_bfloat162(__nv_bfloat16(a), __nv_bfloat16(a));
}
static inline float2 __bfloat1622float2(__nv_bfloat162 h) { return make_float2(float(h.x), float(h.y)); }
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
static inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162(a, a); }
static inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162(a, b); }
static inline float __low2float(__nv_bfloat162 h) { return float(h.x); }
static inline float __high2float(__nv_bfloat162 h) { return float(h.y); }
static inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
static inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }
static inline __nv_bfloat162 __lows2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(a.x, b.x); }
static inline __nv_bfloat162 __highs2bfloat162(__nv_bfloat162 a, __nv_bfloat162 b) { return __nv_bfloat162(a.y, b.y); }
static inline __nv_bfloat162 __lowhigh2highlow(__nv_bfloat162 a) { return __nv_bfloat162(a.y, a.x); }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline short __bfloat16_as_short(__nv_bfloat16 h) { return (short)h.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16(__nv_bfloat16_raw{u}); }
static inline __nv_bfloat16 __short_as_bfloat16(short s) {
    return __nv_bfloat16(__nv_bfloat16_raw{(unsigned short)s});
}

// ---- arithmetic ------------------------------------------------------------------------------
static inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(float(a) + float(b)); }
static inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(float(a) - float(b)); }
static inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(float(a) * float(b)); }
static inline __nv_bfloat16 __hdiv(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat16(float(a) / float(b)); }
static inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {   // a * b exact in double
    return __nv_bfloat16(__nv_bfloat16_raw{::pmpp::f2bf(::pmpp::bf_round_to_odd(
        ::pmpp::bf_sum_round_to_odd(double(float(a)) * double(float(b)), double(float(c)))))});
}
static inline __nv_bfloat16 __hneg(__nv_bfloat16 a) { return __nv_bfloat16(__nv_bfloat16_raw{(unsigned short)(a.__x ^ 0x8000u)}); }
static inline __nv_bfloat16 __habs(__nv_bfloat16 a) { return __nv_bfloat16(__nv_bfloat16_raw{(unsigned short)(a.__x & 0x7fffu)}); }
static inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) >= float(b) ? a : b; }
static inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) <= float(b) ? a : b; }
static inline bool __heq(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) == float(b); }
static inline bool __hne(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) != float(b); }
static inline bool __hlt(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) < float(b); }
static inline bool __hle(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) <= float(b); }
static inline bool __hgt(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) > float(b); }
static inline bool __hge(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) >= float(b); }
static inline bool __hisnan(__nv_bfloat16 a) { return (a.__x & 0x7fffu) > 0x7f80u; }
static inline int __hisinf(__nv_bfloat16 a) {
    return (a.__x & 0x7fffu) == 0x7f80u ? ((a.__x & 0x8000u) ? -1 : 1) : 0;
}
static inline __nv_bfloat16 hsqrt(__nv_bfloat16 a) { return __nv_bfloat16(sqrtf(float(a))); }
static inline __nv_bfloat16 hrsqrt(__nv_bfloat16 a) { return __nv_bfloat16(1.0f / sqrtf(float(a))); }
static inline __nv_bfloat16 hrcp(__nv_bfloat16 a) { return __nv_bfloat16(1.0f / float(a)); }
static inline __nv_bfloat16 hexp(__nv_bfloat16 a) { return __nv_bfloat16(expf(float(a))); }
static inline __nv_bfloat16 hlog(__nv_bfloat16 a) { return __nv_bfloat16(logf(float(a))); }
static inline __nv_bfloat16 htanh(__nv_bfloat16 a) { return __nv_bfloat16(tanhf(float(a))); }
static inline __nv_bfloat16 hfloor(__nv_bfloat16 a) { return __nv_bfloat16(floorf(float(a))); }
static inline __nv_bfloat16 hceil(__nv_bfloat16 a) { return __nv_bfloat16(ceilf(float(a))); }
static inline __nv_bfloat16 htrunc(__nv_bfloat16 a) { return __nv_bfloat16(truncf(float(a))); }
static inline __nv_bfloat16 hrint(__nv_bfloat16 a) { return __nv_bfloat16(nearbyintf(float(a))); }

static inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) {
    return __nv_bfloat162(__hadd(a.x, b.x), __hadd(a.y, b.y));
}
static inline __nv_bfloat162 __hsub2(__nv_bfloat162 a, __nv_bfloat162 b) {
    return __nv_bfloat162(__hsub(a.x, b.x), __hsub(a.y, b.y));
}
static inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) {
    return __nv_bfloat162(__hmul(a.x, b.x), __hmul(a.y, b.y));
}
static inline __nv_bfloat162 __h2div(__nv_bfloat162 a, __nv_bfloat162 b) {
    return __nv_bfloat162(__hdiv(a.x, b.x), __hdiv(a.y, b.y));
}
static inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
    return __nv_bfloat162(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
static inline __nv_bfloat162 __hneg2(__nv_bfloat162 a) { return __nv_bfloat162(__hneg(a.x), __hneg(a.y)); }
static inline __nv_bfloat162 __habs2(__nv_bfloat162 a) { return __nv_bfloat162(__habs(a.x), __habs(a.y)); }
static inline __nv_bfloat162 __hmax2(__nv_bfloat162 a, __nv_bfloat162 b) {
    return __nv_bfloat162(__hmax(a.x, b.x), __hmax(a.y, b.y));
}
static inline __nv_bfloat162 __hmin2(__nv_bfloat162 a, __nv_bfloat162 b) {
    return __nv_bfloat162(__hmin(a.x, b.x), __hmin(a.y, b.y));
}

static inline __nv_bfloat16 operator+(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return __hadd(a, b); }
static inline __nv_bfloat16 operator-(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return __hsub(a, b); }
static inline __nv_bfloat16 operator*(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return __hmul(a, b); }
static inline __nv_bfloat16 operator/(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return __hdiv(a, b); }
static inline __nv_bfloat16 operator-(const __nv_bfloat16 &a) { return __hneg(a); }
static inline __nv_bfloat16 operator+(const __nv_bfloat16 &a) { return a; }
static inline __nv_bfloat16 &operator+=(__nv_bfloat16 &a, const __nv_bfloat16 &b) { return a = __hadd(a, b); }
static inline __nv_bfloat16 &operator-=(__nv_bfloat16 &a, const __nv_bfloat16 &b) { return a = __hsub(a, b); }
static inline __nv_bfloat16 &operator*=(__nv_bfloat16 &a, const __nv_bfloat16 &b) { return a = __hmul(a, b); }
static inline __nv_bfloat16 &operator/=(__nv_bfloat16 &a, const __nv_bfloat16 &b) { return a = __hdiv(a, b); }
static inline bool operator==(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return __heq(a, b); }
static inline bool operator!=(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return __hne(a, b); }
static inline bool operator<(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return __hlt(a, b); }
static inline bool operator<=(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return __hle(a, b); }
static inline bool operator>(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return __hgt(a, b); }
static inline bool operator>=(const __nv_bfloat16 &a, const __nv_bfloat16 &b) { return __hge(a, b); }
static inline __nv_bfloat162 operator+(const __nv_bfloat162 &a, const __nv_bfloat162 &b) { return __hadd2(a, b); }
static inline __nv_bfloat162 operator-(const __nv_bfloat162 &a, const __nv_bfloat162 &b) { return __hsub2(a, b); }
static inline __nv_bfloat162 operator*(const __nv_bfloat162 &a, const __nv_bfloat162 &b) { return __hmul2(a, b); }
static inline __nv_bfloat162 operator/(const __nv_bfloat162 &a, const __nv_bfloat162 &b) { return __h2div(a, b); }
static inline __nv_bfloat162 operator-(const __nv_bfloat162 &a) { return __hneg2(a); }
static inline __nv_bfloat162 &operator+=(__nv_bfloat162 &a, const __nv_bfloat162 &b) { return a = __hadd2(a, b); }
static inline __nv_bfloat162 &operator*=(__nv_bfloat162 &a, const __nv_bfloat162 &b) { return a = __hmul2(a, b); }
static inline bool operator==(const __nv_bfloat162 &a, const __nv_bfloat162 &b) { return a.x == b.x && a.y == b.y; }
static inline bool operator!=(const __nv_bfloat162 &a, const __nv_bfloat162 &b) { return !(a == b); }

// ---- atomics: a compare-and-swap loop, the sum computed in float and rounded to nearest even
PMPP_ATOMIC_FN __nv_bfloat16 atomicAdd(__nv_bfloat16 *p, __nv_bfloat16 v) {
    PMPP_ATOMIC_CHECK(p);
    unsigned short *u = reinterpret_cast<unsigned short *>(p);
    unsigned short old = __atomic_load_n(u, __ATOMIC_RELAXED), nw;
    do {
        nw = ::pmpp::f2bf(::pmpp::bf2f(old) + ::pmpp::bf2f(v.__x));
    } while (!__atomic_compare_exchange_n(u, &old, nw, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return __nv_bfloat16(__nv_bfloat16_raw{old});
}
PMPP_ATOMIC_FN __nv_bfloat162 atomicAdd(__nv_bfloat162 *p, __nv_bfloat162 v) {
    PMPP_ATOMIC_CHECK(p);
    uint32_t *u = reinterpret_cast<uint32_t *>(p);
    uint32_t old = __atomic_load_n(u, __ATOMIC_RELAXED), nw;
    do {
        const unsigned short lo = ::pmpp::f2bf(::pmpp::bf2f((unsigned short)(old & 0xffffu)) + ::pmpp::bf2f(v.x.__x));
        const unsigned short hi = ::pmpp::f2bf(::pmpp::bf2f((unsigned short)(old >> 16)) + ::pmpp::bf2f(v.y.__x));
        nw = uint32_t(lo) | (uint32_t(hi) << 16);
    } while (!__atomic_compare_exchange_n(u, &old, nw, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return __nv_bfloat162(__nv_bfloat16(__nv_bfloat16_raw{(unsigned short)(old & 0xffffu)}),
                          __nv_bfloat16(__nv_bfloat16_raw{(unsigned short)(old >> 16)}));
}

#endif  // PMPP_CUDA_BF16_H
