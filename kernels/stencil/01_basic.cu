// 8.2 Parallel stencil: a basic algorithm (PMPP 4th ed., Fig. 8.6)
// The seven-point stencil on an N x N x N grid, stored with x (k) fastest: in[i*N*N + j*N + k],
// i = z plane, j = y row, k = x column. One thread per grid point. An interior point gets
//     c0*center + c1*(x-1) + c2*(x+1) + c3*(y-1) + c4*(y+1) + c5*(z-1) + c6*(z+1);
// a boundary point (any index 0 or N-1) holds the boundary condition: it is copied unchanged,
// so the output is a complete grid, ready to be the next sweep's input.
// Each interior point loads its 7 inputs from global memory: 13 flops for 28 bytes, 0.46 OP/B
// (the book's figure; it counts loads only). Neighbouring threads load the same inputs again,
// so on a GPU the caches, not this kernel, decide how many of those bytes reach DRAM.
// Expect: far from the copy roof; the block shape matters (8x8x8: each warp reads 8-float
// pieces of 4 rows, a quarter of a 128-byte line each).
#ifndef BLOCK_X
#define BLOCK_X 8   // launch with blockDim = (BLOCK_X, BLOCK_Y, BLOCK_Z)
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 8
#endif
#ifndef BLOCK_Z
#define BLOCK_Z 8
#endif

extern "C" __global__ void BasicStencilKernel(const float* in, float* out, unsigned int N,
                                              float c0, float c1, float c2, float c3,
                                              float c4, float c5, float c6) {
    unsigned int i = blockIdx.z * blockDim.z + threadIdx.z;
    unsigned int j = blockIdx.y * blockDim.y + threadIdx.y;
    unsigned int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N && j < N && k < N) {
        if (i >= 1 && i < N - 1 && j >= 1 && j < N - 1 && k >= 1 && k < N - 1) {
            out[i*N*N + j*N + k] = c0*in[i*N*N + j*N + k]
                                 + c1*in[i*N*N + j*N + (k - 1)]
                                 + c2*in[i*N*N + j*N + (k + 1)]
                                 + c3*in[i*N*N + (j - 1)*N + k]
                                 + c4*in[i*N*N + (j + 1)*N + k]
                                 + c5*in[(i - 1)*N*N + j*N + k]
                                 + c6*in[(i + 1)*N*N + j*N + k];
        } else {
            out[i*N*N + j*N + k] = in[i*N*N + j*N + k];   // boundary: unchanged
        }
    }
}
