// 7.5 Tiled convolution using caches for halo cells - the listing AS PRINTED (PMPP 4th ed.,
// Fig. 7.15). A teaching example of a bug: never run it on a GPU.
// Changed from 03_tiled_halo: input tile = output tile = block, TILE_DIM x TILE_DIM; only the
// tile's own elements go to shared memory. A neighbour inside the tile is read from N_s, a halo
// cell straight from global memory - by then the neighbouring block has usually brought it into
// the L2 cache - and a ghost cell counts as 0. No thread idles, no tile overlaps another.
// The bug: the shared-memory read N_s[threadIdx.y + fRow][threadIdx.x + fCol] lacks the
// "- FILTER_RADIUS" of the test just above it. Every value read from N_s is shifted by
// FILTER_RADIUS rows and columns (wrong results), and threads near the bottom of the tile read
// past the end of N_s. (The tests "threadIdx.x - FILTER_RADIUS + fCol >= 0" compare an unsigned
// expression, always true - nvcc warns "pointless comparison of unsigned integer with zero" - but
// a negative index wraps to a huge unsigned one and fails "< TILE_DIM", so those neighbours still
// go to global memory, as intended - by luck.)
// On the CPU engine the results are wrong and check=True stops at the out-of-bounds read; on a
// GPU an access past the block's shared memory is an "out of range address" exception that ends
// the CUDA context, so the workbook never launches this file there. 05_cached_halo is the fix.
#ifndef FILTER_RADIUS
#define FILTER_RADIUS 2
#endif
#ifndef TILE_DIM
#define TILE_DIM 32         // launch with blockDim = (TILE_DIM, TILE_DIM)
#endif
__constant__ float F[2 * FILTER_RADIUS + 1][2 * FILTER_RADIUS + 1];

extern "C" __global__ void convolution_cached_tiled_2D_const_mem_kernel(const float* N, float* P,
                                                                        int width, int height) {
    int col = blockIdx.x * TILE_DIM + threadIdx.x;
    int row = blockIdx.y * TILE_DIM + threadIdx.y;
    // loading input tile
    __shared__ float N_s[TILE_DIM][TILE_DIM];
    if (row < height && col < width) {
        N_s[threadIdx.y][threadIdx.x] = N[row * width + col];
    } else {
        N_s[threadIdx.y][threadIdx.x] = 0.0f;
    }
    __syncthreads();
    // Calculating output elements
    // turning off the threads at the edges of the block
    if (col < width && row < height) {
        float Pvalue = 0.0f;
        for (int fRow = 0; fRow < 2 * FILTER_RADIUS + 1; fRow++) {
            for (int fCol = 0; fCol < 2 * FILTER_RADIUS + 1; fCol++) {
                if (threadIdx.x - FILTER_RADIUS + fCol >= 0 &&
                    threadIdx.x - FILTER_RADIUS + fCol < TILE_DIM &&
                    threadIdx.y - FILTER_RADIUS + fRow >= 0 &&
                    threadIdx.y - FILTER_RADIUS + fRow < TILE_DIM) {
                    Pvalue += F[fRow][fCol] * N_s[threadIdx.y + fRow][threadIdx.x + fCol];
                } else {
                    if (row - FILTER_RADIUS + fRow >= 0 &&
                        row - FILTER_RADIUS + fRow < height &&
                        col - FILTER_RADIUS + fCol >= 0 &&
                        col - FILTER_RADIUS + fCol < width) {
                        Pvalue += F[fRow][fCol] *
                                  N[(row - FILTER_RADIUS + fRow) * width + col - FILTER_RADIUS + fCol];
                    }
                }
            }
        }
        P[row * width + col] = Pvalue;
    }
}
