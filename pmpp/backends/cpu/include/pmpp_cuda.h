// pmpp_cuda.h: the CUDA subset, for g++. Force-included (g++ -include pmpp_cuda.h) before every
// kernel file that pmpp's CPU engine compiles. Kernel code calls into the runtime library
// (pmpp_runtime.cpp) for barriers, warp primitives and shared memory.
//
// PMPP_CHECK=1 (checked builds, compiled with -fsanitize=thread instrumentation, see toolchain.py):
// helpers that touch memory the kernel cannot name (the runtime's thread context, kernel
// argument slots) and the atomics are not instrumented, and therefore never inlined into kernel
// code (g++ does not inline across differing sanitizer attributes).
#ifndef PMPP_CUDA_H
#define PMPP_CUDA_H

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmath>
#include <type_traits>
#include <utility>

#include "pmpp_abi.h"

#ifndef PMPP_CHECK
#define PMPP_CHECK 0
#endif

// PMPP_COUNT=1 (count builds: checked builds that also call the runtime at every basic block,
// -fsanitize-coverage=trace-pc): the helpers below add no basic blocks of their own, and copies
// that a GPU makes outside the load/store instructions (cp.async, bulk copies) are not counted.
#ifndef PMPP_COUNT
#define PMPP_COUNT 0
#endif
#if PMPP_COUNT && defined(__has_attribute)
#if __has_attribute(no_sanitize_coverage)
#define PMPP_NOCOV __attribute__((no_sanitize_coverage))
#endif
#endif
#ifndef PMPP_NOCOV
#define PMPP_NOCOV
#endif
// clang instruments atomics even in a no_sanitize("thread") function (they would be checked and
// counted twice); disable_sanitizer_instrumentation leaves all of it out.
#if defined(__has_attribute) && __has_attribute(disable_sanitizer_instrumentation)
#define PMPP_NO_TSAN no_sanitize("thread"), disable_sanitizer_instrumentation
#else
#define PMPP_NO_TSAN no_sanitize("thread")
#endif
#if PMPP_COUNT
#define PMPP_UNCOUNTED __attribute__((PMPP_NO_TSAN, noinline, visibility("hidden"))) PMPP_NOCOV
#else
#define PMPP_UNCOUNTED
#endif

#if PMPP_CHECK
// Not inlined into instrumented code (the sanitizer attributes differ), so called: hidden, the call
// goes straight to the module's own copy instead of through the PLT.
#define PMPP_NOSAN __attribute__((PMPP_NO_TSAN, visibility("hidden"))) PMPP_NOCOV
#define PMPP_ATOMIC_FN inline __attribute__((PMPP_NO_TSAN, noinline, visibility("hidden"))) PMPP_NOCOV
#define PMPP_ATOMIC_CHECK(p) \
    pmpp_check_atomic((const void *)(p), sizeof(*(p)), __builtin_return_address(0))
#else
#define PMPP_NOSAN
#define PMPP_ATOMIC_FN inline
#define PMPP_ATOMIC_CHECK(p) ((void)0)
#endif

// ---- what the CUDA compiler defines ----------------------------------------------------------
#define __CUDACC__ 1
#define __CUDA_ARCH__ 800
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 0
#define CUDART_VERSION 12000
#define PMPP_CPU_ENGINE 1

#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __forceinline__ inline __attribute__((always_inline))
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)
#define __maxnreg__(n)
#define __cudart_builtin__
#define __device_builtin__
// __noinline__ is rewritten in the kernel source itself (libstdc++ uses __attribute__((__noinline__))).
// __shared__ declarations are rewritten before compiling (see source.py); one left over is an error.
#define __shared__                                                                           \
    static_assert(false,                                                                     \
                  "this __shared__ declaration could not be rewritten by pmpp's CPU engine "   \
                  "(it sits in a macro or in an included header): declare __shared__ "         \
                  "variables as plain statements in the kernel's own .cu file");

namespace pmpp {
template <class...>
inline constexpr bool unsupported = false;
}

// ---- vector types (alignment as in CUDA's vector_types.h) --------------------------------
#define PMPP_VEC_ALIGN2(T) (2 * sizeof(T) > 16 ? 16 : 2 * sizeof(T))
#define PMPP_VEC_ALIGN4(T) (4 * sizeof(T) > 16 ? 16 : 4 * sizeof(T))
#define PMPP_VECTOR_TYPES(N, T)                                                                \
    struct __attribute__((aligned(sizeof(T)))) N##1 { T x; };                                  \
    struct __attribute__((aligned(PMPP_VEC_ALIGN2(T)))) N##2 { T x, y; };                      \
    struct N##3 { T x, y, z; };                                                                \
    struct __attribute__((aligned(PMPP_VEC_ALIGN4(T)))) N##4 { T x, y, z, w; };                \
    static inline N##1 make_##N##1(T x) { return N##1{x}; }                                    \
    static inline N##2 make_##N##2(T x, T y) { return N##2{x, y}; }                            \
    static inline N##3 make_##N##3(T x, T y, T z) { return N##3{x, y, z}; }                    \
    static inline N##4 make_##N##4(T x, T y, T z, T w) { return N##4{x, y, z, w}; }
PMPP_VECTOR_TYPES(char, signed char)
PMPP_VECTOR_TYPES(uchar, unsigned char)
PMPP_VECTOR_TYPES(short, short)
PMPP_VECTOR_TYPES(ushort, unsigned short)
PMPP_VECTOR_TYPES(int, int)
PMPP_VECTOR_TYPES(uint, unsigned int)
PMPP_VECTOR_TYPES(long, long)
PMPP_VECTOR_TYPES(ulong, unsigned long)
PMPP_VECTOR_TYPES(longlong, long long)
PMPP_VECTOR_TYPES(ulonglong, unsigned long long)
PMPP_VECTOR_TYPES(float, float)
PMPP_VECTOR_TYPES(double, double)
#undef PMPP_VECTOR_TYPES

