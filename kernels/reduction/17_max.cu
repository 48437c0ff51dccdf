// Reduction with another operator: max (PMPP 10.1-10.2: any associative and commutative operator
// with an identity value works with the same trees)
// Changed from 15_vectorized: + becomes fmaxf, and 0 - the identity of + - becomes -INFINITY, the
// identity of max: fmaxf(-INFINITY, x) == x for every x. It is what the accumulators start from
// and what a lane with no element contributes (a short last block, the shuffle of an absent warp).
// Starting from 0 instead would be a classic bug: on all-negative input the answer would be 0.
// Max is exact in floating point, so unlike a sum the result does not depend on the order.
// Expect: the same time as 15_vectorized (a max costs what an add costs; both are bandwidth-bound).
#ifndef BLOCK_DIM
#define BLOCK_DIM 1024  // launch with blockDim.x == BLOCK_DIM, a multiple of 32 (1024: ~1-2% faster than 256 on an H100)
#endif
#ifndef UNROLL
#define UNROLL 4        // float4 loads in flight per thread (and independent accumulators)
#endif
#ifndef INFINITY        // <math.h> defines it; NVRTC compiles without the host headers
#define INFINITY __int_as_float(0x7f800000)
#endif
#define FULL_MASK 0xffffffffu

__device__ float warpReduceMax(float m) {
    // BEGIN SOLUTION reduction/14_warp_shuffle
    for (unsigned int offset = 16; offset > 0; offset /= 2) {
        m = fmaxf(m, __shfl_down_sync(FULL_MASK, m, offset));
    }
    // END SOLUTION reduction/14_warp_shuffle
    return m;
}

extern "C" __global__ void VectorizedMaxReductionKernel(const float* __restrict__ input,
                                                        float* __restrict__ output, unsigned int n) {
    static_assert(BLOCK_DIM % 32 == 0 && BLOCK_DIM <= 1024, "BLOCK_DIM must be a multiple of 32, at most 1024");
    __shared__ float warpMax_s[BLOCK_DIM / 32];
    unsigned int head = (unsigned int)((16 - (size_t)input % 16) % 16 / sizeof(float));
    if (head > n) {
        head = n;
    }
    unsigned int n4 = (n - head) / 4;
    unsigned int tail = head + 4 * n4;
    const float4* input4 = reinterpret_cast<const float4*>(input + head);

    unsigned int t = threadIdx.x;
    unsigned int g = blockIdx.x * BLOCK_DIM + t;
    unsigned int gridSize = BLOCK_DIM * gridDim.x;
    float acc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        acc[u] = -INFINITY;
    }
    unsigned int i = g;
    for (; i + (UNROLL - 1) * gridSize < n4; i += UNROLL * gridSize) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            v[u] = input4[i + u * gridSize];
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            acc[u] = fmaxf(acc[u], fmaxf(fmaxf(v[u].x, v[u].y), fmaxf(v[u].z, v[u].w)));
        }
    }
    for (; i < n4; i += gridSize) {
        float4 v = input4[i];
        acc[0] = fmaxf(acc[0], fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));
    }
    if (g < head) {
        acc[0] = fmaxf(acc[0], input[g]);
    }
    if (g < n - tail) {
        acc[0] = fmaxf(acc[0], input[tail + g]);
    }
    float m = -INFINITY;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        m = fmaxf(m, acc[u]);
    }

    unsigned int lane = t % 32;
    unsigned int warp = t / 32;
    m = warpReduceMax(m);
    if (lane == 0) {
        warpMax_s[warp] = m;
    }
    __syncthreads();
    if (warp == 0) {
        m = (lane < BLOCK_DIM / 32) ? warpMax_s[lane] : -INFINITY;
        m = warpReduceMax(m);
        if (t == 0) {
            output[blockIdx.x] = m;
        }
    }
}
