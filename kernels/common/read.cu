// Device ceiling: read-only memory bandwidth.
// The copy (copy.cu) reads and writes; a kernel that only reads its input (a sum, a histogram, a
// max) has a different ceiling: the bandwidth of reads alone. Here each thread reads float4s
// grid-stride over a buffer far larger than L2, UNROLL loads in flight per iteration, adds them
// up, and writes one partial per warp - writes are 1/(32 * loads per thread) of the traffic.
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
    long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float sum = 0.0f;
    for (; i + (UNROLL - 1) * stride < n4; i += UNROLL * stride) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            v[u] = src[i + u * stride];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            sum += (v[u].x + v[u].y) + (v[u].z + v[u].w);
        }
    }
    for (; i < n4; i += stride) {
        float4 v = src[i];
        sum += (v.x + v.y) + (v.z + v.w);
    }
    for (int offset = 16; offset > 0; offset /= 2) {
        sum += __shfl_down_sync(0xffffffffu, sum, offset);
    }
    if (threadIdx.x % 32 == 0) {
        warp_sums[((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32] = sum;
    }
}