struct dim3 {  // PMPP_NOSAN: built by blockDim and gridDim, which are PMPP_NOSAN too (inlined)
    unsigned int x, y, z;
    PMPP_NOSAN constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
        : x(vx), y(vy), z(vz) {}
    PMPP_NOSAN constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    PMPP_NOSAN constexpr operator uint3() const { return uint3{x, y, z}; }
};

static constexpr int warpSize = 32;

// ---- the built-in variables -----------------------------------------------------------------
namespace pmpp {
namespace detail {
#if PMPP_CHECK
PMPP_NOSAN inline uint3 thread_idx() {
    const pmpp_dim &d = pmpp_cur->thread_idx;
    return uint3{d.x, d.y, d.z};
}
PMPP_NOSAN inline uint3 block_idx() {
    const pmpp_dim &d = pmpp_cur->block_idx;
    return uint3{d.x, d.y, d.z};
}
PMPP_NOSAN inline dim3 block_dim() {
    const pmpp_dim &d = pmpp_cur->block_dim;
    return dim3(d.x, d.y, d.z);
}
PMPP_NOSAN inline dim3 grid_dim() {
    const pmpp_dim &d = pmpp_cur->grid_dim;
    return dim3(d.x, d.y, d.z);
}
#else
inline const uint3 &thread_idx() { return *reinterpret_cast<const uint3 *>(&pmpp_cur->thread_idx); }
inline const uint3 &block_idx() { return *reinterpret_cast<const uint3 *>(&pmpp_cur->block_idx); }
inline const dim3 &block_dim() { return *reinterpret_cast<const dim3 *>(&pmpp_cur->block_dim); }
inline const dim3 &grid_dim() { return *reinterpret_cast<const dim3 *>(&pmpp_cur->grid_dim); }
#endif
}  // namespace detail
}  // namespace pmpp
#define threadIdx (::pmpp::detail::thread_idx())
#define blockIdx (::pmpp::detail::block_idx())
#define blockDim (::pmpp::detail::block_dim())
#define gridDim (::pmpp::detail::grid_dim())

// ---- barriers, fences -----------------------------------------------------------------------
#define __syncthreads() pmpp_syncthreads(__FILE__, __LINE__)
#define __syncthreads_count(p) pmpp_syncthreads_op(PMPP_BAR_COUNT, !!(p), __FILE__, __LINE__)
#define __syncthreads_and(p) pmpp_syncthreads_op(PMPP_BAR_AND, !!(p), __FILE__, __LINE__)
#define __syncthreads_or(p) pmpp_syncthreads_op(PMPP_BAR_OR, !!(p), __FILE__, __LINE__)
#define __threadfence() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define __threadfence_system() __atomic_thread_fence(__ATOMIC_SEQ_CST)
// A block's threads all run on one OS thread: ordering the compiler is enough.
#define __threadfence_block() __atomic_signal_fence(__ATOMIC_SEQ_CST)

// ---- warp primitives -------------------------------------------------------------------------
namespace pmpp {
template <class T>
inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "warp shuffles take values of at most 8 bytes (int, unsigned, long long, "
                  "float, double, __half, __half2, ...)");
    uint64_t b = 0;
    __builtin_memcpy(&b, &v, sizeof(T));
    return b;
}
template <class T>
inline T from_bits(uint64_t b) {
    T v;
    __builtin_memcpy(&v, &b, sizeof(T));
    return v;
}
template <class T>
inline T shfl(int op, const char *file, int line, unsigned mask, T var, int arg, int width) {
    return from_bits<T>(pmpp_warp_op(op, mask, to_bits(var), arg, width, file, line));
}
template <class T>
inline T shfl_sync(const char *f, int l, unsigned mask, T var, int src, int width = warpSize) {
    return shfl(PMPP_W_SHFL_IDX, f, l, mask, var, src, width);
}
template <class T>
inline T shfl_up_sync(const char *f, int l, unsigned mask, T var, unsigned delta,
                      int width = warpSize) {
    return shfl(PMPP_W_SHFL_UP, f, l, mask, var, int(delta), width);
}
template <class T>
inline T shfl_down_sync(const char *f, int l, unsigned mask, T var, unsigned delta,
                        int width = warpSize) {
    return shfl(PMPP_W_SHFL_DOWN, f, l, mask, var, int(delta), width);
}
template <class T>
inline T shfl_xor_sync(const char *f, int l, unsigned mask, T var, int lane_mask,
                       int width = warpSize) {
    return shfl(PMPP_W_SHFL_XOR, f, l, mask, var, lane_mask, width);
}
inline void syncwarp(const char *f, int l, unsigned mask = 0xffffffffu) {
    pmpp_warp_op(PMPP_W_SYNC, mask, 0, 0, 32, f, l);
}
inline unsigned vote(int op, const char *f, int l, unsigned mask, int pred) {
    return unsigned(pmpp_warp_op(op, mask, pred != 0, 0, 32, f, l));
}
template <class T>
inline unsigned match_any(const char *f, int l, unsigned mask, T value) {
    return unsigned(pmpp_warp_op(PMPP_W_MATCH_ANY, mask, to_bits(value), 0, 32, f, l));
}
template <class T>
inline unsigned match_all(const char *f, int l, unsigned mask, T value, int *pred) {
    unsigned r = unsigned(pmpp_warp_op(PMPP_W_MATCH_ALL, mask, to_bits(value), 0, 32, f, l));
    *pred = r != 0;
    return r;
}
inline unsigned reduce_u(int op, const char *f, int l, unsigned mask, unsigned v) {
    return unsigned(pmpp_warp_op(op, mask, v, 0, 32, f, l));
}
inline int reduce_i(int op, const char *f, int l, unsigned mask, int v) {
    return int(unsigned(pmpp_warp_op(op, mask, unsigned(v), 0, 32, f, l)));
}
}  // namespace pmpp

