// curand_kernel.h shim for pmpp's CPU engine: cuRAND's device API for the XORWOW generator
// (curandState, the default) and Philox4x32-10, written from the cuRAND documentation (Device
// API Overview) and the generators' papers: Marsaglia, "Xorshift RNGs", JSS 8(14), 2003, and
// Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11.
//
// The integer streams (curand, curand4) and everything computed from them exactly (the uniforms)
// are bit-for-bit those of cuRAND on a GPU for the same seed, subsequence and offset. The normal
// and log-normal distributions use Box-Muller through the host's logf/sinf/cosf/expf (and log,
// sin, cos for doubles) where the GPU uses its own math (__sincosf for floats): their last bits
// differ; pmpp/backends/cpu/README.md says by how much.
//
// XORWOW's jumps (curand_init's subsequence * 2^67 + offset, skipahead, skipahead_sequence) apply
// powers of the generator's 160x160 transition matrix over GF(2). They are computed here by
// squaring, once per loaded module, and kept as byte-indexed tables built the first time a power is
// used (a jump is 20 table lookups per set bit of the jump's length).
#ifndef PMPP_CURAND_KERNEL_H
#define PMPP_CURAND_KERNEL_H

#include "pmpp_cuda.h"

#include <atomic>
#include <stdint.h>
#include <stdlib.h>

// Not instrumented in checked and count builds: the jump tables live on the heap, outside every
// region the bounds check knows, and a GPU reads its own precomputed tables without the kernel
// seeing them.
#if PMPP_CHECK || PMPP_COUNT
#define PMPP_CURAND_HIDDEN __attribute__((PMPP_NO_TSAN, noinline)) PMPP_NOCOV
#define PMPP_CURAND_HIDDEN_LEAF __attribute__((PMPP_NO_TSAN)) PMPP_NOCOV  // inlined into those
#else
#define PMPP_CURAND_HIDDEN
#define PMPP_CURAND_HIDDEN_LEAF
#endif

// ---- states: the same members, in the same order, as cuRAND's (so sizeof matches) ----------
struct curandStateXORWOW {
    unsigned int d, v[5];
    int boxmuller_flag;
    int boxmuller_flag_double;
    float boxmuller_extra;
    double boxmuller_extra_double;
};
typedef struct curandStateXORWOW curandStateXORWOW_t;
typedef struct curandStateXORWOW curandState_t;
typedef struct curandStateXORWOW curandState;

struct curandStatePhilox4_32_10 {
    uint4 ctr;
    uint4 output;
    uint2 key;
    unsigned int STATE;
    int boxmuller_flag;
    int boxmuller_flag_double;
    float boxmuller_extra;
    double boxmuller_extra_double;
};
typedef struct curandStatePhilox4_32_10 curandStatePhilox4_32_10_t;

