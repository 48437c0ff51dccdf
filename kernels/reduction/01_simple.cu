// 10.3 A simple reduction kernel (PMPP 4th ed., Fig. 10.6)
// Each block reduces its own segment of 2*BLOCK_DIM elements in place, in global memory: thread t
// owns element 2t; in the pass with stride s, the threads whose index is a multiple of s add the
// element s to the right into their own. Block b leaves its sum in output[b]; Python launches
// again on those partials until one value remains. The book's listing handles exactly 2*blockDim.x
// elements; here an element past the end of the input is simply never added (it counts as the
// identity, 0), so any n >= 1 works. The kernel overwrites its input: the launcher reduces a copy.
// Expect: the baseline. Every pass reads and writes global memory, half the threads of each warp
// (then 3/4, 7/8, ...) sit idle behind `threadIdx.x % stride`, and the active threads' accesses
// are spread out (stride 2s apart): heavy control and memory divergence.
#ifndef BLOCK_DIM
#define BLOCK_DIM 256   // launch with blockDim.x == BLOCK_DIM; a power of two
#endif

extern "C" __global__ void SimpleSumReductionKernel(float* input, float* output, unsigned int n) {
    unsigned int segment = 2 * blockDim.x * blockIdx.x;
    unsigned int i = segment + 2 * threadIdx.x;
    for (unsigned int stride = 1; stride <= blockDim.x; stride *= 2) {
        if (threadIdx.x % stride == 0 && i + stride < n) {
            input[i] += input[i + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        output[blockIdx.x] = input[segment];
    }
}
