// 8.3 Shared memory tiling for stencil sweep (PMPP 4th ed., Fig. 8.8)
// Changed from 01_basic: each block loads an IN_TILE_DIM^3 input tile into shared memory, in_s,
// one element per thread, then the threads of the inner OUT_TILE_DIM^3 = (IN_TILE_DIM - 2)^3
// compute their outputs from in_s; the outer layer of threads only loads (halo cells).
// Global loads per output: IN_TILE_DIM^3 / OUT_TILE_DIM^3 instead of 7. Book's model: 13 flops
// per output for 4 * T^3 / (T-2)^3 bytes, (13/4)(1 - 2/T)^3 OP/B: 1.37 OP/B at T = 8, never more
// than 3.25. T = 8 is the largest cube a 1024-thread block holds with room to spare (T^3 = 512).
// Expect: fewer load instructions than 01; but 58% of the threads (the halo) compute nothing and
// each warp still reads 8-float pieces of rows; on a GPU whose caches already served 01's reuse,
// little or no gain. Recorded: a loss, 0.63x 01_basic on the H100 and the H200.
#ifndef IN_TILE_DIM
#define IN_TILE_DIM 8   // launch with blockDim = (IN_TILE_DIM, IN_TILE_DIM, IN_TILE_DIM)
#endif
#define OUT_TILE_DIM (IN_TILE_DIM - 2)

extern "C" __global__ void SharedMemoryTilingStencilKernel(const float* in, float* out, unsigned int N,
                                                           float c0, float c1, float c2, float c3,
                                                           float c4, float c5, float c6) {
    int i = blockIdx.z * OUT_TILE_DIM + threadIdx.z - 1;
    int j = blockIdx.y * OUT_TILE_DIM + threadIdx.y - 1;
    int k = blockIdx.x * OUT_TILE_DIM + threadIdx.x - 1;
    __shared__ float in_s[IN_TILE_DIM][IN_TILE_DIM][IN_TILE_DIM];
    bool inGrid = i >= 0 && i < (int)N && j >= 0 && j < (int)N && k >= 0 && k < (int)N;
    if (inGrid) {
        in_s[threadIdx.z][threadIdx.y][threadIdx.x] = in[i*N*N + j*N + k];
    }
    __syncthreads();
    bool outputThread = threadIdx.z >= 1 && threadIdx.z < IN_TILE_DIM - 1
                     && threadIdx.y >= 1 && threadIdx.y < IN_TILE_DIM - 1
                     && threadIdx.x >= 1 && threadIdx.x < IN_TILE_DIM - 1;
    if (inGrid && outputThread) {
        if (i >= 1 && i < (int)N - 1 && j >= 1 && j < (int)N - 1 && k >= 1 && k < (int)N - 1) {
            out[i*N*N + j*N + k] = c0*in_s[threadIdx.z][threadIdx.y][threadIdx.x]
                                 + c1*in_s[threadIdx.z][threadIdx.y][threadIdx.x - 1]
                                 + c2*in_s[threadIdx.z][threadIdx.y][threadIdx.x + 1]
                                 + c3*in_s[threadIdx.z][threadIdx.y - 1][threadIdx.x]
                                 + c4*in_s[threadIdx.z][threadIdx.y + 1][threadIdx.x]
                                 + c5*in_s[threadIdx.z - 1][threadIdx.y][threadIdx.x]
                                 + c6*in_s[threadIdx.z + 1][threadIdx.y][threadIdx.x];
        } else {
            out[i*N*N + j*N + k] = in_s[threadIdx.z][threadIdx.y][threadIdx.x];   // boundary: unchanged
        }
    }
}
