// Beyond the book: vectorized (float4) loads, several loads in flight per thread
// Changed from 14_warp_shuffle: the grid-stride loop reads float4s - one 16-byte load
// instruction (LDG.E.128 in SASS) instead of four 4-byte ones - and is unrolled UNROLL times
// with UNROLL independent accumulators, so each thread issues UNROLL loads before it waits for
// the first. Bandwidth-bound code needs many bytes in flight (Little's law: bandwidth x latency,
// megabytes across the GPU); fewer, wider, independent loads get there with fewer instructions.
// A float4 load needs a 16-byte-aligned address: the 0-3 floats before the first aligned address
// (`head`, usually 0: cudaMalloc, CuPy and NumPy buffers start aligned, but a slice x[1:] does not)
// and the 0-3 floats after the last whole float4 (`tail`) are added one by one, so any n works.
// The grid is no longer one wave: Python launches enough blocks for about one unrolled step per
// thread (up to 64 times what fills the GPU), so that blocks finish at different times and the
// block scheduler keeps every SM busy to the end. A second launch with one block sums the partials.
// Expect: near the read roofline at large n, on par with CUB's DeviceReduce (the recorded H100
// figures: notebooks/10_reduction.ipynb, docs/goals.md); at small n launch overhead dominates.
#ifndef BLOCK_DIM
#define BLOCK_DIM 1024  // launch with blockDim.x == BLOCK_DIM, a multiple of 32 (1024: ~1-2% faster than 256 on an H100)
#endif
#ifndef UNROLL
#define UNROLL 4        // float4 loads in flight per thread (and independent accumulators)
#endif
#define FULL_MASK 0xffffffffu

__device__ float warpReduceSum(float sum) {
    // BEGIN SOLUTION reduction/14_warp_shuffle
    for (unsigned int offset = 16; offset > 0; offset /= 2) {
        sum += __shfl_down_sync(FULL_MASK, sum, offset);
    }
    // END SOLUTION reduction/14_warp_shuffle
    return sum;
}

extern "C" __global__ void VectorizedSumReductionKernel(const float* __restrict__ input,
                                                        float* __restrict__ output, unsigned int n) {
    static_assert(BLOCK_DIM % 32 == 0 && BLOCK_DIM <= 1024, "BLOCK_DIM must be a multiple of 32, at most 1024");
    __shared__ float warpSum_s[BLOCK_DIM / 32];
    // Split [0, n) into head (scalars up to the first 16-byte boundary), body (n4 float4s), tail.
    unsigned int head = (unsigned int)((16 - (size_t)input % 16) % 16 / sizeof(float));
    if (head > n) {
        head = n;
    }
    unsigned int n4 = (n - head) / 4;
    unsigned int tail = head + 4 * n4;
    const float4* input4 = reinterpret_cast<const float4*>(input + head);

    unsigned int t = threadIdx.x;
    unsigned int g = blockIdx.x * BLOCK_DIM + t;     // this thread's index in the grid
    unsigned int gridSize = BLOCK_DIM * gridDim.x;
    float acc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        acc[u] = 0.0f;
    }
    unsigned int i = g;
    for (; i + (UNROLL - 1) * gridSize < n4; i += UNROLL * gridSize) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            v[u] = input4[i + u * gridSize];          // UNROLL independent 16-byte loads ...
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            acc[u] += (v[u].x + v[u].y) + (v[u].z + v[u].w);   // ... then the adds
        }
    }
    for (; i < n4; i += gridSize) {                   // fewer than UNROLL float4s left
        float4 v = input4[i];
        acc[0] += (v.x + v.y) + (v.z + v.w);
    }
    if (g < head) {
        acc[0] += input[g];
    }
    if (g < n - tail) {
        acc[0] += input[tail + g];
    }
    float sum = 0.0f;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        sum += acc[u];
    }

    // Block reduction, as in 14_warp_shuffle.
    unsigned int lane = t % 32;
    unsigned int warp = t / 32;
    sum = warpReduceSum(sum);
    if (lane == 0) {
        warpSum_s[warp] = sum;
    }
    __syncthreads();
    if (warp == 0) {
        sum = (lane < BLOCK_DIM / 32) ? warpSum_s[lane] : 0.0f;
        sum = warpReduceSum(sum);
        if (t == 0) {
            output[blockIdx.x] = sum;
        }
    }
}
