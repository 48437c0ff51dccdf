// cuda_fp16.h shim for pmpp's CPU engine: __half and __half2.
// Storage is exactly IEEE binary16 (2 bytes, 4 for __half2), so arrays are layout-compatible
// with numpy.float16. Arithmetic is done in float and rounded to nearest-even, which gives the
// correctly rounded fp16 result for + - * / (float has more than 2*11+2 significand bits).
#ifndef PMPP_CUDA_FP16_H
#define PMPP_CUDA_FP16_H

#include "pmpp_cuda.h"

namespace pmpp {
// float -> binary16, round to nearest even (after F. Giesen, "float_to_half_fast3_rtne").
PMPP_NOCOV inline unsigned short f2h(float f) {
    const uint32_t f32infty = 255u << 23, f16max = (127u + 16u) << 23;
    const uint32_t denorm_magic_u = ((127u - 15u) + (23u - 10u) + 1u) << 23;
    uint32_t u;
    __builtin_memcpy(&u, &f, 4);
    const uint32_t sign = u & 0x80000000u;
    u ^= sign;
    unsigned short o;
    if (u >= f16max) {
        o = u > f32infty ? 0x7e00 : 0x7c00;
    } else if (u < (113u << 23)) {
        float magic, v;
        __builtin_memcpy(&magic, &denorm_magic_u, 4);
        __builtin_memcpy(&v, &u, 4);
        v += magic;
        uint32_t r;
        __builtin_memcpy(&r, &v, 4);
        o = (unsigned short)(r - denorm_magic_u);
    } else {
        const uint32_t mant_odd = (u >> 13) & 1u;
        u += ((uint32_t)(15 - 127) << 23) + 0xfffu;
        u += mant_odd;
        o = (unsigned short)(u >> 13);
    }
    return (unsigned short)(o | (sign >> 16));
}
PMPP_NOCOV inline float h2f(unsigned short h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) {
        const float v = float(mant) * 0x1p-24f;
        return sign ? -v : v;
    }
    const uint32_t u = exp == 31 ? (sign | 0x7f800000u | (mant << 13))
                                 : (sign | ((exp + 112u) << 23) | (mant << 13));
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}
}  // namespace pmpp

struct __half_raw {
    unsigned short x;
};
struct __half2_raw {
    unsigned short x, y;
};

struct __attribute__((aligned(2))) __half {
    unsigned short __x;
    __half() = default;
    constexpr __half(const __half_raw &r) : __x(r.x) {}
    __half(float f) : __x(::pmpp::f2h(f)) {}
    __half(double d) : __x(::pmpp::f2h(float(d))) {}
    __half(int i) : __x(::pmpp::f2h(float(i))) {}
    __half(unsigned int i) : __x(::pmpp::f2h(float(i))) {}
    __half(short i) : __x(::pmpp::f2h(float(i))) {}
    __half(unsigned short i) : __x(::pmpp::f2h(float(i))) {}
    __half(long long i) : __x(::pmpp::f2h(float(i))) {}
    __half(unsigned long long i) : __x(::pmpp::f2h(float(i))) {}
    operator float() const { return ::pmpp::h2f(__x); }
    operator __half_raw() const { return __half_raw{__x}; }
    __half &operator=(const __half_raw &r) {
        __x = r.x;
        return *this;
    }
};

struct __attribute__((aligned(4))) __half2 {
    __half x, y;
    __half2() = default;
    constexpr __half2(const __half &a, const __half &b) : x(a), y(b) {}
    __half2(const __half2_raw &r) : x(__half_raw{r.x}), y(__half_raw{r.y}) {}
    operator __half2_raw() const { return __half2_raw{x.__x, y.__x}; }
};

typedef __half half;
typedef __half2 half2;

namespace pmpp {
template <>
struct type_name<__half> {
    static constexpr const char *value = "__half";
};
template <>
struct type_name<__half2> {
    static constexpr const char *value = "__half2";
};
inline __half mkh(float f) { return __half(f); }
}  // namespace pmpp

// ---- conversions -----------------------------------------------------------------------------
static inline __half __float2half(float f) { return __half(f); }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline __half __double2half(double d) { return __half(float(d)); }
static inline float __half2float(__half h) { return float(h); }
static inline __half __int2half_rn(int i) { return __half(float(i)); }
static inline int __half2int_rn(__half h) { return int(nearbyintf(float(h))); }
static inline int __half2int_rz(__half h) { return int(float(h)); }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
static inline __half2 __float22half2_rn(float2 v) { return __half2(__half(v.x), __half(v.y)); }
static inline __half2 __float2half2_rn(float a) { return __half2(__half(a), __half(a)); }
static inline float2 __half22float2(__half2 h) { return make_float2(float(h.x), float(h.y)); }
static inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
static inline __half2 __half2half2(__half a) { return __half2(a, a); }
static inline __half2 make_half2(__half a, __half b) { return __half2(a, b); }
static inline float __low2float(__half2 h) { return float(h.x); }
static inline float __high2float(__half2 h) { return float(h.y); }
static inline __half __low2half(__half2 h) { return h.x; }
static inline __half __high2half(__half2 h) { return h.y; }
static inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
static inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
static inline __half2 __low2half2(__half2 a) { return __half2(a.x, a.x); }
static inline __half2 __high2half2(__half2 a) { return __half2(a.y, a.y); }
static inline __half2 __lowhigh2highlow(__half2 a) { return __half2(a.y, a.x); }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline short __half_as_short(__half h) { return (short)h.__x; }
static inline __half __ushort_as_half(unsigned short u) { return __half(__half_raw{u}); }
static inline __half __short_as_half(short s) { return __half(__half_raw{(unsigned short)s}); }

