// Beyond the book: thread coarsening with register tiling
// Changed from 05_cached_halo: back to a full input tile with its halo in shared memory (as in
// 03), but a block is no longer one thread per element. BLOCK_DIM_X x BLOCK_DIM_Y threads load
// the (OUT_TILE_H + 2r) x (OUT_TILE_W + 2r) input tile together, in a loop, consecutive threads
// on consecutive columns; then each thread computes COARSE_FACTOR outputs down one column.
// Register tiling: the thread walks down the COARSE_FACTOR + 2r input rows its outputs need,
// reads each row's 2r+1 neighbours from N_s into registers ONCE, and adds them into every output
// row that uses them (up to 2r+1 of its COARSE_FACTOR accumulators) - where 03 and 05 read
// (2r+1)^2 values from shared memory per output, this reads (COARSE_FACTOR + 2r)(2r+1) per
// COARSE_FACTOR outputs: 7.5 instead of 25 for r = 2, COARSE_FACTOR = 8.
// Fewer, larger tiles also shrink the halo: a 64 x 32 output tile loads 68 x 36 inputs (1.20 per
// output) where 03 loaded 32 x 32 per 28 x 28 (1.31); and no thread idles in the compute phase.
// Expect: shared-memory traffic and instructions per output down to about a third of 03's; the
// kernel should become limited by DRAM (reading N, writing P) rather than by shared memory.
// Recorded: 0.84x copy on the H100, 0.63x on the H200 - short of the DRAM roof there (07 moves
// the same bytes 1.4 times as fast).
#ifndef FILTER_RADIUS
#define FILTER_RADIUS 2
#endif
#ifndef BLOCK_DIM_X
#define BLOCK_DIM_X 32      // threads per block row: a multiple of 32, so a warp reads one N_s row
#endif
#ifndef BLOCK_DIM_Y
#define BLOCK_DIM_Y 8       // launch with blockDim = (BLOCK_DIM_X, BLOCK_DIM_Y)
#endif
#ifndef COARSE_FACTOR
#define COARSE_FACTOR 8     // outputs per thread, consecutive rows of one column
#endif
#define FILTER_DIM (2 * FILTER_RADIUS + 1)
#define OUT_TILE_W BLOCK_DIM_X
#define OUT_TILE_H (BLOCK_DIM_Y * COARSE_FACTOR)
#define IN_TILE_W (OUT_TILE_W + 2 * FILTER_RADIUS)
#define IN_TILE_H (OUT_TILE_H + 2 * FILTER_RADIUS)
#define LOADS_PER_THREAD ((IN_TILE_H * IN_TILE_W + BLOCK_DIM_X * BLOCK_DIM_Y - 1) / (BLOCK_DIM_X * BLOCK_DIM_Y))
__constant__ float F[FILTER_DIM][FILTER_DIM];

extern "C" __global__ void convolution_register_tiled_kernel(const float* __restrict__ N,
                                                             float* __restrict__ P, int width, int height) {
    static_assert(BLOCK_DIM_X % 32 == 0, "BLOCK_DIM_X must be a multiple of 32 (no bank conflicts)");
    static_assert(BLOCK_DIM_X * BLOCK_DIM_Y <= 1024, "at most 1024 threads per block");
    __shared__ float N_s[IN_TILE_H][IN_TILE_W];
    int tileRow0 = blockIdx.y * OUT_TILE_H - FILTER_RADIUS;   // N's row of N_s[0][.]
    int tileCol0 = blockIdx.x * OUT_TILE_W - FILTER_RADIUS;   // N's column of N_s[.][0]
    int t = threadIdx.y * BLOCK_DIM_X + threadIdx.x;

    // Load the input tile, halo and ghost cells (as 0) included: the whole block, each thread
    // LOADS_PER_THREAD elements - all its loads issued before the first is stored, so that they
    // are in flight together.
    float v[LOADS_PER_THREAD];
#pragma unroll
    for (int u = 0; u < LOADS_PER_THREAD; u++) {
        int i = t + u * BLOCK_DIM_X * BLOCK_DIM_Y;
        int inRow = tileRow0 + i / IN_TILE_W;
        int inCol = tileCol0 + i % IN_TILE_W;
        bool inside = i < IN_TILE_H * IN_TILE_W && inRow >= 0 && inRow < height && inCol >= 0 && inCol < width;
        v[u] = inside ? N[inRow * width + inCol] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < LOADS_PER_THREAD; u++) {
        int i = t + u * BLOCK_DIM_X * BLOCK_DIM_Y;
        if (i < IN_TILE_H * IN_TILE_W) {
            N_s[i / IN_TILE_W][i % IN_TILE_W] = v[u];
        }
    }
    __syncthreads();

    // This thread's outputs: column threadIdx.x, rows firstRow .. firstRow + COARSE_FACTOR - 1 of
    // the output tile, which need N_s rows firstRow .. firstRow + COARSE_FACTOR + 2r - 1.
    int firstRow = threadIdx.y * COARSE_FACTOR;
    float Pvalue[COARSE_FACTOR];
#pragma unroll
    for (int k = 0; k < COARSE_FACTOR; k++) {
        Pvalue[k] = 0.0f;
    }
#pragma unroll
    for (int j = 0; j < COARSE_FACTOR + 2 * FILTER_RADIUS; j++) {
        float in[FILTER_DIM];                       // one input row's neighbours, in registers
#pragma unroll
        for (int fCol = 0; fCol < FILTER_DIM; fCol++) {
            in[fCol] = N_s[firstRow + j][threadIdx.x + fCol];
        }
#pragma unroll
        for (int k = 0; k < COARSE_FACTOR; k++) {   // every output row that uses input row j
            int fRow = j - k;                       // known at compile time once unrolled
            if (fRow >= 0 && fRow < FILTER_DIM) {
#pragma unroll
                for (int fCol = 0; fCol < FILTER_DIM; fCol++) {
                    Pvalue[k] += F[fRow][fCol] * in[fCol];
                }
            }
        }
    }
    int outCol = blockIdx.x * OUT_TILE_W + threadIdx.x;
#pragma unroll
    for (int k = 0; k < COARSE_FACTOR; k++) {
        int outRow = blockIdx.y * OUT_TILE_H + firstRow + k;
        if (outRow < height && outCol < width) {
            P[outRow * width + outCol] = Pvalue[k];
        }
    }
}
