// Beyond the book: one pass - per-block partials, and the last block to finish adds them up
// Changed from 15_vectorized: no second launch. Each block writes its partial to partials[b],
// makes it visible to the whole GPU (__threadfence()), then takes a ticket from a global counter
// (atomicAdd(&retirementCount, 1)). The block that draws the last ticket, gridDim.x - 1, knows
// that every other partial is written, so it adds all gridDim.x partials - in index order, the
// same order whichever block came last, so the result is deterministic (unlike 04_segmented's
// float atomicAdd) - and writes the total after them, to partials[gridDim.x] (the array has
// gridDim.x + 1 floats). It then resets the counter to 0 so that the next launch starts clean.
// This is the threadFenceReduction pattern of the CUDA Programming Guide. Launches must not
// overlap (two at once on different streams would share the counter).
// Expect: the same bandwidth as 15_vectorized, one launch instead of two. The last block's work
// is as serial as a second launch, so the saving is the launch overhead, a few microseconds:
// it matters at small and medium n, not at 2^28.
#ifndef BLOCK_DIM
#define BLOCK_DIM 1024  // launch with blockDim.x == BLOCK_DIM, a multiple of 32 (1024: ~1-2% faster than 256 on an H100)
#endif
#ifndef UNROLL
#define UNROLL 4        // float4 loads in flight per thread (and independent accumulators)
#endif
#define FULL_MASK 0xffffffffu

__device__ unsigned int retirementCount = 0;   // blocks finished so far in this launch

__device__ float warpReduceSum(float sum) {
    // BEGIN SOLUTION reduction/14_warp_shuffle
    for (unsigned int offset = 16; offset > 0; offset /= 2) {
        sum += __shfl_down_sync(FULL_MASK, sum, offset);
    }
    // END SOLUTION reduction/14_warp_shuffle
    return sum;
}

// The block's total, in thread 0. All threads of the block must call it.
__device__ float blockReduceSum(float sum, float* warpSum_s) {
    unsigned int lane = threadIdx.x % 32;
    unsigned int warp = threadIdx.x / 32;
    sum = warpReduceSum(sum);
    if (lane == 0) {
        warpSum_s[warp] = sum;
    }
    __syncthreads();
    if (warp == 0) {
        sum = (lane < BLOCK_DIM / 32) ? warpSum_s[lane] : 0.0f;
        sum = warpReduceSum(sum);
    }
    return sum;
}

extern "C" __global__ void OnePassSumReductionKernel(const float* __restrict__ input, float* partials,
                                                     unsigned int n) {
    static_assert(BLOCK_DIM % 32 == 0 && BLOCK_DIM <= 1024, "BLOCK_DIM must be a multiple of 32, at most 1024");
    __shared__ float warpSum_s[BLOCK_DIM / 32];
    __shared__ bool isLastBlockDone;
    // Per-block partial sum: exactly as in 15_vectorized.
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
        acc[u] = 0.0f;
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
            acc[u] += (v[u].x + v[u].y) + (v[u].z + v[u].w);
        }
    }
    for (; i < n4; i += gridSize) {
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
    sum = blockReduceSum(sum, warpSum_s);

    // Publish the partial, then take a ticket.
    if (t == 0) {
        partials[blockIdx.x] = sum;
        __threadfence();                     // the partial is visible to all blocks before the ticket is
        unsigned int ticket = atomicAdd(&retirementCount, 1u);
        isLastBlockDone = (ticket == gridDim.x - 1);
    }
    __syncthreads();

    // The last block adds the partials, in index order.
    if (isLastBlockDone) {
        __threadfence();                     // pairs with the writers' fence: see all their partials
        const volatile float* partials_v = partials;   // volatile: read from L2, never a stale L1 line
        float total = 0.0f;
        for (unsigned int j = t; j < gridDim.x; j += BLOCK_DIM) {
            total += partials_v[j];
        }
        total = blockReduceSum(total, warpSum_s);
        if (t == 0) {
            partials[gridDim.x] = total;
            retirementCount = 0;             // every block has its ticket: reset for the next launch
        }
    }
}
