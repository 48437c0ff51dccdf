// Beyond the book: warp-shuffle reduction (Kepler and later; __shfl_down_sync since CUDA 9)
// Changed from 13_reduce6: same grid-stride loop, but the tree inside the block uses registers
// instead of shared memory. __shfl_down_sync(FULL_MASK, v, offset) hands each lane the value of
// the lane `offset` above it, so a few shuffle-and-add steps - a tree over the warp's 32 lanes, as
// in 02_convergent but in registers - leave a warp's sum in lane 0, with no shared memory and no
// barrier. Lane 0 of each warp parks its sum in warpSum_s[warp]; after one __syncthreads() warp 0
// reduces those BLOCK_DIM/32 values the same way. The _sync variants take the mask of lanes that
// must take part: all 32, here.
// Not a template: BLOCK_DIM is a macro (a multiple of 32, at most 1024).
// Expect: one __syncthreads() per block instead of log2(BLOCK_DIM); with the tree already paid
// once per block (thanks to the grid-stride loop) the gain is small - this kernel is limited by
// how many loads are in flight, which is the next file's job.
#ifndef BLOCK_DIM
#define BLOCK_DIM 256   // launch with blockDim.x == BLOCK_DIM
#endif
#define FULL_MASK 0xffffffffu

__device__ float warpReduceSum(float sum) {
    // BEGIN SOLUTION
    for (unsigned int offset = 16; offset > 0; offset /= 2) {
        sum += __shfl_down_sync(FULL_MASK, sum, offset);
    }
    // END SOLUTION
    return sum;   // the warp's total, in lane 0
}

extern "C" __global__ void WarpShuffleSumReductionKernel(const float* input, float* output, unsigned int n) {
    static_assert(BLOCK_DIM % 32 == 0 && BLOCK_DIM <= 1024, "BLOCK_DIM must be a multiple of 32, at most 1024");
    __shared__ float warpSum_s[BLOCK_DIM / 32];
    unsigned int t = threadIdx.x;
    unsigned int lane = t % 32;
    unsigned int warp = t / 32;
    unsigned int i = blockIdx.x * (BLOCK_DIM * 2) + t;
    unsigned int gridSize = BLOCK_DIM * 2 * gridDim.x;
    float sum = 0.0f;
    while (i < n) {
        sum += input[i];
        if (i + BLOCK_DIM < n) {
            sum += input[i + BLOCK_DIM];
        }
        i += gridSize;
    }
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