#define __shfl_sync(...) ::pmpp::shfl_sync(__FILE__, __LINE__, __VA_ARGS__)
#define __shfl_up_sync(...) ::pmpp::shfl_up_sync(__FILE__, __LINE__, __VA_ARGS__)
#define __shfl_down_sync(...) ::pmpp::shfl_down_sync(__FILE__, __LINE__, __VA_ARGS__)
#define __shfl_xor_sync(...) ::pmpp::shfl_xor_sync(__FILE__, __LINE__, __VA_ARGS__)
#define __syncwarp(...) ::pmpp::syncwarp(__FILE__, __LINE__ __VA_OPT__(, ) __VA_ARGS__)
#define __ballot_sync(m, p) ::pmpp::vote(PMPP_W_BALLOT, __FILE__, __LINE__, (m), !!(p))
#define __any_sync(m, p) int(::pmpp::vote(PMPP_W_ANY, __FILE__, __LINE__, (m), !!(p)))
#define __all_sync(m, p) int(::pmpp::vote(PMPP_W_ALL, __FILE__, __LINE__, (m), !!(p)))
#define __uni_sync(m, p) int(::pmpp::vote(PMPP_W_ALL, __FILE__, __LINE__, (m), !!(p)) || !::pmpp::vote(PMPP_W_ANY, __FILE__, __LINE__, (m), !!(p)))
#define __match_any_sync(m, v) ::pmpp::match_any(__FILE__, __LINE__, (m), (v))
#define __match_all_sync(m, v, pred) ::pmpp::match_all(__FILE__, __LINE__, (m), (v), (pred))
#define __activemask() pmpp_activemask()
#define __lanemask_lt() ((1u << (threadIdx.x & 31u)) - 1u)
#define __reduce_add_sync(m, v) \
    ::pmpp::reduce_u(PMPP_W_REDUCE_ADD, __FILE__, __LINE__, (m), (unsigned)(v))
#define __reduce_and_sync(m, v) \
    ::pmpp::reduce_u(PMPP_W_REDUCE_AND, __FILE__, __LINE__, (m), (unsigned)(v))
#define __reduce_or_sync(m, v) \
    ::pmpp::reduce_u(PMPP_W_REDUCE_OR, __FILE__, __LINE__, (m), (unsigned)(v))
#define __reduce_xor_sync(m, v) \
    ::pmpp::reduce_u(PMPP_W_REDUCE_XOR, __FILE__, __LINE__, (m), (unsigned)(v))
namespace pmpp {
template <class T>
inline T reduce_minmax(bool is_max, const char *f, int l, unsigned m, T v) {
    if (std::is_signed<T>::value)
        return T(reduce_i(is_max ? PMPP_W_REDUCE_MAX_I : PMPP_W_REDUCE_MIN_I, f, l, m, int(v)));
    return T(reduce_u(is_max ? PMPP_W_REDUCE_MAX_U : PMPP_W_REDUCE_MIN_U, f, l, m, unsigned(v)));
}
}  // namespace pmpp
#define __reduce_min_sync(m, v) ::pmpp::reduce_minmax(false, __FILE__, __LINE__, (m), (v))
#define __reduce_max_sync(m, v) ::pmpp::reduce_minmax(true, __FILE__, __LINE__, (m), (v))

// ---- atomics (blocks run on several OS threads: these are real atomics) ------------------
// A block's threads are fibers that switch only where they wait (barriers, warp primitives), so
// a thread spinning on a flag that another warp of its block sets would never let that warp run.
// An atomic that leaves memory as it was (an atomicAdd of 0, a failed atomicCAS, an atomicExch
// of the value already there...) is what such a wait is made of: after PMPP_POLLS_BEFORE_YIELD
// of them in a row on one address the thread lets the others run, as a GPU's warp scheduler
// would. Atomics that change memory (a histogram's) cost one compare more, no call.
namespace pmpp {
PMPP_NOSAN inline void note_poll(const void *addr) {
    pmpp_thread_ctx *ctx = pmpp_cur;
    if (ctx->poll_addr != addr) {
        ctx->poll_addr = addr;
        ctx->poll_count = 0;
    } else if (++ctx->poll_count >= PMPP_POLLS_BEFORE_YIELD) {
        ctx->poll_count = 0;
        pmpp_yield();
    }
}
}  // namespace pmpp
#define PMPP_POLLED_IF(unchanged, p) \
    if (__builtin_expect(!!(unchanged), 0)) ::pmpp::note_poll(p)
