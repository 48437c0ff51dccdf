// 10.4 Minimizing control divergence (PMPP 4th ed., Fig. 10.9); 10.5 memory divergence
// Changed from 01_simple: thread t owns element t (not 2t) and in the pass with stride s the
// threads t < s add the element s to the right. The active threads are packed at the front of
// the block, so whole warps retire together, and a warp's accesses are contiguous (coalesced).
// Still in place in global memory, still one segment of 2*BLOCK_DIM per block, multi-pass.
// Expect: same bytes requested from the kernel's point of view, far fewer warp instructions and
// memory transactions: faster than 01_simple at large n. Recorded at 2^28: 1.39x 01_simple on the
// H100, 1.41x on the H200.
#ifndef BLOCK_DIM
#define BLOCK_DIM 256   // launch with blockDim.x == BLOCK_DIM; a power of two
#endif

extern "C" __global__ void ConvergentSumReductionKernel(float* input, float* output, unsigned int n) {
    unsigned int segment = 2 * blockDim.x * blockIdx.x;
    unsigned int i = segment + threadIdx.x;
    for (unsigned int stride = blockDim.x; stride >= 1; stride /= 2) {
        if (threadIdx.x < stride && i + stride < n) {
            input[i] += input[i + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        output[blockIdx.x] = input[segment];
    }
}
