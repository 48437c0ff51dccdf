// Atomics on global and shared memory, under contention.
#include <cuda_fp16.h>
#ifndef NBINS
#define NBINS 16
#endif

extern "C" __global__ void histogram_global(const int* data, int n, unsigned* bins) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(&bins[data[i] % NBINS], 1u);
}

extern "C" __global__ void histogram_shared(const int* data, int n, unsigned* bins) {
    __shared__ unsigned local[NBINS];
    for (int b = threadIdx.x; b < NBINS; b += blockDim.x) local[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
        atomicAdd(&local[data[i] % NBINS], 1u);
    __syncthreads();
    for (int b = threadIdx.x; b < NBINS; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}

// Integer-valued inputs, so every order of additions gives the same exact result.
extern "C" __global__ void sums(const float* x, int n, float* fsum, double* dsum, int* isum,
                                unsigned long long* usum, int* imax, int* imin, unsigned* umax) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomicAdd(fsum, x[i]);
    atomicAdd(dsum, (double)x[i]);
    atomicAdd(isum, (int)x[i]);
    atomicAdd(usum, (unsigned long long)x[i]);
    atomicMax(imax, (int)x[i]);
    atomicMin(imin, (int)x[i]);
    atomicMax(umax, (unsigned)x[i]);
}

extern "C" __global__ void shared_float_double(const float* x, int n, float* fout, double* dout) {
    __shared__ float fs;
    __shared__ double ds;
    if (threadIdx.x == 0) { fs = 0.0f; ds = 0.0; }
    __syncthreads();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { atomicAdd(&fs, x[i]); atomicAdd(&ds, (double)x[i]); }
    __syncthreads();
    if (threadIdx.x == 0) { fout[blockIdx.x] = fs; dout[blockIdx.x] = ds; }
}

extern "C" __global__ void misc(unsigned* inc, unsigned* dec, int* sub, unsigned* andv, unsigned* orv,
                                unsigned* xorv, int* exch, int* cas_count, unsigned limit) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    atomicInc(inc, limit);
    atomicDec(dec, limit);
    atomicSub(sub, 2);
    atomicAnd(andv, ~(1u << (i % 32)));
    atomicOr(orv, 1u << (i % 32));
    atomicXor(xorv, 1u << (i % 8));
    atomicExch(exch, 7);
    // a lock-free increment built from atomicCAS
    int old = *cas_count, assumed;
    do { assumed = old; old = atomicCAS(cas_count, assumed, assumed + 1); } while (old != assumed);
}

extern "C" __global__ void half_sums(const __half* x, int n, __half* total, __half2* total2) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomicAdd(total, x[i]);
    atomicAdd(total2, __halves2half2(x[i], __hadd(x[i], x[i])));
}