#define PMPP_RLX __ATOMIC_RELAXED
#define PMPP_ATOMIC_INT(T)                                                                      \
    PMPP_ATOMIC_FN T atomicAdd(T *p, T v) {                                                     \
        PMPP_ATOMIC_CHECK(p);                                                                   \
        T old = __atomic_fetch_add(p, v, PMPP_RLX);                                             \
        PMPP_POLLED_IF(v == 0, p);                                                              \
        return old;                                                                             \
    }                                                                                           \
    PMPP_ATOMIC_FN T atomicExch(T *p, T v) {                                                    \
        PMPP_ATOMIC_CHECK(p);                                                                   \
        T old = __atomic_exchange_n(p, v, PMPP_RLX);                                            \
        PMPP_POLLED_IF(old == v, p);                                                            \
        return old;                                                                             \
    }                                                                                           \
    PMPP_ATOMIC_FN T atomicCAS(T *p, T compare, T v) {                                          \
        PMPP_ATOMIC_CHECK(p);                                                                   \
        bool swapped = __atomic_compare_exchange_n(p, &compare, v, false, PMPP_RLX, PMPP_RLX);  \
        PMPP_POLLED_IF(!swapped, p);                                                            \
        return compare;                                                                         \
    }                                                                                           \
    PMPP_ATOMIC_FN T atomicAnd(T *p, T v) {                                                     \
        PMPP_ATOMIC_CHECK(p);                                                                   \
        T old = __atomic_fetch_and(p, v, PMPP_RLX);                                             \
        PMPP_POLLED_IF((old & v) == old, p);                                                    \
        return old;                                                                             \
    }                                                                                           \
    PMPP_ATOMIC_FN T atomicOr(T *p, T v) {                                                      \
        PMPP_ATOMIC_CHECK(p);                                                                   \
        T old = __atomic_fetch_or(p, v, PMPP_RLX);                                              \
        PMPP_POLLED_IF((old | v) == old, p);                                                    \
        return old;                                                                             \
    }                                                                                           \
    PMPP_ATOMIC_FN T atomicXor(T *p, T v) {                                                     \
        PMPP_ATOMIC_CHECK(p);                                                                   \
        T old = __atomic_fetch_xor(p, v, PMPP_RLX);                                             \
        PMPP_POLLED_IF(v == 0, p);                                                              \
        return old;                                                                             \
    }
#define PMPP_ATOMIC_MINMAX(T)                                                                   \
    PMPP_ATOMIC_FN T atomicMin(T *p, T v) {                                                     \
        PMPP_ATOMIC_CHECK(p);                                                                   \
        T old = __atomic_load_n(p, PMPP_RLX);                                                   \
        while (v < old && !__atomic_compare_exchange_n(p, &old, v, true, PMPP_RLX, PMPP_RLX)) { \
        }                                                                                       \
        PMPP_POLLED_IF(!(v < old), p);                                                          \
        return old;                                                                             \
    }                                                                                           \
    PMPP_ATOMIC_FN T atomicMax(T *p, T v) {                                                     \
        PMPP_ATOMIC_CHECK(p);                                                                   \
        T old = __atomic_load_n(p, PMPP_RLX);                                                   \
        while (v > old && !__atomic_compare_exchange_n(p, &old, v, true, PMPP_RLX, PMPP_RLX)) { \
        }                                                                                       \
        PMPP_POLLED_IF(!(v > old), p);                                                          \
        return old;                                                                             \
    }
PMPP_ATOMIC_INT(int)
PMPP_ATOMIC_INT(unsigned int)
PMPP_ATOMIC_INT(unsigned long long)
PMPP_ATOMIC_MINMAX(int)
PMPP_ATOMIC_MINMAX(unsigned int)
PMPP_ATOMIC_MINMAX(unsigned long long)
PMPP_ATOMIC_MINMAX(long long)

PMPP_ATOMIC_FN int atomicSub(int *p, int v) {
    PMPP_ATOMIC_CHECK(p);
    int old = __atomic_fetch_sub(p, v, PMPP_RLX);
    PMPP_POLLED_IF(v == 0, p);
    return old;
}
PMPP_ATOMIC_FN unsigned int atomicSub(unsigned int *p, unsigned int v) {
    PMPP_ATOMIC_CHECK(p);
    unsigned int old = __atomic_fetch_sub(p, v, PMPP_RLX);
    PMPP_POLLED_IF(v == 0, p);
    return old;
}
PMPP_ATOMIC_FN unsigned short atomicCAS(unsigned short *p, unsigned short compare,
                                        unsigned short v) {
    PMPP_ATOMIC_CHECK(p);
    bool swapped = __atomic_compare_exchange_n(p, &compare, v, false, PMPP_RLX, PMPP_RLX);
    PMPP_POLLED_IF(!swapped, p);
    return compare;
}
PMPP_ATOMIC_FN unsigned int atomicInc(unsigned int *p, unsigned int limit) {
    PMPP_ATOMIC_CHECK(p);
    unsigned int old = __atomic_load_n(p, PMPP_RLX), nw;
    do {
        nw = old >= limit ? 0u : old + 1u;
    } while (!__atomic_compare_exchange_n(p, &old, nw, true, PMPP_RLX, PMPP_RLX));
    return old;
}
PMPP_ATOMIC_FN unsigned int atomicDec(unsigned int *p, unsigned int limit) {
    PMPP_ATOMIC_CHECK(p);
    unsigned int old = __atomic_load_n(p, PMPP_RLX), nw;
    do {
        nw = (old == 0u || old > limit) ? limit : old - 1u;
    } while (!__atomic_compare_exchange_n(p, &old, nw, true, PMPP_RLX, PMPP_RLX));
    return old;
}
// Floating-point read-modify-write: a compare-and-swap loop on the bits.
#define PMPP_ATOMIC_FLOAT(T, B)                                                                   \
    PMPP_ATOMIC_FN T atomicAdd(T *p, T v) {                                                       \
        PMPP_ATOMIC_CHECK(p);                                                                     \
        B *u = reinterpret_cast<B *>(p);                                                          \
        B old = __atomic_load_n(u, PMPP_RLX), nw;                                                 \
        T f;                                                                                      \
        do {                                                                                      \
            __builtin_memcpy(&f, &old, sizeof f);                                                 \
            f += v;                                                                               \
            __builtin_memcpy(&nw, &f, sizeof f);                                                  \
        } while (!__atomic_compare_exchange_n(u, &old, nw, true, PMPP_RLX, PMPP_RLX));            \
        PMPP_POLLED_IF(old == nw, p);                                                             \
        __builtin_memcpy(&f, &old, sizeof f);                                                     \
        return f;                                                                                 \
    }                                                                                             \
    PMPP_ATOMIC_FN T atomicExch(T *p, T v) {                                                      \
        PMPP_ATOMIC_CHECK(p);                                                                     \
        B nw, old;                                                                                \
        __builtin_memcpy(&nw, &v, sizeof v);                                                      \
        old = __atomic_exchange_n(reinterpret_cast<B *>(p), nw, PMPP_RLX);                        \
        PMPP_POLLED_IF(old == nw, p);                                                             \
        T f;                                                                                      \
        __builtin_memcpy(&f, &old, sizeof f);                                                     \
        return f;                                                                                 \
    }
