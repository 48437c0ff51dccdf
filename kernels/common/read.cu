// Device ceiling: read-only memory bandwidth.
// The copy (copy.cu) reads and writes; a kernel that only reads its input (a sum, a histogram, a
// max) has a different ceiling: the bandwidth of reads alone. Here each block reads one tile of
// BLOCK_DIM * UNROLL float4s - UNROLL coalesced float4 loads per thread, all issued before any is
// used - adds them up, and writes one partial per warp: writes are 1/(8 * UNROLL) of the traffic.
// The grid covers the input once (no grid-stride loop), as the fastest sums do.
// Bytes counted = bytes read = 16 * n4. The partials are checked: a compiler that dropped loads
// would leave them wrong.

#ifndef BLOCK_DIM
#define BLOCK_DIM 256
#endif
#ifndef UNROLL
#define UNROLL 4
#endif

extern "C" __global__ void __launch_bounds__(BLOCK_DIM)
read_kernel(const float4* __restrict__ src, float* __restrict__ warp_sums, long long n4) {
    long long tile = (long long)blockIdx.x * BLOCK_DIM * UNROLL;
    float4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        long long i = tile + u * BLOCK_DIM + threadIdx.x;
        v[u] = i < n4 ? src[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
    float sum = 0.0f;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        sum += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        sum += __shfl_down_sync(0xffffffffu, sum, offset);
    }
    if (threadIdx.x % 32 == 0) {
        warp_sums[((long long)blockIdx.x * BLOCK_DIM + threadIdx.x) / 32] = sum;
    }
}
