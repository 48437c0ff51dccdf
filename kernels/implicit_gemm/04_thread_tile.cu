// Implicit GEMM, step 4: thread tiling with outer products (CUTLASS's thread-level GEMM)
// Changed from 03_warp_tile: each thread computes a 4 x 4 patch of outputs (register blocking,
// PMPP's thread coarsening), so a 256-thread block covers a TILE_M x TILE_N = 64 x 64 output tile.
// Per reduction step kk a thread loads 4 filter values (a column of its patch's rows) and 4 im2col
// values (a row of its columns) from shared memory and adds their outer product - 16 multiply-adds
// for 8 shared loads (02/03: 1 for 2), and as float4 loads, 16 for 2 load instructions. Warps keep
// 03's 4 x 8 layout, now of threads: a warp covers 16 filters x 32 pixels. Per step the block
// loads a 64 x TILE_K tile of filter and a TILE_K x 64 tile of im2col, one element per thread.
// The filter tile is stored transposed, filter_s[crs][k], so that a thread's 4 filters are one
// float4; the row pad of A_PAD floats spreads the transposing stores over all 32 banks.
// Expect: global traffic per multiply-add a quarter of 02's (64 x 64 tiles: 16 OP/B) and 8x fewer
// shared-memory loads: several times faster than 03.
#define TILE_M 64       // filters per block (GEMM rows)
#define TILE_N 64       // output pixels per block (GEMM columns)
#define TILE_K 4        // reduction indices (c, r, s) per step
#define THREADS 256     // 16 x 16 threads, each computing 4 x 4 outputs
#define A_PAD 8         // filter_s row pad: the transposing stores hit 32 different banks

extern "C" __global__ void __launch_bounds__(THREADS)
ImplicitGemmThreadTileKernel(const float* input, const float* filter, float* output,
                             int N, int C, int H, int W, int K, int R, int S,
                             int stride, int pad, int Oh, int Ow) {
    // BEGIN SOLUTION
    static_assert(TILE_M * TILE_K == THREADS && TILE_K * TILE_N == THREADS, "one load of each tile per thread");
    __shared__ __align__(16) float filter_s[TILE_K][TILE_M + A_PAD];   // filter_s[crs][k]
    __shared__ __align__(16) float input_s[TILE_K][TILE_N];            // input_s[crs][npq]
    const int RS = R * S, CRS = C * RS, PQ = Oh * Ow, NPQ = N * PQ;
    const int k0 = blockIdx.y * TILE_M, npq0 = blockIdx.x * TILE_N;
    int tid = threadIdx.x;
    // Loading: filter[k0 + tid / TILE_K][crs0 + tid % TILE_K] and im2col[crs0 + tid / TILE_N][npq0 + tid % TILE_N].
    int a_k = tid / TILE_K, a_crs = tid % TILE_K;
    int b_crs = tid / TILE_N, b_npq = tid % TILE_N;
    int npq_load = npq0 + b_npq;
    int pq_load = npq_load % PQ;
    int h0 = (pq_load / Ow) * stride - pad;
    int w0 = (pq_load % Ow) * stride - pad;
    int image = npq_load / PQ * C * H * W;
    // Computing: rows ty * 4 + [0, 4) and columns tx * 4 + [0, 4) of the tile; warp = 4 x 8 threads.
    int warp = tid / 32, lane = tid % 32;
    int ty = (warp / 2) * 4 + lane / 8;
    int tx = (warp % 2) * 8 + lane % 8;
    float acc[4][4] = {};
    for (int crs0 = 0; crs0 < CRS; crs0 += TILE_K) {
        int k = k0 + a_k, crs = crs0 + a_crs;
        filter_s[a_crs][a_k] = (k < K && crs < CRS) ? filter[k * CRS + crs] : 0.0f;
        crs = crs0 + b_crs;
        int c = crs / RS, r = crs % RS / S, s = crs % S;
        int h = h0 + r, w = w0 + s;
        bool inside = npq_load < NPQ && crs < CRS && h >= 0 && h < H && w >= 0 && w < W;
        input_s[b_crs][b_npq] = inside ? input[image + (c * H + h) * W + w] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE_K; ++kk) {
            float4 a = *reinterpret_cast<const float4*>(&filter_s[kk][ty * 4]);
            float4 b = *reinterpret_cast<const float4*>(&input_s[kk][tx * 4]);
            float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
            for (int i = 0; i < 4; ++i) {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    acc[i][j] += av[i] * bv[j];       // the outer product a x b
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        int npq = npq0 + tx * 4 + j;
        if (npq >= NPQ) {
            break;
        }
        int out_pixel = npq / PQ * K * PQ + npq % PQ;  // output[n][0][p][q]
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            int k = k0 + ty * 4 + i;
            if (k < K) {
                output[out_pixel + k * PQ] = acc[i][j];
            }
        }
    }
    // END SOLUTION
}