PMPP_ATOMIC_FLOAT(float, unsigned int)
PMPP_ATOMIC_FLOAT(double, unsigned long long)

// Block- and system-scope variants behave the same here.
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicSub_block atomicSub
#define atomicSub_system atomicSub
#define atomicExch_block atomicExch
#define atomicExch_system atomicExch
#define atomicMin_block atomicMin
#define atomicMin_system atomicMin
#define atomicMax_block atomicMax
#define atomicMax_system atomicMax
#define atomicInc_block atomicInc
#define atomicInc_system atomicInc
#define atomicDec_block atomicDec
#define atomicDec_system atomicDec
#define atomicCAS_block atomicCAS
#define atomicCAS_system atomicCAS
#define atomicAnd_block atomicAnd
#define atomicAnd_system atomicAnd
#define atomicOr_block atomicOr
#define atomicOr_system atomicOr
#define atomicXor_block atomicXor
#define atomicXor_system atomicXor

// ---- integer intrinsics ---------------------------------------------------------------------
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }
static inline int __clzll(long long x) {
    return x == 0 ? 64 : __builtin_clzll((unsigned long long)x);
}
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned int __brev(unsigned int x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
    x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4);
    return __builtin_bswap32(x);
}
static inline unsigned long long __brevll(unsigned long long x) {
    return ((unsigned long long)__brev(unsigned(x)) << 32) | __brev(unsigned(x >> 32));
}
static inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    const unsigned long long v = ((unsigned long long)y << 32) | x;
    unsigned int r = 0;
    for (int i = 0; i < 4; ++i) r |= unsigned((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}
static inline unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int s) {
    return unsigned((((unsigned long long)hi << 32 | lo) << (s & 31)) >> 32);
}
static inline unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int s) {
    return unsigned((((unsigned long long)hi << 32 | lo) << (s > 32 ? 32 : s)) >> 32);
}
static inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int s) {
    return unsigned(((unsigned long long)hi << 32 | lo) >> (s & 31));
}
static inline unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int s) {
    return unsigned(((unsigned long long)hi << 32 | lo) >> (s > 32 ? 32 : s));
}
static inline int __mul24(int a, int b) { return int(((long long)(a << 8 >> 8)) * (b << 8 >> 8)); }
static inline unsigned int __umul24(unsigned int a, unsigned int b) {
    return (a & 0xffffffu) * (b & 0xffffffu);
}
static inline int __mulhi(int a, int b) { return int(((long long)a * b) >> 32); }
static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
    return unsigned(((unsigned long long)a * b) >> 32);
}
static inline long long __mul64hi(long long a, long long b) {
    return (long long)(((__int128)a * b) >> 64);
}
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
    return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __hadd(int a, int b) { return int(((long long)a + b) >> 1); }
static inline int __rhadd(int a, int b) { return int(((long long)a + b + 1) >> 1); }
static inline unsigned int __uhadd(unsigned int a, unsigned int b) {
    return unsigned(((unsigned long long)a + b) >> 1);
}
static inline unsigned int __urhadd(unsigned int a, unsigned int b) {
    return unsigned(((unsigned long long)a + b + 1) >> 1);
}
static inline unsigned int __sad(int a, int b, unsigned int c) {
    return c + unsigned(a > b ? (long long)a - b : (long long)b - a);
}
static inline unsigned int __usad(unsigned int a, unsigned int b, unsigned int c) {
    return c + (a > b ? a - b : b - a);
}

// min/max as CUDA overloads them: non-templates for every pair of arithmetic types, with the
// usual arithmetic conversions (so min(int, unsigned) is unsigned, as in CUDA).
#define PMPP_MINMAX(A, B)                                                                   \
    static inline typename std::common_type<A, B>::type min(A a, B b) {                     \
        typedef typename std::common_type<A, B>::type R;                                    \
        return R(a) < R(b) ? R(a) : R(b);                                                   \
    }                                                                                       \
    static inline typename std::common_type<A, B>::type max(A a, B b) {                     \
        typedef typename std::common_type<A, B>::type R;                                    \
        return R(a) > R(b) ? R(a) : R(b);                                                   \
    }
#define PMPP_MINMAX_ROW(A)                                                                  \
    PMPP_MINMAX(A, int)                                                                     \
    PMPP_MINMAX(A, unsigned int)                                                            \
    PMPP_MINMAX(A, long) PMPP_MINMAX(A, unsigned long) PMPP_MINMAX(A, long long)            \
        PMPP_MINMAX(A, unsigned long long) PMPP_MINMAX(A, float) PMPP_MINMAX(A, double)