// ---- arithmetic ------------------------------------------------------------------------------
static inline __half __hadd(__half a, __half b) { return __half(float(a) + float(b)); }
static inline __half __hsub(__half a, __half b) { return __half(float(a) - float(b)); }
static inline __half __hmul(__half a, __half b) { return __half(float(a) * float(b)); }
static inline __half __hdiv(__half a, __half b) { return __half(float(a) / float(b)); }
// double -> float rounded to odd (an inexact result keeps its last bit set): rounding that float
// to half then gives the half nearest the double, as one rounding would; rounding to nearest twice
// would not (a float exactly halfway between two halves rounds to even, the double may not be).
static inline float __pmpp_float_round_to_odd(double x) {
    float f = float(x);
    if (double(f) == x) return f;
    unsigned int bits;
    __builtin_memcpy(&bits, &f, sizeof bits);
    if ((double(f) < 0 ? -double(f) : double(f)) > (x < 0 ? -x : x)) bits -= 1;   // toward zero
    bits |= 1u;
    __builtin_memcpy(&f, &bits, sizeof f);
    return f;
}
static inline __half __hfma(__half a, __half b, __half c) {   // a * b is exact in double
    return __half(__pmpp_float_round_to_odd(double(float(a)) * double(float(b)) + double(float(c))));
}
static inline __half __hneg(__half a) { return __half(__half_raw{(unsigned short)(a.__x ^ 0x8000u)}); }
static inline __half __habs(__half a) { return __half(__half_raw{(unsigned short)(a.__x & 0x7fffu)}); }
static inline __half __hmax(__half a, __half b) { return float(a) >= float(b) ? a : b; }
static inline __half __hmin(__half a, __half b) { return float(a) <= float(b) ? a : b; }
static inline __half __hadd_sat(__half a, __half b) { return __half(__saturatef(float(a) + float(b))); }
static inline __half __hmul_sat(__half a, __half b) { return __half(__saturatef(float(a) * float(b))); }
static inline __half2 __hadd2(__half2 a, __half2 b) { return __half2(__hadd(a.x, b.x), __hadd(a.y, b.y)); }
static inline __half2 __hsub2(__half2 a, __half2 b) { return __half2(__hsub(a.x, b.x), __hsub(a.y, b.y)); }
static inline __half2 __hmul2(__half2 a, __half2 b) { return __half2(__hmul(a.x, b.x), __hmul(a.y, b.y)); }
static inline __half2 __h2div(__half2 a, __half2 b) { return __half2(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); }
static inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
    return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y));
}
static inline __half2 __hneg2(__half2 a) { return __half2(__hneg(a.x), __hneg(a.y)); }
static inline __half2 __habs2(__half2 a) { return __half2(__habs(a.x), __habs(a.y)); }
static inline __half2 __hmax2(__half2 a, __half2 b) { return __half2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }
static inline __half2 __hmin2(__half2 a, __half2 b) { return __half2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }
static inline bool __heq(__half a, __half b) { return float(a) == float(b); }
static inline bool __hne(__half a, __half b) { return float(a) != float(b); }
static inline bool __hlt(__half a, __half b) { return float(a) < float(b); }
static inline bool __hle(__half a, __half b) { return float(a) <= float(b); }
static inline bool __hgt(__half a, __half b) { return float(a) > float(b); }
static inline bool __hge(__half a, __half b) { return float(a) >= float(b); }
static inline bool __hisnan(__half a) { return (a.__x & 0x7fffu) > 0x7c00u; }
static inline int __hisinf(__half a) {
    return (a.__x & 0x7fffu) == 0x7c00u ? ((a.__x & 0x8000u) ? -1 : 1) : 0;
}
static inline __half hsqrt(__half a) { return __half(sqrtf(float(a))); }
static inline __half hrsqrt(__half a) { return __half(1.0f / sqrtf(float(a))); }
static inline __half hrcp(__half a) { return __half(1.0f / float(a)); }
static inline __half hexp(__half a) { return __half(expf(float(a))); }
static inline __half hexp2(__half a) { return __half(exp2f(float(a))); }
static inline __half hlog(__half a) { return __half(logf(float(a))); }
static inline __half hlog2(__half a) { return __half(log2f(float(a))); }
static inline __half hsin(__half a) { return __half(sinf(float(a))); }
static inline __half hcos(__half a) { return __half(cosf(float(a))); }
static inline __half hfloor(__half a) { return __half(floorf(float(a))); }
static inline __half hceil(__half a) { return __half(ceilf(float(a))); }
static inline __half htrunc(__half a) { return __half(truncf(float(a))); }
static inline __half hrint(__half a) { return __half(nearbyintf(float(a))); }
static inline __half2 h2sqrt(__half2 a) { return __half2(hsqrt(a.x), hsqrt(a.y)); }
static inline __half2 h2exp(__half2 a) { return __half2(hexp(a.x), hexp(a.y)); }

