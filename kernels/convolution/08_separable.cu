// Beyond the book: a separable filter as two 1-D passes, fused in registers
// Only for a separable filter, F[fRow][fCol] = F_y[fRow] * F_x[fCol] (e.g. a Gaussian or a box
// blur; the problem gives F_y and F_x, both in constant memory).
// Changed from 07_vectorized: only the arithmetic. For each input row of its window a thread
// first filters horizontally - h[c] = sum over fCol of F_x[fCol] * N[row][col + c - r + fCol],
// 2r+1 multiply-adds per column - then adds F_y[fRow] * h[c] into each output row that uses this
// input row - one multiply-add per (output row, column). The horizontal pass of a row is done
// once and used by up to 2r+1 output rows, so no intermediate image goes through memory.
// Expect: multiply-adds per output fall from (2r+1)^2 = 25 to (2r+1)(1 + 2r/COARSE_FACTOR) + (2r+1)
// = 12.5 for r = 2 (the horizontal pass is repeated on the 2r halo rows of each thread's
// window). Same bytes as 07: if 07 already runs at the DRAM roof, this cannot be much faster at
// 5 x 5; its gain grows with the filter: 81 multiply-adds per output against 27 for 9 x 9.
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
#define COARSE_FACTOR 8     // output rows per thread (each 4 columns wide)
#endif
#define FILTER_DIM (2 * FILTER_RADIUS + 1)
#define HALO4 ((FILTER_RADIUS + 3) / 4 * 4)          // halo columns, rounded up to whole float4s
#define OUT_TILE_W (4 * BLOCK_DIM_X)
#define OUT_TILE_H (BLOCK_DIM_Y * COARSE_FACTOR)
#define IN_TILE_W4 (BLOCK_DIM_X + 2 * HALO4 / 4)    // float4s per input tile row
#define IN_TILE_H (OUT_TILE_H + 2 * FILTER_RADIUS)
#define WINDOW4 (1 + 2 * HALO4 / 4)                 // float4s of one input row a thread needs
#define LOADS_PER_THREAD ((IN_TILE_H * IN_TILE_W4 + BLOCK_DIM_X * BLOCK_DIM_Y - 1) / (BLOCK_DIM_X * BLOCK_DIM_Y))
__constant__ float F_y[FILTER_DIM];     // the filter's column factor, indexed by fRow
__constant__ float F_x[FILTER_DIM];     // the filter's row factor, indexed by fCol

// N[row][col .. col + 3] (col a multiple of 4), 0 for each element outside N (a ghost cell);
// one 16-byte load if VECTOR (the caller has checked alignment), else four 4-byte loads.
template <bool VECTOR>
__device__ float4 loadFloat4(const float* __restrict__ N, int row, int col, int width, int height) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row < 0 || row >= height) {
        return v;
    }
    const float* rowStart = N + (size_t)row * width;
    if (VECTOR) {
        if (col >= 0 && col < width) {     // width % 4 == 0: the float4 is wholly inside or outside
            v = *reinterpret_cast<const float4*>(rowStart + col);
        }
        return v;
    }
    if (col >= 0 && col < width) v.x = rowStart[col];
    if (col + 1 >= 0 && col + 1 < width) v.y = rowStart[col + 1];
    if (col + 2 >= 0 && col + 2 < width) v.z = rowStart[col + 2];
    if (col + 3 >= 0 && col + 3 < width) v.w = rowStart[col + 3];
    return v;
}

// The block loads the input tile into N_s, each thread LOADS_PER_THREAD float4s, all of its loads
// issued before the first is stored, so that they are in flight together.
template <bool VECTOR>
__device__ void loadTile(float4 (*N_s)[IN_TILE_W4], const float* __restrict__ N, int tileRow0,
                         int tileCol0, int width, int height) {
    int t = threadIdx.y * BLOCK_DIM_X + threadIdx.x;
    float4 v[LOADS_PER_THREAD];
#pragma unroll
    for (int u = 0; u < LOADS_PER_THREAD; u++) {
        int i = t + u * BLOCK_DIM_X * BLOCK_DIM_Y;
        v[u] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (i < IN_TILE_H * IN_TILE_W4) {
            v[u] = loadFloat4<VECTOR>(N, tileRow0 + i / IN_TILE_W4, tileCol0 + 4 * (i % IN_TILE_W4),
                                      width, height);
        }
    }
#pragma unroll
    for (int u = 0; u < LOADS_PER_THREAD; u++) {
        int i = t + u * BLOCK_DIM_X * BLOCK_DIM_Y;
        if (i < IN_TILE_H * IN_TILE_W4) {
            N_s[i / IN_TILE_W4][i % IN_TILE_W4] = v[u];
        }
    }
}