PMPP_MINMAX_ROW(int)
PMPP_MINMAX_ROW(unsigned int)
PMPP_MINMAX_ROW(long)
PMPP_MINMAX_ROW(unsigned long)
PMPP_MINMAX_ROW(long long)
PMPP_MINMAX_ROW(unsigned long long)
PMPP_MINMAX_ROW(float)
PMPP_MINMAX_ROW(double)
#undef PMPP_MINMAX_ROW
#undef PMPP_MINMAX
static inline unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline long long llmin(long long a, long long b) { return a < b ? a : b; }
static inline long long llmax(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long ullmin(unsigned long long a, unsigned long long b) {
    return a < b ? a : b;
}
static inline unsigned long long ullmax(unsigned long long a, unsigned long long b) {
    return a > b ? a : b;
}

// ---- floating-point intrinsics --------------------------------------------------------------
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / ::sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline double rcbrt(double x) { return 1.0 / ::cbrt(x); }
static inline float __saturatef(float x) { return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); }
static inline float saturate(float x) { return __saturatef(x); }
static inline float __fdividef(float a, float b) { return a / b; }
static inline float fdividef(float a, float b) { return a / b; }
// glibc declares (but does not export) __expf and friends: CUDA's fast versions are macros here.
namespace pmpp {
namespace fast {
inline float expf_(float x) { return expf(x); }
#ifdef __APPLE__
inline float exp10f_(float x) { return __exp10f(x); }  // macOS's name for the GNU exp10f
#else
inline float exp10f_(float x) { return exp10f(x); }
#endif
inline float logf_(float x) { return logf(x); }
inline float log2f_(float x) { return log2f(x); }
inline float log10f_(float x) { return log10f(x); }
inline float sinf_(float x) { return sinf(x); }
inline float cosf_(float x) { return cosf(x); }
inline float tanf_(float x) { return tanf(x); }
inline float powf_(float a, float b) { return powf(a, b); }
inline void sincosf_(float x, float *s, float *c) { *s = sinf(x), *c = cosf(x); }
}  // namespace fast
}  // namespace pmpp
#define __expf(x) ::pmpp::fast::expf_(x)
#define __exp10f(x) ::pmpp::fast::exp10f_(x)
#define __logf(x) ::pmpp::fast::logf_(x)
#define __log2f(x) ::pmpp::fast::log2f_(x)
#define __log10f(x) ::pmpp::fast::log10f_(x)
#define __sinf(x) ::pmpp::fast::sinf_(x)
#define __cosf(x) ::pmpp::fast::cosf_(x)
#define __tanf(x) ::pmpp::fast::tanf_(x)
#define __powf(a, b) ::pmpp::fast::powf_(a, b)
#define __sincosf(x, s, c) ::pmpp::fast::sincosf_(x, s, c)
static inline float sinpif(float x) { return sinf(float(M_PI) * x); }
static inline float cospif(float x) { return cosf(float(M_PI) * x); }
static inline void sincospif(float x, float *s, float *c) { *s = sinpif(x), *c = cospif(x); }
static inline float normcdff(float x) { return 0.5f * erfcf(-x * float(M_SQRT1_2)); }
static inline double normcdf(double x) { return 0.5 * ::erfc(-x * M_SQRT1_2); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __fsqrt_rn(float a) { return sqrtf(a); }
static inline float __frsqrt_rn(float a) { return 1.0f / sqrtf(a); }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __drcp_rn(double a) { return 1.0 / a; }
static inline double __dsqrt_rn(double a) { return ::sqrt(a); }
static inline double __fma_rn(double a, double b, double c) { return ::fma(a, b, c); }
static inline int __float2int_rn(float x) { return int(nearbyintf(x)); }
static inline int __float2int_rz(float x) { return int(x); }
static inline int __float2int_rd(float x) { return int(floorf(x)); }
static inline int __float2int_ru(float x) { return int(ceilf(x)); }
static inline unsigned int __float2uint_rn(float x) { return unsigned(nearbyintf(x)); }
static inline unsigned int __float2uint_rz(float x) { return unsigned(x); }
static inline long long __float2ll_rn(float x) { return (long long)nearbyintf(x); }
static inline long long __float2ll_rz(float x) { return (long long)x; }
static inline float __int2float_rn(int x) { return float(x); }
static inline float __uint2float_rn(unsigned int x) { return float(x); }
static inline float __ll2float_rn(long long x) { return float(x); }
static inline float __ull2float_rn(unsigned long long x) { return float(x); }
static inline double __int2double_rn(int x) { return double(x); }
static inline double __uint2double_rn(unsigned int x) { return double(x); }
static inline float __double2float_rn(double x) { return float(x); }
static inline int __double2int_rn(double x) { return int(::nearbyint(x)); }
static inline int __double2int_rz(double x) { return int(x); }
static inline long long __double2ll_rn(double x) { return (long long)::nearbyint(x); }
static inline double __ll2double_rn(long long x) { return double(x); }
static inline int __float_as_int(float x) {
    int r;
    __builtin_memcpy(&r, &x, 4);
    return r;
}
static inline unsigned int __float_as_uint(float x) {
    unsigned int r;
    __builtin_memcpy(&r, &x, 4);
    return r;
}
static inline float __int_as_float(int x) {
    float r;
    __builtin_memcpy(&r, &x, 4);
    return r;
}
static inline float __uint_as_float(unsigned int x) {
    float r;
    __builtin_memcpy(&r, &x, 4);
    return r;
}
static inline long long __double_as_longlong(double x) {
    long long r;
    __builtin_memcpy(&r, &x, 8);
    return r;
}
static inline double __longlong_as_double(long long x) {
    double r;
    __builtin_memcpy(&r, &x, 8);
    return r;
}
static inline int __double2hiint(double x) { return int(__double_as_longlong(x) >> 32); }
static inline int __double2loint(double x) { return int(__double_as_longlong(x)); }
static inline double __hiloint2double(int hi, int lo) {
    return __longlong_as_double((long long)(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo));
}

// ---- loads/stores with cache hints, timers ---------------------------------------------------
namespace pmpp {
// The hints that bypass or write through the SM's L1 (cg, cv, wt) are how blocks pass values to
// each other: volatile accesses here (one access each, as before), which checked builds do not
// count as races between blocks. Vector types stay plain copies.
template <class T>
inline constexpr bool volatile_copyable = std::is_arithmetic<T>::value || std::is_pointer<T>::value;
template <class T>
inline T coherent_load(const T *p) {
    if constexpr (volatile_copyable<T>) {
#if !PMPP_CHECK
        note_poll(p);  // checked builds: the runtime's volatile-load hook does it
#endif
        return *(const volatile T *)p;
    } else {
        return *p;
    }
}
template <class T>
inline void coherent_store(T *p, T v) {
    if constexpr (volatile_copyable<T>) *(volatile T *)p = v;
    else *p = v;
}
}  // namespace pmpp
template <class T>
inline T __ldg(const T *p) { return *p; }
template <class T>
inline T __ldcg(const T *p) { return ::pmpp::coherent_load(p); }
template <class T>
inline T __ldca(const T *p) { return *p; }
template <class T>
inline T __ldcs(const T *p) { return *p; }
template <class T>
inline T __ldlu(const T *p) { return *p; }
template <class T>
inline T __ldcv(const T *p) { return ::pmpp::coherent_load(p); }
template <class T>
inline void __stcg(T *p, T v) { ::pmpp::coherent_store(p, v); }
template <class T>
inline void __stcs(T *p, T v) { *p = v; }
template <class T>
inline void __stwb(T *p, T v) { *p = v; }
template <class T>
inline void __stwt(T *p, T v) { ::pmpp::coherent_store(p, v); }
static inline long long clock64() {
#if defined(__x86_64__) || defined(__i386__)
    return (long long)__builtin_ia32_rdtsc();
#else
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
#endif
}
static inline unsigned long long __globaltimer() {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}
static inline void __nanosleep(unsigned int) {}
#define __trap() pmpp_trap("__trap()", __FILE__, __LINE__)
#define __brkpt() pmpp_trap("__brkpt()", __FILE__, __LINE__)

// ---- device-side assert ----------------------------------------------------------------------
#include "pmpp_assert.h"

// ---- shared memory (declarations are rewritten into these calls, see source.py) ------------
namespace pmpp {
template <class T>
struct type_name {
    static constexpr const char *value = "";
};
#define PMPP_TYPE_NAME(T, S)                      \
    template <>                                   \
    struct type_name<T> {                         \
        static constexpr const char *value = S;   \
    };
PMPP_TYPE_NAME(float, "float")
PMPP_TYPE_NAME(double, "double")
PMPP_TYPE_NAME(int, "int")
PMPP_TYPE_NAME(unsigned int, "unsigned int")
PMPP_TYPE_NAME(char, "char")
PMPP_TYPE_NAME(signed char, "signed char")
PMPP_TYPE_NAME(unsigned char, "unsigned char")
PMPP_TYPE_NAME(short, "short")
PMPP_TYPE_NAME(unsigned short, "unsigned short")
PMPP_TYPE_NAME(long, "long")
PMPP_TYPE_NAME(unsigned long, "unsigned long")
PMPP_TYPE_NAME(long long, "long long")
PMPP_TYPE_NAME(unsigned long long, "unsigned long long")
PMPP_TYPE_NAME(bool, "bool")
PMPP_TYPE_NAME(float2, "float2")
PMPP_TYPE_NAME(float3, "float3")
PMPP_TYPE_NAME(float4, "float4")
PMPP_TYPE_NAME(int2, "int2")
PMPP_TYPE_NAME(int4, "int4")
PMPP_TYPE_NAME(uint2, "uint2")
PMPP_TYPE_NAME(uint4, "uint4")
PMPP_TYPE_NAME(double2, "double2")

// A static __shared__ variable of type T (possibly an array): one per block, allocated by the
// first thread that reaches the declaration.
template <class T, size_t Align = 0>
PMPP_NOSAN inline T &shared_var(const void *site, const char *name) {
    typedef typename std::remove_cv<typename std::remove_all_extents<T>::type>::type E;
    const uint32_t ext[4] = {uint32_t(std::extent<T, 0>::value), uint32_t(std::extent<T, 1>::value),
                             uint32_t(std::extent<T, 2>::value), uint32_t(std::extent<T, 3>::value)};
    void *p = pmpp_shared_var(site, sizeof(T), alignof(T) > Align ? alignof(T) : Align, name,
                              sizeof(E), type_name<E>::value, int(std::rank<T>::value), ext);
    return *static_cast<T *>(p);
}
// extern __shared__ T x[]: the block's dynamic shared memory (all such arrays alias it).
template <class T>
PMPP_NOSAN inline T *dynamic_shared(const char *name) {
    typedef typename std::remove_cv<T>::type E;
    return static_cast<T *>(pmpp_dynamic_shared(name, sizeof(E), type_name<E>::value));
}
// extern __shared__ at namespace scope: an object that behaves like the array.
template <class T>
struct DynamicSharedArray {
    const char *name;
    T *get() const { return dynamic_shared<T>(name); }
    operator T *() const { return get(); }
    template <class U>
    explicit operator U *() const { return reinterpret_cast<U *>(get()); }
    template <class I>
    T &operator[](I i) const { return get()[i]; }
};

// ---- the module's kernel table (generated code at the end of each module uses this) ------
template <auto F, class Fn = decltype(F)>
struct Kernel;
template <auto F, class... A>
struct Kernel<F, void (*)(A...)> {
    template <size_t... I>
    PMPP_NOSAN static void call(void **args, std::index_sequence<I...>) {
        F(*static_cast<typename std::remove_reference<A>::type *>(args[I])...);
    }
    PMPP_NOSAN static void thunk(void **args) { call(args, std::index_sequence_for<A...>{}); }
    static constexpr uint32_t sizes[sizeof...(A) + 1] = {uint32_t(sizeof(A))..., 0};
};
template <auto F, class... A>
struct Kernel<F, void (*)(A...) noexcept> : Kernel<(void (*)(A...))F> {};
template <auto F>
constexpr pmpp_kernel_entry kernel_entry(const char *name) {
    typedef Kernel<F> K;
    return pmpp_kernel_entry{name, &K::thunk, int32_t(sizeof(K::sizes) / sizeof(uint32_t)) - 1,
                             K::sizes};
}
}  // namespace pmpp

// ---- not supported: fail to compile, naming the feature ------------------------------------
#define PMPP_UNSUPPORTED(name, msg)                                         \
    template <class R = int, class... A>                                    \
    inline R name(A...) {                                                   \
        static_assert(::pmpp::unsupported<R, A...>, msg);                   \
        return R();                                                         \
    }
#define PMPP_NO_SYNC(name, repl)                                                                 \
    PMPP_UNSUPPORTED(name, #name " (without _sync) is not supported by pmpp's CPU engine; it "   \
                           "was removed in CUDA 9: use " repl)
PMPP_NO_SYNC(__shfl, "__shfl_sync(0xffffffff, value, srcLane)")
PMPP_NO_SYNC(__shfl_up, "__shfl_up_sync(0xffffffff, value, delta)")
PMPP_NO_SYNC(__shfl_down, "__shfl_down_sync(0xffffffff, value, delta)")
PMPP_NO_SYNC(__shfl_xor, "__shfl_xor_sync(0xffffffff, value, laneMask)")
PMPP_NO_SYNC(__ballot, "__ballot_sync(0xffffffff, predicate)")
PMPP_NO_SYNC(__any, "__any_sync(0xffffffff, predicate)")
PMPP_NO_SYNC(__all, "__all_sync(0xffffffff, predicate)")
#undef PMPP_NO_SYNC

typedef unsigned long long cudaTextureObject_t;
typedef unsigned long long cudaSurfaceObject_t;
#define PMPP_NO_TEXTURE(name)                                                         \
    PMPP_UNSUPPORTED(name, "texture and surface objects (" #name                      \
                           ") are not supported by pmpp's CPU engine: read the array " \
                           "through a pointer")
PMPP_NO_TEXTURE(tex1Dfetch)
PMPP_NO_TEXTURE(tex1D)
PMPP_NO_TEXTURE(tex2D)
PMPP_NO_TEXTURE(tex3D)
PMPP_NO_TEXTURE(tex1DLayered)
PMPP_NO_TEXTURE(tex2DLayered)
PMPP_NO_TEXTURE(texCubemap)
PMPP_NO_TEXTURE(tex2Dgather)
PMPP_NO_TEXTURE(surf1Dread)
PMPP_NO_TEXTURE(surf1Dwrite)
PMPP_NO_TEXTURE(surf2Dread)
PMPP_NO_TEXTURE(surf2Dwrite)
PMPP_NO_TEXTURE(surf3Dread)
PMPP_NO_TEXTURE(surf3Dwrite)
#undef PMPP_NO_TEXTURE
template <class T, int dim = 1, int mode = 0>
struct texture {
    static_assert(::pmpp::unsupported<T>,
                  "texture references (texture<...>) are not supported by pmpp's CPU engine: "
                  "read the array through a pointer");
};

enum cudaError { cudaSuccess = 0, cudaErrorUnknown = 999 };
typedef enum cudaError cudaError_t;
typedef struct pmpp_cuda_stream *cudaStream_t;
typedef struct pmpp_cuda_event *cudaEvent_t;
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};
#define PMPP_NO_HOST_API(name)                                                               \
    PMPP_UNSUPPORTED(name, #name " is not supported by pmpp's CPU engine: .cu files hold "  \
                           "kernels only (no dynamic parallelism or device-side runtime "  \
                           "calls); allocate, copy and launch from Python")