namespace pmpp {
namespace curand_detail {

enum { extra_normal = 1, extra_log_normal = 2 };

// ---- XORWOW: the xorshift part is linear over GF(2); d is a Weyl sequence ------------------
constexpr unsigned int weyl_step = 362437u;

inline void xorshift_step(unsigned int v[5]) {
    unsigned int t = v[0] ^ (v[0] >> 2);
    v[0] = v[1], v[1] = v[2], v[2] = v[3], v[3] = v[4];
    v[4] = (v[4] ^ (v[4] << 4)) ^ (t ^ (t << 1));
}

struct bits160 {
    uint32_t w[5];
};

PMPP_CURAND_HIDDEN_LEAF inline void xor_into(bits160 &acc, const bits160 &x) {
    for (int i = 0; i < 5; ++i) acc.w[i] ^= x.w[i];
}

// A linear map of the 160-bit state, as the images of the 160 unit vectors.
struct linear_map {
    bits160 image[160];
};

PMPP_CURAND_HIDDEN inline bits160 apply(const linear_map &m, const bits160 &x) {
    bits160 out = {};
    for (int i = 0; i < 160; ++i)
        if ((x.w[i / 32] >> (i % 32)) & 1u) xor_into(out, m.image[i]);
    return out;
}

// m applied twice: its own power of two one higher.
PMPP_CURAND_HIDDEN inline void square(const linear_map &m, linear_map &out) {
    for (int i = 0; i < 160; ++i) out.image[i] = apply(m, m.image[i]);
}

PMPP_CURAND_HIDDEN inline void one_step(linear_map &m) {
    for (int i = 0; i < 160; ++i) {
        bits160 unit = {};
        unit.w[i / 32] = 1u << (i % 32);
        xorshift_step(unit.w);
        m.image[i] = unit;
    }
}

// The map raised to 2^k, as 20 tables of the images of every value of one byte of the state.
struct byte_table {
    bits160 entry[20][256];
};

PMPP_CURAND_HIDDEN inline byte_table *make_byte_table(const linear_map &m) {
    byte_table *t = (byte_table *)malloc(sizeof(byte_table));
    for (int b = 0; b < 20; ++b) {
        t->entry[b][0] = bits160{};
        for (int value = 1; value < 256; ++value) {
            t->entry[b][value] = t->entry[b][value & (value - 1)];
            xor_into(t->entry[b][value], m.image[8 * b + __builtin_ctz(value)]);
        }
    }
    return t;
}

// Powers 2^0 ... 2^130 of one step: skipahead needs 2^0..2^63, skipahead_sequence 2^67..2^130.
constexpr int max_power = 131;
constexpr int sequence_shift = 67;

struct power_maps {
    linear_map power[max_power];
};

// Built on first use with malloc and published with a compare-and-swap (no function-local static
// or operator new: modules link without the C++ runtime's guard functions under clang/libc++).
// Blocks on several OS threads may race to build one; the first to publish it wins.
inline std::atomic<power_maps *> shared_powers{nullptr};
inline std::atomic<byte_table *> shared_tables[max_power] = {};

template <class _Tp>
PMPP_CURAND_HIDDEN inline _Tp *publish(std::atomic<_Tp *> &slot, _Tp *made) {
    _Tp *seen = nullptr;
    if (slot.compare_exchange_strong(seen, made, std::memory_order_acq_rel)) return made;
    free(made);
    return seen;
}

PMPP_CURAND_HIDDEN inline const power_maps &powers() {
    power_maps *maps = shared_powers.load(std::memory_order_acquire);
    if (maps) return *maps;
    maps = (power_maps *)malloc(sizeof(power_maps));
    one_step(maps->power[0]);
    for (int k = 1; k < max_power; ++k) square(maps->power[k - 1], maps->power[k]);
    return *publish(shared_powers, maps);
}

PMPP_CURAND_HIDDEN inline const byte_table &table_of_power(int k) {
    byte_table *t = shared_tables[k].load(std::memory_order_acquire);
    return t ? *t : *publish(shared_tables[k], make_byte_table(powers().power[k]));
}

PMPP_CURAND_HIDDEN inline void apply_table(const byte_table &t, unsigned int v[5]) {
    bits160 out = {};
    for (int b = 0; b < 20; ++b) xor_into(out, t.entry[b][(v[b / 4] >> (8 * (b % 4))) & 0xffu]);
    for (int i = 0; i < 5; ++i) v[i] = out.w[i];
}

// v advanced by n * 2^shift steps of the xorshift part.
PMPP_CURAND_HIDDEN inline void jump(unsigned int v[5], unsigned long long n, int shift) {
    for (int bit = 0; n; ++bit, n >>= 1)
        if (n & 1) apply_table(table_of_power(bit + shift), v);
}

inline void xorwow_skip(curandStateXORWOW_t *s, unsigned long long n, int shift) {
    unsigned int v[5];
    for (int i = 0; i < 5; ++i) v[i] = s->v[i];
    jump(v, n, shift);
    for (int i = 0; i < 5; ++i) s->v[i] = v[i];
}

// ---- Philox4x32-10 (Salmon et al., SC'11) ---------------------------------------------------
constexpr unsigned int philox_m0 = 0xD2511F53u, philox_m1 = 0xCD9E8D57u;
constexpr unsigned int philox_w0 = 0x9E3779B9u, philox_w1 = 0xBB67AE85u;

inline uint4 philox_round(uint4 c, uint2 k) {
    unsigned long long p0 = (unsigned long long)philox_m0 * c.x;
    unsigned long long p1 = (unsigned long long)philox_m1 * c.z;
    return make_uint4(unsigned(p1 >> 32) ^ c.y ^ k.x, unsigned(p1), unsigned(p0 >> 32) ^ c.w ^ k.y,
                      unsigned(p0));
}

inline uint4 philox4x32_10(uint4 c, uint2 k) {
    for (int round = 0; round < 10; ++round) {
        c = philox_round(c, k);
        k.x += philox_w0, k.y += philox_w1;
    }
    return c;
}

// The 128-bit counter plus n, from word `first` (0: skipahead's blocks of four, 2: sequences).
inline void add_to_counter(uint4 &ctr, unsigned long long n, int first) {
    unsigned int *word[4] = {&ctr.x, &ctr.y, &ctr.z, &ctr.w};
    unsigned long long carry = n;
    for (int i = first; i < 4 && carry; ++i) {
        unsigned long long sum = (unsigned long long)*word[i] + (carry & 0xffffffffu);
        *word[i] = unsigned(sum);
        carry = (carry >> 32) + (sum >> 32);
    }
}

inline void philox_refill(curandStatePhilox4_32_10_t *s) { s->output = philox4x32_10(s->ctr, s->key); }

inline unsigned int word_of(uint4 v, unsigned int i) {
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// ---- conversions to floating point, as cuRAND's (nvcc contracts a*b+c into an FMA) -----------
constexpr float two_pow_m32 = 0x1p-32f;
constexpr double two_pow_m53 = 0x1p-53;
constexpr float two_pi_over_2_32 = 0x1p-32f * 6.2831855f;

inline float uniform_of(unsigned int x) { return fmaf(float(x), two_pow_m32, two_pow_m32 / 2); }

inline unsigned long long bits53(unsigned int lo, unsigned int hi) {
    return (unsigned long long)lo ^ ((unsigned long long)hi << (53 - 32));
}

inline double uniform_double_of(unsigned int lo, unsigned int hi) {
    return ::fma(double(bits53(lo, hi)), two_pow_m53, two_pow_m53 / 2);
}

inline float2 box_muller(unsigned int x, unsigned int y) {
    float u = uniform_of(x);
    float angle = fmaf(float(y), two_pi_over_2_32, two_pi_over_2_32 / 2);
    float radius = sqrtf(-2.0f * logf(u));
    return make_float2(sinf(angle) * radius, cosf(angle) * radius);
}

// sin(pi*t) and cos(pi*t) for t in (0, 2], reduced exactly to |r| <= 1/4 first (as sincospi).
inline void sincospi_of(double t, double *s, double *c) {
    double quarter_turns = nearbyint(2.0 * t);
    double r = t - 0.5 * quarter_turns;
    double sr = ::sin(r * M_PI), cr = ::cos(r * M_PI);
    switch ((long long)quarter_turns & 3) {
    case 0: *s = sr, *c = cr; break;
    case 1: *s = cr, *c = -sr; break;
    case 2: *s = -sr, *c = -cr; break;
    default: *s = -cr, *c = sr; break;
    }
}

inline double2 box_muller_double(unsigned int x0, unsigned int x1, unsigned int y0,
                                 unsigned int y1) {
    double u = uniform_double_of(x0, x1);
    double t = ::fma(double(bits53(y0, y1)), 2 * two_pow_m53, two_pow_m53);
    double radius = ::sqrt(-2.0 * ::log(u));
    double s, c;
    sincospi_of(t, &s, &c);
    return make_double2(s * radius, c * radius);
}

inline float log_normal_of(float normal, float mean, float stddev) {
    return expf(fmaf(stddev, normal, mean));
}

inline double log_normal_double_of(double normal, double mean, double stddev) {
    return ::exp(::fma(stddev, normal, mean));
}

}  // namespace curand_detail
}  // namespace pmpp

// ---- initialization and skipping ------------------------------------------------------------
static inline void skipahead(unsigned long long n, curandStateXORWOW_t *state) {
    ::pmpp::curand_detail::xorwow_skip(state, n, 0);
    state->d += ::pmpp::curand_detail::weyl_step * (unsigned int)n;
}

// n subsequences of 2^67 numbers each (d moves by a multiple of 2^32: unchanged).
static inline void skipahead_sequence(unsigned long long n, curandStateXORWOW_t *state) {
    ::pmpp::curand_detail::xorwow_skip(state, n, ::pmpp::curand_detail::sequence_shift);
}

static inline void curand_init(unsigned long long seed, unsigned long long subsequence,
                               unsigned long long offset, curandStateXORWOW_t *state) {
    // cuRAND's seeding: the two halves of the seed salted, scrambled by odd multipliers, and
    // added to or xored into Marsaglia's published initial state.
    unsigned int t0 = 1099087573u * ((unsigned int)seed ^ 0xaad26b49u);
    unsigned int t1 = 2591861531u * ((unsigned int)(seed >> 32) ^ 0xf7dcefddu);
    state->d = 6615241u + t1 + t0;
    state->v[0] = 123456789u + t0;
    state->v[1] = 362436069u ^ t0;
    state->v[2] = 521288629u + t1;
    state->v[3] = 88675123u ^ t1;
    state->v[4] = 5783321u + t0;
    skipahead_sequence(subsequence, state);
    skipahead(offset, state);
    state->boxmuller_flag = state->boxmuller_flag_double = 0;
    state->boxmuller_extra = 0.0f;
    state->boxmuller_extra_double = 0.0;
}

static inline void skipahead(unsigned long long n, curandStatePhilox4_32_10_t *state) {
    unsigned int position = state->STATE + (unsigned int)(n & 3);
    unsigned long long blocks = n / 4 + (position > 3);
    state->STATE = position & 3;
    ::pmpp::curand_detail::add_to_counter(state->ctr, blocks, 0);
    ::pmpp::curand_detail::philox_refill(state);
}

// n subsequences of 2^66 numbers: the counter's upper 64 bits.
static inline void skipahead_sequence(unsigned long long n, curandStatePhilox4_32_10_t *state) {
    ::pmpp::curand_detail::add_to_counter(state->ctr, n, 2);
    ::pmpp::curand_detail::philox_refill(state);
}

static inline void curand_init(unsigned long long seed, unsigned long long subsequence,
                               unsigned long long offset, curandStatePhilox4_32_10_t *state) {
    state->ctr = make_uint4(0, 0, 0, 0);
    state->key = make_uint2((unsigned int)seed, (unsigned int)(seed >> 32));
    state->STATE = 0;
    state->boxmuller_flag = state->boxmuller_flag_double = 0;
    state->boxmuller_extra = 0.0f;
    state->boxmuller_extra_double = 0.0;
    skipahead_sequence(subsequence, state);
    skipahead(offset, state);
}

// ---- 32-bit integers ---------------------------------------------------------------------
static inline unsigned int curand(curandStateXORWOW_t *state) {
    ::pmpp::curand_detail::xorshift_step(state->v);
    state->d += ::pmpp::curand_detail::weyl_step;
    return state->v[4] + state->d;
}

// output holds the counter's four words; STATE is the next one to hand out.
static inline unsigned int curand(curandStatePhilox4_32_10_t *state) {
    unsigned int value = ::pmpp::curand_detail::word_of(state->output, state->STATE);
    if (++state->STATE == 4) {
        ::pmpp::curand_detail::add_to_counter(state->ctr, 1, 0);
        ::pmpp::curand_detail::philox_refill(state);
        state->STATE = 0;
    }
    return value;
}

static inline uint4 curand4(curandStatePhilox4_32_10_t *state) {
    uint4 now = state->output;
    ::pmpp::curand_detail::add_to_counter(state->ctr, 1, 0);
    ::pmpp::curand_detail::philox_refill(state);
    uint4 next = state->output;
    unsigned int words[8] = {now.x, now.y, now.z, now.w, next.x, next.y, next.z, next.w};
    unsigned int k = state->STATE;
    return make_uint4(words[k], words[k + 1], words[k + 2], words[k + 3]);
}

// ---- uniform: (0, 1], never 0 ------------------------------------------------------------
static inline float curand_uniform(curandStateXORWOW_t *state) {
    return ::pmpp::curand_detail::uniform_of(curand(state));
}
static inline float curand_uniform(curandStatePhilox4_32_10_t *state) {
    return ::pmpp::curand_detail::uniform_of(curand(state));
}
static inline float4 curand_uniform4(curandStatePhilox4_32_10_t *state) {
    using ::pmpp::curand_detail::uniform_of;
    uint4 x = curand4(state);
    return make_float4(uniform_of(x.x), uniform_of(x.y), uniform_of(x.z), uniform_of(x.w));
}
// XORWOW: 53 bits from two numbers; Philox: 32 bits from one, as cuRAND does.
static inline double curand_uniform_double(curandStateXORWOW_t *state) {
    unsigned int lo = curand(state);
    unsigned int hi = curand(state);
    return ::pmpp::curand_detail::uniform_double_of(lo, hi);
}
static inline double curand_uniform_double(curandStatePhilox4_32_10_t *state) {
    return ::fma(double(curand(state)), 0x1p-32, 0x1p-32);
}
static inline double2 curand_uniform2_double(curandStatePhilox4_32_10_t *state) {
    using ::pmpp::curand_detail::uniform_double_of;
    uint4 x = curand4(state);
    return make_double2(uniform_double_of(x.x, x.y), uniform_double_of(x.z, x.w));
}

// ---- normal (Box-Muller): the second value of a pair is kept for the next call -------------
namespace pmpp {
namespace curand_detail {
template <class _State>
inline float2 box_muller_pair(_State *state) {
    unsigned int x = curand(state);
    unsigned int y = curand(state);
    return box_muller(x, y);
}

template <class _State>
inline double2 box_muller_double_pair(_State *state) {
    unsigned int x0 = curand(state), x1 = curand(state);
    unsigned int y0 = curand(state), y1 = curand(state);
    return box_muller_double(x0, x1, y0, y1);
}

inline double2 box_muller_double_pair(curandStatePhilox4_32_10_t *state) {
    uint4 x = curand4(state);
    return box_muller_double(x.x, x.y, x.z, x.w);
}

}  // namespace curand_detail
}  // namespace pmpp

#define PMPP_CURAND_NORMALS(State)                                                             \
    static inline float curand_normal(State *state) {                                          \
        if (state->boxmuller_flag != ::pmpp::curand_detail::extra_normal) {                   \
            float2 both = ::pmpp::curand_detail::box_muller_pair(state);                       \
            state->boxmuller_extra = both.y;                                                   \
            state->boxmuller_flag = ::pmpp::curand_detail::extra_normal;                       \
            return both.x;                                                                     \
        }                                                                                      \
        state->boxmuller_flag = 0;                                                             \
        return state->boxmuller_extra;                                                         \
    }                                                                                          \
    static inline float2 curand_normal2(State *state) {                                        \
        return ::pmpp::curand_detail::box_muller_pair(state);                                  \
    }                                                                                          \
    static inline double curand_normal_double(State *state) {                                  \
        if (state->boxmuller_flag_double != ::pmpp::curand_detail::extra_normal) {             \
            double2 both = ::pmpp::curand_detail::box_muller_double_pair(state);               \
            state->boxmuller_extra_double = both.y;                                            \
            state->boxmuller_flag_double = ::pmpp::curand_detail::extra_normal;                \
            return both.x;                                                                     \
        }                                                                                      \
        state->boxmuller_flag_double = 0;                                                      \
        return state->boxmuller_extra_double;                                                  \
    }                                                                                          \
    static inline double2 curand_normal2_double(State *state) {                                \
        return ::pmpp::curand_detail::box_muller_double_pair(state);                           \
    }                                                                                          \
    static inline float curand_log_normal(State *state, float mean, float stddev) {            \
        using ::pmpp::curand_detail::log_normal_of;                                            \
        if (state->boxmuller_flag != ::pmpp::curand_detail::extra_log_normal) {                \
            float2 both = ::pmpp::curand_detail::box_muller_pair(state);                       \
            state->boxmuller_extra = log_normal_of(both.y, mean, stddev);                      \
            state->boxmuller_flag = ::pmpp::curand_detail::extra_log_normal;                   \
            return log_normal_of(both.x, mean, stddev);                                        \
        }                                                                                      \
        state->boxmuller_flag = 0;                                                             \
        return state->boxmuller_extra;                                                         \
    }                                                                                          \
    static inline float2 curand_log_normal2(State *state, float mean, float stddev) {          \
        float2 both = ::pmpp::curand_detail::box_muller_pair(state);                           \
        return make_float2(::pmpp::curand_detail::log_normal_of(both.x, mean, stddev),         \
                           ::pmpp::curand_detail::log_normal_of(both.y, mean, stddev));        \
    }                                                                                          \
    static inline double curand_log_normal_double(State *state, double mean, double stddev) {  \
        using ::pmpp::curand_detail::log_normal_double_of;                                     \
        if (state->boxmuller_flag_double != ::pmpp::curand_detail::extra_log_normal) {         \
            double2 both = ::pmpp::curand_detail::box_muller_double_pair(state);               \
            state->boxmuller_extra_double = log_normal_double_of(both.y, mean, stddev);        \
            state->boxmuller_flag_double = ::pmpp::curand_detail::extra_log_normal;            \
            return log_normal_double_of(both.x, mean, stddev);                                 \
        }                                                                                      \
        state->boxmuller_flag_double = 0;                                                      \
        return state->boxmuller_extra_double;                                                  \
    }
PMPP_CURAND_NORMALS(curandStateXORWOW_t)
PMPP_CURAND_NORMALS(curandStatePhilox4_32_10_t)
#undef PMPP_CURAND_NORMALS

static inline float4 curand_normal4(curandStatePhilox4_32_10_t *state) {
    uint4 x = curand4(state);
    float2 a = ::pmpp::curand_detail::box_muller(x.x, x.y);
    float2 b = ::pmpp::curand_detail::box_muller(x.z, x.w);
    return make_float4(a.x, a.y, b.x, b.y);
}

static inline float4 curand_log_normal4(curandStatePhilox4_32_10_t *state, float mean,
                                        float stddev) {
    using ::pmpp::curand_detail::log_normal_of;
    float4 n = curand_normal4(state);
    return make_float4(log_normal_of(n.x, mean, stddev), log_normal_of(n.y, mean, stddev),
                       log_normal_of(n.z, mean, stddev), log_normal_of(n.w, mean, stddev));
}

// ---- not supported: compile errors that say so -------------------------------------------
#define PMPP_CURAND_UNSUPPORTED(name, what)                                                    \
    template <class _Rp = unsigned int, class... _Ap>                                          \
    inline _Rp name(_Ap...) {                                                                  \
        static_assert(::pmpp::unsupported<_Rp, _Ap...>,                                        \
                      what " is not supported by pmpp's CPU engine's curand_kernel.h (XORWOW " \
                           "and Philox4x32-10 with uniform, normal and log-normal "            \
                           "distributions are)");                                              \
        return _Rp();                                                                          \
    }
PMPP_CURAND_UNSUPPORTED(curand_poisson, "curand_poisson")
PMPP_CURAND_UNSUPPORTED(curand_poisson4, "curand_poisson4")
PMPP_CURAND_UNSUPPORTED(curand_discrete, "curand_discrete")
PMPP_CURAND_UNSUPPORTED(curand_discrete4, "curand_discrete4")
PMPP_CURAND_UNSUPPORTED(curand_mtgp32_single, "MTGP32")
PMPP_CURAND_UNSUPPORTED(curand_MRG32k3a, "MRG32k3a")
#undef PMPP_CURAND_UNSUPPORTED

namespace pmpp {
namespace curand_detail {
template <int _Np>
struct unsupported_state {
    static_assert(::pmpp::unsupported<unsupported_state>,
                  "this generator (MRG32k3a, MTGP32, Sobol) is not supported by pmpp's CPU "
                  "engine's curand_kernel.h: use curandState (XORWOW) or "
                  "curandStatePhilox4_32_10_t");
};
}  // namespace curand_detail
}  // namespace pmpp
typedef ::pmpp::curand_detail::unsupported_state<0> curandStateMRG32k3a_t;
typedef ::pmpp::curand_detail::unsupported_state<1> curandStateMtgp32_t;
typedef ::pmpp::curand_detail::unsupported_state<2> curandStateSobol32_t;
typedef ::pmpp::curand_detail::unsupported_state<3> curandStateScrambledSobol32_t;
typedef ::pmpp::curand_detail::unsupported_state<4> curandStateSobol64_t;
typedef ::pmpp::curand_detail::unsupported_state<5> curandStateScrambledSobol64_t;

#endif  // PMPP_CURAND_KERNEL_H
