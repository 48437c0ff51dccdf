// Warp primitives. shuffle_all<T> is launched for several T through name_expressions.
#include <cuda_fp16.h>
#define FULL 0xffffffffu

template <typename T>
__global__ void shuffle_all(const T* in, const int* src, T* idx, T* up, T* down, T* xr, int delta, int width) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    T v = in[t];
    idx[t] = __shfl_sync(FULL, v, src[t], width);
    up[t] = __shfl_up_sync(FULL, v, delta, width);
    down[t] = __shfl_down_sync(FULL, v, delta, width);
    xr[t] = __shfl_xor_sync(FULL, v, delta, width);
}

extern "C" __global__ void votes(const int* pred, unsigned* ballot, int* any, int* all, unsigned* active, unsigned* count_lt) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    int p = pred[t];
    ballot[t] = __ballot_sync(FULL, p);
    any[t] = __any_sync(FULL, p);
    all[t] = __all_sync(FULL, p);
    active[t] = __activemask();
    count_lt[t] = __popc(__ballot_sync(FULL, p) & ((1u << (threadIdx.x % 32)) - 1u));
}

// The standard warp-shuffle sum: lane 0 of each warp holds the warp's total.
extern "C" __global__ void warp_sums(const float* in, float* out) {
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    float v = in[t];
    for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_down_sync(FULL, v, offset);
    if (threadIdx.x % warpSize == 0) out[t / warpSize] = v;
}

extern "C" __global__ void block_votes(const int* pred, int* count, int* all, int* any) {
    int p = pred[blockIdx.x * blockDim.x + threadIdx.x];
    int c = __syncthreads_count(p);
    int a = __syncthreads_and(p);
    int o = __syncthreads_or(p);
    if (threadIdx.x == 0) { count[blockIdx.x] = c; all[blockIdx.x] = a; any[blockIdx.x] = o; }
}
