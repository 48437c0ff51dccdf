// 10.7 Hierarchical reduction for arbitrary input length (PMPP 4th ed., Fig. 10.13)
// Changed from 03_shared_memory: instead of writing a partial per block and launching again,
// thread 0 of each block adds the block's sum straight into the total with atomicAdd(output, ...).
// One launch for any n; `*output` must hold 0 (the identity) before the launch.
// Expect: about the same time as 03's first pass; the later passes (and their launch overhead)
// are gone. Recorded: slower than all of 03, 0.56x 03_shared_memory on the H100 and the H200 -
// the time follows the atomics on one address, one per block (on the H200, 05_coarsened at
// COARSE_FACTOR 2, with half the blocks, takes half the time). The order of the atomic additions
// varies from run to run, so the last bits of a float sum can differ between runs - a property of
// float atomics, not a bug.
#ifndef BLOCK_DIM
#define BLOCK_DIM 256   // launch with blockDim.x == BLOCK_DIM; a power of two
#endif

extern "C" __global__ void SegmentedSumReductionKernel(const float* input, float* output, unsigned int n) {
    __shared__ float input_s[BLOCK_DIM];
    unsigned int segment = 2 * BLOCK_DIM * blockIdx.x;
    unsigned int i = segment + threadIdx.x;
    unsigned int t = threadIdx.x;
    float a = (i < n) ? input[i] : 0.0f;
    float b = (i + BLOCK_DIM < n) ? input[i + BLOCK_DIM] : 0.0f;
    input_s[t] = a + b;
    for (unsigned int stride = BLOCK_DIM / 2; stride >= 1; stride /= 2) {
        __syncthreads();
        if (t < stride) {
            input_s[t] += input_s[t + stride];
        }
    }
    if (t == 0) {
        atomicAdd(output, input_s[0]);
    }
}