extern "C" __global__ void convolution_separable_kernel(const float* __restrict__ N,
                                                         float* __restrict__ P, int width, int height) {
    static_assert(BLOCK_DIM_X % 32 == 0, "BLOCK_DIM_X must be a multiple of 32 (no bank conflicts)");
    static_assert(BLOCK_DIM_X * BLOCK_DIM_Y <= 1024, "at most 1024 threads per block");
    __shared__ float4 N_s[IN_TILE_H][IN_TILE_W4];
    bool vectorLoads = width % 4 == 0 && (size_t)N % 16 == 0;
    bool vectorStores = width % 4 == 0 && (size_t)P % 16 == 0;
    int tileRow0 = blockIdx.y * OUT_TILE_H - FILTER_RADIUS;   // N's row of N_s[0][.]
    int tileCol0 = blockIdx.x * OUT_TILE_W - HALO4;           // N's column of N_s[.][0].x

    if (vectorLoads) {                  // the same branch for every block of the grid
        loadTile<true>(N_s, N, tileRow0, tileCol0, width, height);
    } else {
        loadTile<false>(N_s, N, tileRow0, tileCol0, width, height);
    }
    __syncthreads();

    // This thread's outputs: columns outCol .. outCol + 3, rows firstRow .. firstRow +
    // COARSE_FACTOR - 1 of the output tile. in[m] below holds N's column outCol - HALO4 + m.
    int firstRow = threadIdx.y * COARSE_FACTOR;
    float Pvalue[COARSE_FACTOR][4];
#pragma unroll
    for (int k = 0; k < COARSE_FACTOR; k++) {
#pragma unroll
        for (int c = 0; c < 4; c++) {
            Pvalue[k][c] = 0.0f;
        }
    }
#pragma unroll
    for (int j = 0; j < COARSE_FACTOR + 2 * FILTER_RADIUS; j++) {
        float in[4 * WINDOW4];                      // one input row's window, in registers
#pragma unroll
        for (int w = 0; w < WINDOW4; w++) {
            float4 v = N_s[firstRow + j][threadIdx.x + w];
            in[4 * w] = v.x;
            in[4 * w + 1] = v.y;
            in[4 * w + 2] = v.z;
            in[4 * w + 3] = v.w;
        }
        float h[4];                                 // horizontal pass: row j filtered by F_x
#pragma unroll
        for (int c = 0; c < 4; c++) {
            h[c] = 0.0f;
#pragma unroll
            for (int fCol = 0; fCol < FILTER_DIM; fCol++) {
                h[c] += F_x[fCol] * in[c + fCol + HALO4 - FILTER_RADIUS];
            }
        }
#pragma unroll
        for (int k = 0; k < COARSE_FACTOR; k++) {   // vertical pass: into every output row using row j
            int fRow = j - k;
            if (fRow >= 0 && fRow < FILTER_DIM) {
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    Pvalue[k][c] += F_y[fRow] * h[c];
                }
            }
        }
    }
    int outCol = blockIdx.x * OUT_TILE_W + 4 * threadIdx.x;
#pragma unroll
    for (int k = 0; k < COARSE_FACTOR; k++) {
        int outRow = blockIdx.y * OUT_TILE_H + firstRow + k;
        if (outRow >= height) {
            break;
        }
        float* rowStart = P + (size_t)outRow * width;
        if (vectorStores && outCol + 3 < width) {
            *reinterpret_cast<float4*>(rowStart + outCol) =
                make_float4(Pvalue[k][0], Pvalue[k][1], Pvalue[k][2], Pvalue[k][3]);
        } else {
#pragma unroll
            for (int c = 0; c < 4; c++) {
                if (outCol + c < width) {
                    rowStart[outCol + c] = Pvalue[k][c];
                }
            }
        }
    }
}
