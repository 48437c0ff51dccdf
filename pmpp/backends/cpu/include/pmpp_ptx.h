// pmpp_ptx.h: what inline PTX is translated into. Included by the prelude (pmpp_cuda.h);
// ptx.py turns each asm statement of a kernel into C++ that calls these, on the asm's own line.
// Semantics follow the PTX ISA's description of each instruction; loads and stores are not
// here: ptx.py writes them as plain dereferences in the kernel's code, so that the checks and
// the counters see them as they see a C++ access.
#ifndef PMPP_PTX_H
#define PMPP_PTX_H

#include <limits>
#if defined(__linux__)
#include <sched.h>
#include <sys/sysinfo.h>
#endif

namespace pmpp {
namespace ptx {

// A register holds bits: a value of the same size is reinterpreted (a float in an "r" register,
// a pointer in an "l" one), a value of another size converted (an immediate, a bool).
template <class T, class U>
inline T as(U v) {
    if constexpr (sizeof(T) == sizeof(U) && std::is_trivially_copyable<U>::value &&
                  !std::is_same<T, bool>::value) {
        T r;
        __builtin_memcpy(&r, &v, sizeof r);
        return r;
    } else {
        return static_cast<T>(v);
    }
}

// ---- special registers -----------------------------------------------------------------
inline uint32_t linear_tid() {
    return threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;
}
inline uint32_t laneid() { return linear_tid() % 32u; }
// A GPU's %warpid is the warp's slot on its SM, which can change; here it is the warp's index in
// its block (linear thread index / 32), and %nwarpid the block's number of warps.
inline uint32_t warpid() { return linear_tid() / 32u; }
inline uint32_t nwarpid() { return (blockDim.x * blockDim.y * blockDim.z + 31u) / 32u; }
// %smid: the CPU core the block's OS thread runs on now (it may change, as the PTX ISA allows
// an SM id to), %nsmid: the machine's cores. 0 and 1 where the system does not say.
inline uint32_t smid() {
#if defined(__linux__)
    const int cpu = sched_getcpu();
    return cpu < 0 ? 0u : uint32_t(cpu);
#else
    return 0u;
#endif
}
inline uint32_t nsmid() {
#if defined(__linux__)
    static const int cores = get_nprocs_conf();
    return cores < 1 ? 1u : uint32_t(cores);
#else
    return 1u;
#endif
}
inline uint32_t lanemask_eq() { return 1u << laneid(); }
inline uint32_t lanemask_lt() { return lanemask_eq() - 1u; }
inline uint32_t lanemask_le() { return uint32_t((2ull << laneid()) - 1u); }
inline uint32_t lanemask_gt() { return ~lanemask_le(); }
inline uint32_t lanemask_ge() { return ~lanemask_lt(); }
inline uint64_t clock64_() { return uint64_t(::clock64()); }
inline uint32_t clock32() { return uint32_t(::clock64()); }
inline uint64_t globaltimer() { return ::__globaltimer(); }

// ---- integer arithmetic: wraps around, as the hardware does ----------------------------
template <class T>
using unsigned_of = typename std::conditional<std::is_integral<T>::value, std::make_unsigned<T>,
                                              std::common_type<T>>::type::type;
template <class T>
inline T add(T a, T b) { return T(unsigned_of<T>(a) + unsigned_of<T>(b)); }
template <class T>
inline T sub(T a, T b) { return T(unsigned_of<T>(a) - unsigned_of<T>(b)); }
template <class T>
inline T mul_lo(T a, T b) { return T(unsigned_of<T>(a) * unsigned_of<T>(b)); }
template <class T>
inline T neg(T a) {
    if constexpr (std::is_floating_point<T>::value) return -a;
    else return T(unsigned_of<T>(0) - unsigned_of<T>(a));
}
template <class T>
inline T abs_(T a) {
    if constexpr (std::is_floating_point<T>::value) return T(std::fabs(a));
    else return a < 0 ? neg(a) : a;
}
template <class T>
struct wider;
template <> struct wider<int16_t> { typedef int32_t type; };
template <> struct wider<uint16_t> { typedef uint32_t type; };
template <> struct wider<int32_t> { typedef int64_t type; };
template <> struct wider<uint32_t> { typedef uint64_t type; };
template <> struct wider<int64_t> { typedef __int128 type; };
template <> struct wider<uint64_t> { typedef unsigned __int128 type; };
template <class T>
inline typename wider<T>::type mul_wide(T a, T b) {
    typedef typename wider<T>::type W;
    return W(a) * W(b);
}
template <class T>
inline T mul_hi(T a, T b) { return T(mul_wide(a, b) >> (8 * sizeof(T))); }
template <class T>
inline T min_(T a, T b) {
    if constexpr (std::is_floating_point<T>::value) return std::fmin(a, b);
    else return a < b ? a : b;
}
template <class T>
inline T max_(T a, T b) {
    if constexpr (std::is_floating_point<T>::value) return std::fmax(a, b);
    else return a > b ? a : b;
}
// shl/shr: shift amounts past the width give 0 (or the sign, for shr of a signed type).
template <class T>
inline T shl(T a, uint32_t n) { return n >= 8 * sizeof(T) ? T(0) : T(unsigned_of<T>(a) << n); }
template <class T>
inline T shr(T a, uint32_t n) {
    const uint32_t bits = 8 * sizeof(T);
    if (std::is_signed<T>::value) return T(a >> (n >= bits ? bits - 1 : n));
    return n >= bits ? T(0) : T(a >> n);
}
template <class T>
inline uint32_t popc(T a) { return uint32_t(__builtin_popcountll(uint64_t(unsigned_of<T>(a)))); }
template <class T>
inline uint32_t clz(T a) {
    const uint64_t v = uint64_t(unsigned_of<T>(a));
    return v == 0 ? uint32_t(8 * sizeof(T)) : uint32_t(__builtin_clzll(v)) - uint32_t(64 - 8 * sizeof(T));
}
inline uint32_t brev(uint32_t a) { return ::__brev(a); }
inline uint64_t brev(uint64_t a) { return ::__brevll(a); }
// bfe: len bits of a from bit pos, sign-extended for signed types (PTX ISA, bfe).
template <class T>
inline T bfe(T a, uint32_t b, uint32_t c) {
    const uint32_t msb = 8 * sizeof(T) - 1, pos = b & 0xff, len = c & 0xff;
    const unsigned_of<T> u = unsigned_of<T>(a);
    const uint32_t top = pos + len - 1 < msb ? pos + len - 1 : msb;
    const bool sbit = std::is_signed<T>::value && len != 0 && ((u >> (pos > msb ? msb : top)) & 1u);
    unsigned_of<T> d = 0;
    for (uint32_t i = 0; i <= msb; ++i) {
        const bool bit = (i < len && pos + i <= msb) ? ((u >> (pos + i)) & 1u) : sbit;
        d |= unsigned_of<T>(bit) << i;
    }
    return T(d);
}
// bfi: a's low len bits put into b at bit pos (PTX ISA, bfi).
template <class T>
inline T bfi(T a, T b, uint32_t c, uint32_t d) {
    const uint32_t msb = 8 * sizeof(T) - 1, pos = c & 0xff, len = d & 0xff;
    unsigned_of<T> f = unsigned_of<T>(b);
    for (uint32_t i = 0; i < len && pos + i <= msb; ++i) {
        const unsigned_of<T> one = unsigned_of<T>(1) << (pos + i);
        f = (f & ~one) | (((unsigned_of<T>(a) >> i) & 1u) ? one : 0);
    }
    return T(f);
}
// prmt.b32, default mode: each selector nibble picks one of the 8 bytes of {b, a}; its bit 3
// replicates that byte's sign bit instead.
inline uint32_t prmt(uint32_t a, uint32_t b, uint32_t c) {
    const uint64_t v = (uint64_t(b) << 32) | a;
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) {
        const uint32_t sel = (c >> (4 * i)) & 0xf;
        uint32_t byte = uint32_t(v >> (8 * (sel & 7))) & 0xff;
        if (sel & 8) byte = (byte & 0x80) ? 0xff : 0;
        r |= byte << (8 * i);
    }
    return r;
}
// lop3.b32: bit i of the result is bit (a_i << 2 | b_i << 1 | c_i) of the look-up table
// (the table of a function f is f(0xf0, 0xcc, 0xaa)).
inline uint32_t lop3(uint32_t a, uint32_t b, uint32_t c, uint32_t lut) {
    uint32_t r = 0;
    for (int k = 0; k < 8; ++k)
        if ((lut >> k) & 1u) r |= ((k & 4) ? a : ~a) & ((k & 2) ? b : ~b) & ((k & 1) ? c : ~c);
    return r;
}

// ---- conversions ----------------------------------------------------------------------
enum round_mode { round_nearest = 0, round_zero, round_down, round_up };
template <class F>
inline F round_to_integer(F x, int mode) {
    switch (mode) {
        case round_zero: return std::trunc(x);
        case round_down: return std::floor(x);
        case round_up: return std::ceil(x);
        default: return std::nearbyint(x);
    }
}
// float to integer: rounded as asked, NaN gives 0 and values out of range saturate (PTX ISA, cvt).
template <class I, class F>
inline I float_to_int(F x, int mode) {
    if (x != x) return I(0);
    const F r = round_to_integer(x, mode);
    if (r <= F(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
    if (r >= F(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
    return I(r);
}
// cvt.rna.tf32.f32: keep 10 of the 23 mantissa bits, to nearest, ties away from zero.
inline uint32_t tf32_rna(float x) {
    const uint32_t u = as<uint32_t>(x);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x7fffffu)) return 0x7fffffffu;  // NaN
    return (u + 0x1000u) & 0xffffe000u;
}
inline float saturate_(float x) { return ::__saturatef(x); }

// ---- warp, block and memory operations ---------------------------------------------------
// shfl.sync as the PTX ISA specifies it (source lane from b and the clamp/segment word c), then
// an idx shuffle from that lane; pred: whether the source lane was in range.
inline uint32_t shfl(int mode, uint32_t a, uint32_t b, uint32_t c, uint32_t mask, bool *pred,
                     const char *file, int line) {
    const int lane = int(laneid()), bval = int(b & 31u), cval = int(c & 31u);
    const int segmask = int((c >> 8) & 31u);
    const int max_lane = (lane & segmask) | (cval & ~segmask), min_lane = lane & segmask;
    int j;
    bool in_range;
    switch (mode) {
        case PMPP_W_SHFL_UP: j = lane - bval, in_range = j >= max_lane; break;
        case PMPP_W_SHFL_DOWN: j = lane + bval, in_range = j <= max_lane; break;
        case PMPP_W_SHFL_XOR: j = lane ^ bval, in_range = j <= max_lane; break;
        default: j = min_lane | (bval & ~segmask), in_range = j <= max_lane; break;
    }
    if (pred) *pred = in_range;
    return uint32_t(pmpp_warp_op(PMPP_W_SHFL_IDX, mask, a, in_range ? j : lane, 32, file, line));
}
inline void bar_sync(uint32_t id, const char *file, int line) {
    if (id != 0) pmpp_trap("bar.sync with a barrier other than 0 (named barriers)", file, line);
    pmpp_syncthreads(file, line);
}
// ld.volatile / ld.relaxed / ld.acquire / ld.global.cg|cv: as __ldcv (a poll, see the atomics).
template <class T>
inline T load_coherent(const T *p) { return ::pmpp::coherent_load(p); }
template <class T>
inline void store_coherent(T *p, T v) { ::pmpp::coherent_store(p, v); }
template <class T, int N>
struct alignas(sizeof(T) * N) vec {
    T v[N];
};

}  // namespace ptx
}  // namespace pmpp

#endif  // PMPP_PTX_H
