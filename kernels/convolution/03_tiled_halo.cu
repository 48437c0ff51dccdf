// 7.4 Tiled convolution with halo cells (PMPP 4th ed., Fig. 7.12)
// Changed from 02_constant_memory: a block is one INPUT tile, IN_TILE_DIM x IN_TILE_DIM threads.
// Each thread loads one element of the tile - the block's output tile plus a halo of
// FILTER_RADIUS cells on every side, ghost cells as 0 - into shared memory N_s; after
// __syncthreads() only the inner OUT_TILE_DIM x OUT_TILE_DIM threads compute an output, reading
// their whole neighbourhood from N_s. Consecutive blocks overlap by 2 * FILTER_RADIUS columns
// (rows): each halo cell is loaded by two to four blocks. (The book's listing declares N_s
// without its type and calls the filter F_c.)
// Expect: IN_TILE_DIM^2 loads of 4 bytes per OUT_TILE_DIM^2 * (2r+1)^2 multiply-adds: for a
// 32 x 32 input tile and a 5 x 5 filter the book's 9.57 OP/B (28 x 28 outputs per block),
// 19 times the intensity of 02. The price: (IN^2 - OUT^2) / IN^2 = 23% of the threads idle
// while computing.
#ifndef FILTER_RADIUS
#define FILTER_RADIUS 2
#endif
#ifndef IN_TILE_DIM
#define IN_TILE_DIM 32      // launch with blockDim = (IN_TILE_DIM, IN_TILE_DIM)
#endif
#define OUT_TILE_DIM ((IN_TILE_DIM) - 2 * (FILTER_RADIUS))
__constant__ float F[2 * FILTER_RADIUS + 1][2 * FILTER_RADIUS + 1];

extern "C" __global__ void convolution_tiled_2D_const_mem_kernel(const float* N, float* P, int width, int height) {
    // BEGIN SOLUTION
    static_assert(OUT_TILE_DIM >= 1, "IN_TILE_DIM must exceed 2 * FILTER_RADIUS");
    static_assert(IN_TILE_DIM * IN_TILE_DIM <= 1024, "a block is one input tile: at most 1024 threads");
    int col = blockIdx.x * OUT_TILE_DIM + threadIdx.x - FILTER_RADIUS;
    int row = blockIdx.y * OUT_TILE_DIM + threadIdx.y - FILTER_RADIUS;
    // Loading input tile
    __shared__ float N_s[IN_TILE_DIM][IN_TILE_DIM];
    if (row >= 0 && row < height && col >= 0 && col < width) {
        N_s[threadIdx.y][threadIdx.x] = N[row * width + col];
    } else {
        N_s[threadIdx.y][threadIdx.x] = 0.0f;
    }
    __syncthreads();
    // Calculating output elements
    int tileCol = threadIdx.x - FILTER_RADIUS;
    int tileRow = threadIdx.y - FILTER_RADIUS;
    // Turning off the threads at the edges of the block
    if (col >= 0 && col < width && row >= 0 && row < height) {
        if (tileCol >= 0 && tileCol < OUT_TILE_DIM && tileRow >= 0 && tileRow < OUT_TILE_DIM) {
            float Pvalue = 0.0f;
            for (int fRow = 0; fRow < 2 * FILTER_RADIUS + 1; fRow++) {
                for (int fCol = 0; fCol < 2 * FILTER_RADIUS + 1; fCol++) {
                    Pvalue += F[fRow][fCol] * N_s[tileRow + fRow][tileCol + fCol];
                }
            }
            P[row * width + col] = Pvalue;
        }
    }
    // END SOLUTION
}
