// Implicit GEMM, step 3: warp tiling (the warp level of CUTLASS's "Efficient GEMM in CUDA")
// Changed from 02_shared_tiles: the same tiles and loads, but which output a thread computes is
// chosen per warp. In 02 a warp (32 consecutive threads of a 16 x 16 block) computes 2 rows x 16
// columns of the output tile: per multiply-add step it reads 2 filter values and 16 im2col values
// from shared memory (2 + 16 = 18 distinct words). Here a warp computes a WARP_ROWS x WARP_COLS
// = 4 x 8 patch: 4 + 8 = 12 distinct words for the same 32 multiply-adds. A warp's shared-memory
// traffic grows with rows + columns while its work grows with rows x columns, so the squarer the
// warp's patch, the more work per word loaded. The block is now 1D: loading keeps 02's mapping
// (thread -> (tid / TILE, tid % TILE)), computing uses (warp, lane) -> patch.
// Expect: little change by itself - every one of these reads is already a single shared-memory
// wavefront (broadcasts) - but the warp patch is the layout that the next step, where each thread
// computes several outputs, builds on (it is what CUTLASS calls the warp tile).
#ifndef TILE
#define TILE 16         // the block computes a TILE x TILE output tile with TILE * TILE threads
#endif
#define WARP_ROWS 4     // a warp computes WARP_ROWS filters x WARP_COLS pixels
#define WARP_COLS 8

extern "C" __global__ void ImplicitGemmWarpTileKernel(const float* input, const float* filter, float* output,
                                                      int N, int C, int H, int W, int K, int R, int S,
                                                      int stride, int pad, int Oh, int Ow) {
    static_assert(WARP_ROWS * WARP_COLS == 32, "a warp has 32 threads");
    static_assert(TILE % WARP_ROWS == 0 && TILE % WARP_COLS == 0 && TILE * TILE <= 1024,
                  "TILE x TILE must split into whole 4 x 8 warp patches, at most 1024 threads");
    // BEGIN SOLUTION implicit_gemm/02_shared_tiles
    __shared__ float filter_s[TILE][TILE];   // filter_s[k][crs]
    __shared__ float input_s[TILE][TILE];    // input_s[crs][npq]
    const int RS = R * S, CRS = C * RS, PQ = Oh * Ow, NPQ = N * PQ;
    int tid = threadIdx.x;
    // Loading: as in 02.
    int load_row = tid / TILE, load_col = tid % TILE;
    int k_load = blockIdx.y * TILE + load_row;
    int npq_load = blockIdx.x * TILE + load_col;
    int n = npq_load / PQ, pq = npq_load % PQ;
    int h0 = (pq / Ow) * stride - pad;
    int w0 = (pq % Ow) * stride - pad;
    int image = n * C * H * W;
    // Computing: warp w covers rows (w / (TILE / WARP_COLS)) * WARP_ROWS + [0, WARP_ROWS) and
    // columns (w % (TILE / WARP_COLS)) * WARP_COLS + [0, WARP_COLS) of the output tile.
    int warp = tid / 32, lane = tid % 32;
    int row = (warp / (TILE / WARP_COLS)) * WARP_ROWS + lane / WARP_COLS;
    int col = (warp % (TILE / WARP_COLS)) * WARP_COLS + lane % WARP_COLS;
    float sum = 0.0f;
    for (int crs0 = 0; crs0 < CRS; crs0 += TILE) {
        int crs = crs0 + load_col;
        filter_s[load_row][load_col] = (k_load < K && crs < CRS) ? filter[k_load * CRS + crs] : 0.0f;
        crs = crs0 + load_row;
        int c = crs / RS, r = crs % RS / S, s = crs % S;
        int h = h0 + r, w = w0 + s;
        bool inside = npq_load < NPQ && crs < CRS && h >= 0 && h < H && w >= 0 && w < W;
        input_s[load_row][load_col] = inside ? input[image + (c * H + h) * W + w] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) {
            sum += filter_s[row][i] * input_s[i][col];
        }
        __syncthreads();
    }
    int k = blockIdx.y * TILE + row;
    int npq = blockIdx.x * TILE + col;
    if (k < K && npq < NPQ) {
        output[(npq / PQ * K + k) * PQ + npq % PQ] = sum;
    }
    // END SOLUTION implicit_gemm/02_shared_tiles
}
