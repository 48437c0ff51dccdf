// 10.8 Thread coarsening for reduced overhead (PMPP 4th ed., Fig. 10.15)
// Changed from 04_segmented: each block owns a segment of COARSE_FACTOR*2*BLOCK_DIM elements, and
// each thread first adds up its 2*COARSE_FACTOR elements (BLOCK_DIM apart, so a warp's loads stay
// coalesced) serially in a register, before the shared-memory tree runs once. Fewer blocks, so
// fewer tree passes with idle threads, fewer barriers and COARSE_FACTOR times fewer atomics.
// Expect: same bytes; less overhead per element - faster than 04 until the serial loop stops
// exposing enough independent loads (try COARSE_FACTOR 1, 2, 4, 8, 16).
#ifndef BLOCK_DIM
#define BLOCK_DIM 256   // launch with blockDim.x == BLOCK_DIM; a power of two
#endif
#ifndef COARSE_FACTOR
#define COARSE_FACTOR 4
#endif

extern "C" __global__ void CoarsenedSumReductionKernel(const float* input, float* output, unsigned int n) {
    // BEGIN SOLUTION
    __shared__ float input_s[BLOCK_DIM];
    unsigned int segment = COARSE_FACTOR * 2 * BLOCK_DIM * blockIdx.x;
    unsigned int i = segment + threadIdx.x;
    unsigned int t = threadIdx.x;
    float sum = 0.0f;
    for (unsigned int tile = 0; tile < COARSE_FACTOR * 2; ++tile) {
        if (i + tile * BLOCK_DIM < n) {
            sum += input[i + tile * BLOCK_DIM];
        }
    }
    input_s[t] = sum;
    for (unsigned int stride = BLOCK_DIM / 2; stride >= 1; stride /= 2) {
        __syncthreads();
        if (t < stride) {
            input_s[t] += input_s[t + stride];
        }
    }
    if (t == 0) {
        atomicAdd(output, input_s[0]);
    }
    // END SOLUTION
}
