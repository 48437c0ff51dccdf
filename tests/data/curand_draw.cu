// What tests/test_curand_device.py compares between a GPU and pmpp's CPU engine: thread t takes
// case t (seed, subsequence, offset) and draws from freshly initialized states, each function
// from a state of its own, into its slots of ints, floats and doubles.
#include <curand_kernel.h>

#define CURAND_DRAW_INTS 40
#define CURAND_DRAW_FLOATS 44
#define CURAND_DRAW_DOUBLES 16

template <class S>
__device__ void draw_common(unsigned long long seed, unsigned long long subsequence,
                            unsigned long long offset, unsigned int *ints, float *floats,
                            double *doubles) {
    S s;
    curand_init(seed, subsequence, offset, &s);
    for (int k = 0; k < 8; ++k) ints[k] = curand(&s);
    curand_init(seed, subsequence, offset, &s);
    skipahead(1000003ull, &s);
    for (int k = 8; k < 12; ++k) ints[k] = curand(&s);
    curand_init(seed, subsequence, offset, &s);
    skipahead_sequence(3ull, &s);
    for (int k = 12; k < 16; ++k) ints[k] = curand(&s);
    curand_init(seed, subsequence, offset, &s);
    for (int k = 0; k < 8; ++k) floats[k] = curand_uniform(&s);
    curand_init(seed, subsequence, offset, &s);
    for (int k = 8; k < 16; ++k) floats[k] = curand_normal(&s);
    curand_init(seed, subsequence, offset, &s);
    for (int k = 16; k < 20; k += 2) {
        float2 pair = curand_normal2(&s);
        floats[k] = pair.x, floats[k + 1] = pair.y;
    }
    curand_init(seed, subsequence, offset, &s);
    for (int k = 20; k < 24; ++k) floats[k] = curand_log_normal(&s, 0.5f, 0.75f);
    curand_init(seed, subsequence, offset, &s);
    for (int k = 0; k < 4; ++k) doubles[k] = curand_uniform_double(&s);
    curand_init(seed, subsequence, offset, &s);
    for (int k = 4; k < 8; ++k) doubles[k] = curand_normal_double(&s);
    curand_init(seed, subsequence, offset, &s);
    for (int k = 8; k < 10; ++k) doubles[k] = curand_log_normal_double(&s, 0.5, 0.75);
}

extern "C" __global__ void draw_xorwow(const unsigned long long *cases, int n, unsigned int *ints,
                                       float *floats, double *doubles) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    draw_common<curandState>(cases[3 * t], cases[3 * t + 1], cases[3 * t + 2],
                             ints + CURAND_DRAW_INTS * t, floats + CURAND_DRAW_FLOATS * t,
                             doubles + CURAND_DRAW_DOUBLES * t);
}

extern "C" __global__ void draw_philox(const unsigned long long *cases, int n, unsigned int *ints,
                                       float *floats, double *doubles) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    unsigned long long seed = cases[3 * t], subsequence = cases[3 * t + 1];
    unsigned long long offset = cases[3 * t + 2];
    unsigned int *i = ints + CURAND_DRAW_INTS * t;
    float *f = floats + CURAND_DRAW_FLOATS * t;
    double *d = doubles + CURAND_DRAW_DOUBLES * t;
    draw_common<curandStatePhilox4_32_10_t>(seed, subsequence, offset, i, f, d);
    curandStatePhilox4_32_10_t s;
    for (int lead = 0; lead < 4; ++lead) {  // curand4 from each position within a block of four
        curand_init(seed, subsequence, offset, &s);
        for (int k = 0; k < lead; ++k) curand(&s);
        uint4 four = curand4(&s);
        i[16 + 4 * lead] = four.x, i[17 + 4 * lead] = four.y;
        i[18 + 4 * lead] = four.z, i[19 + 4 * lead] = four.w;
    }
    curand_init(seed, subsequence, offset, &s);
    float4 u = curand_uniform4(&s);
    f[24] = u.x, f[25] = u.y, f[26] = u.z, f[27] = u.w;
    curand_init(seed, subsequence, offset, &s);
    float4 g = curand_normal4(&s);
    f[28] = g.x, f[29] = g.y, f[30] = g.z, f[31] = g.w;
    curand_init(seed, subsequence, offset, &s);
    double2 ud = curand_uniform2_double(&s);
    d[10] = ud.x, d[11] = ud.y;
    curand_init(seed, subsequence, offset, &s);
    double2 gd = curand_normal2_double(&s);
    d[12] = gd.x, d[13] = gd.y;
}

// Many normals for measuring how far the CPU engine's are from a GPU's: thread t initializes
// (seed, t, 0) and draws `per_thread` of each kind.
template <class S>
__device__ void bulk(unsigned long long seed, int n, int per_thread, float *normals,
                     double *normals_double, float *log_normals) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    S s;
    curand_init(seed, t, 0, &s);
    for (int k = 0; k < per_thread; ++k) normals[(size_t)t * per_thread + k] = curand_normal(&s);
    curand_init(seed, t, 0, &s);
    for (int k = 0; k < per_thread; ++k)
        normals_double[(size_t)t * per_thread + k] = curand_normal_double(&s);
    curand_init(seed, t, 0, &s);
    for (int k = 0; k < per_thread; ++k)
        log_normals[(size_t)t * per_thread + k] = curand_log_normal(&s, 0.5f, 0.75f);
}

extern "C" __global__ void bulk_xorwow(unsigned long long seed, int n, int per_thread,
                                       float *normals, double *normals_double,
                                       float *log_normals) {
    bulk<curandState>(seed, n, per_thread, normals, normals_double, log_normals);
}

extern "C" __global__ void bulk_philox(unsigned long long seed, int n, int per_thread,
                                       float *normals, double *normals_double,
                                       float *log_normals) {
    bulk<curandStatePhilox4_32_10_t>(seed, n, per_thread, normals, normals_double, log_normals);
}
