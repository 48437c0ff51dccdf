// Beyond the book: vectorized (float4) loads and stores, four output columns per thread
// Changed from 06_register_tiled: each thread computes a 4-wide x COARSE_FACTOR-tall patch of
// outputs, so the block's output tile is (4 * BLOCK_DIM_X) x (BLOCK_DIM_Y * COARSE_FACTOR),
// 128 x 64 by default. Everything moves in float4s, one 16-byte instruction for four floats:
// * the input tile is loaded as float4s (LDG.E.128); its halo is widened from r to HALO4 = r
//   rounded up to a multiple of 4 columns on each side, so that every float4 of the tile starts
//   at a column divisible by 4 - 16-byte aligned when the width is a multiple of 4;
// * a thread reads each input row of its window from N_s as WINDOW4 float4s (LDS.128; a warp reads
//   32 consecutive float4s, which takes the minimum four shared-memory wavefronts, no conflicts);
// * the four results of each output row leave as one float4 store.
// float4 global accesses need 16-byte-aligned addresses: when the width is not a multiple of 4,
// or N or P does not start on a 16-byte boundary, the kernel falls back to scalar accesses (the
// branch is the same for the whole grid). A float4 that is partly or wholly outside N is loaded
// element by element, ghost cells as 0.
// Expect: for r = 2, per 32 outputs a thread issues 12 x 3 shared loads (LDS.64, LDS.128, LDS.64:
// the 8 floats a row contributes; 06: 12 x 5 LDS per 8 outputs) and 8 STG.128; instructions per
// output fall ~3x; with ~37 KB of loads in flight per block the kernel should run near the DRAM
// roof: 8 bytes per output (read N, write P).
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
__constant__ float F[FILTER_DIM][FILTER_DIM];

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

extern "C" __global__ void convolution_vectorized_kernel(const float* __restrict__ N,
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
#pragma unroll
        for (int k = 0; k < COARSE_FACTOR; k++) {   // every output row that uses input row j
            int fRow = j - k;
            if (fRow >= 0 && fRow < FILTER_DIM) {
#pragma unroll
                for (int c = 0; c < 4; c++) {
#pragma unroll
                    for (int fCol = 0; fCol < FILTER_DIM; fCol++) {
                        Pvalue[k][c] += F[fRow][fCol] * in[c + fCol + HALO4 - FILTER_RADIUS];
                    }
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
