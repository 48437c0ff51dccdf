// 7.5 Tiled convolution using caches for halo cells (PMPP 4th ed., Fig. 7.15), corrected
// Changed from 04_cached_halo_as_printed: the neighbour's position in the tile, tileRow/tileCol,
// is computed once as a signed int and used both to decide "in the tile?" and to index N_s, so
// the test and the read can no longer disagree.
// As in 04: input tile = output tile = block (TILE_DIM x TILE_DIM, a power of two), each element
// loaded into shared memory exactly once; the halo is read from global memory, where the
// neighbouring tiles' blocks have usually just brought it into L2.
// Expect: if every halo read hits in L2, DRAM sees each input element once: 2 (2r+1)^2 flops per
// 4 bytes, 12.5 OP/B for a 5 x 5 filter - the limit of 03's table for an infinitely large tile.
// The price: a branch per filter tap, and halo loads that wait on L2 rather than on shared memory.
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
    // Loading the tile's own elements
    __shared__ float N_s[TILE_DIM][TILE_DIM];
    if (row < height && col < width) {
        N_s[threadIdx.y][threadIdx.x] = N[row * width + col];
    } else {
        N_s[threadIdx.y][threadIdx.x] = 0.0f;
    }
    __syncthreads();
    // Calculating output elements
    if (col < width && row < height) {
        float Pvalue = 0.0f;
        for (int fRow = 0; fRow < 2 * FILTER_RADIUS + 1; fRow++) {
            for (int fCol = 0; fCol < 2 * FILTER_RADIUS + 1; fCol++) {
                int tileRow = (int)threadIdx.y - FILTER_RADIUS + fRow;   // signed: may be < 0
                int tileCol = (int)threadIdx.x - FILTER_RADIUS + fCol;
                if (tileRow >= 0 && tileRow < TILE_DIM && tileCol >= 0 && tileCol < TILE_DIM) {
                    Pvalue += F[fRow][fCol] * N_s[tileRow][tileCol];         // interior: shared memory
                } else {
                    int inRow = row - FILTER_RADIUS + fRow;
                    int inCol = col - FILTER_RADIUS + fCol;
                    if (inRow >= 0 && inRow < height && inCol >= 0 && inCol < width) {
                        // BEGIN SOLUTION convolution/02_constant_memory
                        Pvalue += F[fRow][fCol] * N[inRow * width + inCol];  // halo: global (L2)
                        // END SOLUTION convolution/02_constant_memory
                    }                                                         // ghost: 0
                }
            }
        }
        P[row * width + col] = Pvalue;
    }
}