static inline __half operator+(const __half &a, const __half &b) { return __hadd(a, b); }
static inline __half operator-(const __half &a, const __half &b) { return __hsub(a, b); }
static inline __half operator*(const __half &a, const __half &b) { return __hmul(a, b); }
static inline __half operator/(const __half &a, const __half &b) { return __hdiv(a, b); }
static inline __half operator-(const __half &a) { return __hneg(a); }
static inline __half operator+(const __half &a) { return a; }
static inline __half &operator+=(__half &a, const __half &b) { return a = __hadd(a, b); }
static inline __half &operator-=(__half &a, const __half &b) { return a = __hsub(a, b); }
static inline __half &operator*=(__half &a, const __half &b) { return a = __hmul(a, b); }
static inline __half &operator/=(__half &a, const __half &b) { return a = __hdiv(a, b); }
static inline bool operator==(const __half &a, const __half &b) { return __heq(a, b); }
static inline bool operator!=(const __half &a, const __half &b) { return __hne(a, b); }
static inline bool operator<(const __half &a, const __half &b) { return __hlt(a, b); }
static inline bool operator<=(const __half &a, const __half &b) { return __hle(a, b); }
static inline bool operator>(const __half &a, const __half &b) { return __hgt(a, b); }
static inline bool operator>=(const __half &a, const __half &b) { return __hge(a, b); }
static inline __half2 operator+(const __half2 &a, const __half2 &b) { return __hadd2(a, b); }
static inline __half2 operator-(const __half2 &a, const __half2 &b) { return __hsub2(a, b); }
static inline __half2 operator*(const __half2 &a, const __half2 &b) { return __hmul2(a, b); }
static inline __half2 operator/(const __half2 &a, const __half2 &b) { return __h2div(a, b); }
static inline __half2 operator-(const __half2 &a) { return __hneg2(a); }
static inline __half2 &operator+=(__half2 &a, const __half2 &b) { return a = __hadd2(a, b); }
static inline __half2 &operator-=(__half2 &a, const __half2 &b) { return a = __hsub2(a, b); }
static inline __half2 &operator*=(__half2 &a, const __half2 &b) { return a = __hmul2(a, b); }
static inline __half2 &operator/=(__half2 &a, const __half2 &b) { return a = __h2div(a, b); }
static inline bool operator==(const __half2 &a, const __half2 &b) { return a.x == b.x && a.y == b.y; }
static inline bool operator!=(const __half2 &a, const __half2 &b) { return !(a == b); }

// ---- atomics: a compare-and-swap loop, the sum computed in float and rounded to nearest even
PMPP_ATOMIC_FN __half atomicAdd(__half *p, __half v) {
    PMPP_ATOMIC_CHECK(p);
    unsigned short *u = reinterpret_cast<unsigned short *>(p);
    unsigned short old = __atomic_load_n(u, __ATOMIC_RELAXED), nw;
    do {
        nw = ::pmpp::f2h(::pmpp::h2f(old) + ::pmpp::h2f(v.__x));
    } while (!__atomic_compare_exchange_n(u, &old, nw, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return __half(__half_raw{old});
}
PMPP_ATOMIC_FN __half2 atomicAdd(__half2 *p, __half2 v) {
    PMPP_ATOMIC_CHECK(p);
    uint32_t *u = reinterpret_cast<uint32_t *>(p);
    uint32_t old = __atomic_load_n(u, __ATOMIC_RELAXED), nw;
    do {
        const unsigned short lo = ::pmpp::f2h(::pmpp::h2f((unsigned short)(old & 0xffffu)) +
                                              ::pmpp::h2f(v.x.__x));
        const unsigned short hi =
            ::pmpp::f2h(::pmpp::h2f((unsigned short)(old >> 16)) + ::pmpp::h2f(v.y.__x));
        nw = uint32_t(lo) | (uint32_t(hi) << 16);
    } while (!__atomic_compare_exchange_n(u, &old, nw, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    return __half2(__half(__half_raw{(unsigned short)(old & 0xffffu)}),
                   __half(__half_raw{(unsigned short)(old >> 16)}));
}

#endif  // PMPP_CUDA_FP16_H