PMPP_NO_HOST_API(cudaMalloc)
PMPP_NO_HOST_API(cudaMallocManaged)
PMPP_NO_HOST_API(cudaMallocHost)
PMPP_NO_HOST_API(cudaFree)
PMPP_NO_HOST_API(cudaFreeHost)
PMPP_NO_HOST_API(cudaMemcpy)
PMPP_NO_HOST_API(cudaMemcpyAsync)
PMPP_NO_HOST_API(cudaMemcpyToSymbol)
PMPP_NO_HOST_API(cudaMemcpyFromSymbol)
PMPP_NO_HOST_API(cudaMemset)
PMPP_NO_HOST_API(cudaDeviceSynchronize)
PMPP_NO_HOST_API(cudaGetLastError)
PMPP_NO_HOST_API(cudaPeekAtLastError)
PMPP_NO_HOST_API(cudaGetErrorString)
PMPP_NO_HOST_API(cudaLaunchKernel)
PMPP_NO_HOST_API(cudaLaunchCooperativeKernel)
PMPP_NO_HOST_API(cudaStreamCreate)
PMPP_NO_HOST_API(cudaStreamSynchronize)
PMPP_NO_HOST_API(cudaEventCreate)
PMPP_NO_HOST_API(cudaEventRecord)
PMPP_NO_HOST_API(cudaEventSynchronize)
PMPP_NO_HOST_API(cudaEventElapsedTime)
PMPP_NO_HOST_API(cudaGetDeviceProperties)
PMPP_NO_HOST_API(cudaSetDevice)
PMPP_NO_HOST_API(cudaGetDevice)
PMPP_NO_HOST_API(cudaFuncSetAttribute)
#undef PMPP_NO_HOST_API

// ---- inline PTX: what asm statements are translated into (ptx.py) -----------------------
#include "pmpp_ptx.h"
// ---- end of inline PTX --------------------------------------------------------------------

#endif  // PMPP_CUDA_H
