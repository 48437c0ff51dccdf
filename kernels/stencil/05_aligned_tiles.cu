// Beyond the book: output tiles aligned to 128-byte rows, every thread computes
// Changed from 04_register_tiling: the block is BLOCK_X x BLOCK_Y threads and its output tile is
// exactly BLOCK_X x BLOCK_Y points starting at x = a multiple of BLOCK_X (32 floats: 128 bytes):
// every thread computes, and each warp's load or store of a row is one whole, aligned 128-byte
// line (04's tiles start one float before a multiple of 30, so its warps touch 2 lines per row
// and 2 of its 32 threads per row only load). The halo cells are loaded by the threads on the
// tile's edges, one extra load each, into the border of inCurr_s. A block walks Z_TILE planes
// (chosen apart from the tile's width), the previous and next planes in registers as in 04.
// Book's model (loads only): a 32 x 8 x 32 tile loads 1.38 inputs per output: 2.36 OP/B.
// Expect: fewer wasted threads and sectors than 04; still scalar loads that each wait a full
// memory latency inside every plane's step. Recorded: slower than 04 all the same, 0.90x
// 04_register_tiling on the H100, 0.86x on the H200.
#ifndef BLOCK_X
#define BLOCK_X 32   // threads in x (a row of the tile); launch with blockDim = (BLOCK_X, BLOCK_Y, 1)
#endif
#ifndef BLOCK_Y
#define BLOCK_Y 8    // threads (rows) in y
#endif
#ifndef Z_TILE
#define Z_TILE 32    // planes each block walks through
#endif

extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
AlignedTilesStencilKernel(const float* __restrict__ in, float* __restrict__ out, unsigned int N,
                          float c0, float c1, float c2, float c3, float c4, float c5, float c6) {
    __shared__ float inCurr_s[BLOCK_Y + 2][BLOCK_X + 2];   // the plane, with a one-point halo
    unsigned int tx = threadIdx.x, ty = threadIdx.y;
    unsigned int k = blockIdx.x * BLOCK_X + tx;
    unsigned int j = blockIdx.y * BLOCK_Y + ty;
    unsigned int iStart = blockIdx.z * Z_TILE;
    unsigned int iEnd = iStart + Z_TILE < N ? iStart + Z_TILE : N;
    unsigned int plane = N * N;
    unsigned int p = j * N + k;                  // this thread's point within a plane
    bool inPlane = j < N && k < N;
    bool interiorJK = j >= 1 && j < N - 1 && k >= 1 && k < N - 1;
    // Halo duties of the threads on the tile's edges (a missing neighbour is only ever needed by
    // a boundary point, which does not use it: 0 is stored instead).
    bool left = tx == 0 && j < N && k >= 1;
    bool right = tx == BLOCK_X - 1 && j < N && k + 1 < N;
    bool top = ty == 0 && k < N && j >= 1;
    bool bottom = ty == BLOCK_Y - 1 && k < N && j + 1 < N;

    float inPrev = 0.0f, inCurr = 0.0f, inNext = 0.0f;
    if (inPlane) {
        if (iStart >= 1) {
            inPrev = in[(iStart - 1) * plane + p];
        }
        inCurr = in[iStart * plane + p];
    }
    for (unsigned int i = iStart; i < iEnd; ++i) {
        if (inPlane && i + 1 < N) {
            inNext = in[(i + 1) * plane + p];
        }
        const float* in_i = in + i * plane;
        inCurr_s[ty + 1][tx + 1] = inCurr;
        // BEGIN SOLUTION
        if (tx == 0) {
            inCurr_s[ty + 1][0] = left ? in_i[p - 1] : 0.0f;
        }
        if (tx == BLOCK_X - 1) {
            inCurr_s[ty + 1][BLOCK_X + 1] = right ? in_i[p + 1] : 0.0f;
        }
        if (ty == 0) {
            inCurr_s[0][tx + 1] = top ? in_i[p - N] : 0.0f;
        }
        if (ty == BLOCK_Y - 1) {
            inCurr_s[BLOCK_Y + 1][tx + 1] = bottom ? in_i[p + N] : 0.0f;
        }
        // END SOLUTION
        __syncthreads();   // (A) the plane and its halo are in inCurr_s
        if (inPlane) {
            float value = inCurr;                                     // boundary: unchanged
            if (interiorJK && i >= 1 && i < N - 1) {
                value = c0*inCurr
                      + c1*inCurr_s[ty + 1][tx]
                      + c2*inCurr_s[ty + 1][tx + 2]
                      + c3*inCurr_s[ty][tx + 1]
                      + c4*inCurr_s[ty + 2][tx + 1]
                      + c5*inPrev
                      + c6*inNext;
            }
            out[i * plane + p] = value;
        }
        __syncthreads();   // (B) everyone has read inCurr_s before it is overwritten
        inPrev = inCurr;
        inCurr = inNext;
    }
}
