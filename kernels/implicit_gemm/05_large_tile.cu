// Implicit GEMM, step 5: larger tiles - 128 x 128 per block, 8 x 8 per thread (the 128 x 128 x 8
// threadblock tile of CUTLASS's default SIMT GEMM configuration, default_gemm_configuration.h)
// Changed from 04_thread_tile: the block tile doubles in both directions, TILE_M x TILE_N =
// 128 x 128 with TILE_K = 8 reduction indices per step, and each of the 256 threads computes
// 8 x 8 outputs: per kk it loads 8 filter and 8 im2col values (four float4s) and adds their outer
// product, 64 multiply-adds for 4 shared-memory load instructions. A thread's rows are two groups
// of 4, ty * 4 and 64 + ty * 4 (columns likewise): with warps of 4 x 8 threads every float4 load
// of a warp reads 4 (or 8) consecutive float4s, one shared-memory wavefront, no bank conflicts.
// Loading per step: the filter tile as 4 scalar loads per thread (8 consecutive crs of a row per
// 8 threads), stored transposed with a pad of 4 floats so the stores hit 32 banks; the im2col tile
// as 4 loads per thread - one row crs per warp, 4 pixels 32 apart, whose (n, h, w) origins are
// worked out once before the loop - with one crs -> (c, r, s) decomposition per step.
// Expect: 32 OP/B of global traffic (4 in 02) and 16 multiply-adds per shared-memory load
// instruction (4 in 04); about 2x faster than 04, FP32 units busy most of the time.
#define TILE_M 128      // filters per block (GEMM rows)
#define TILE_N 128      // output pixels per block (GEMM columns)
#define TILE_K 8        // reduction indices (c, r, s) per step
#define THREADS 256     // 16 x 16 threads, each computing 8 x 8 outputs
#define A_PAD 4         // filter_s row pad: the transposing stores hit 32 different banks

extern "C" __global__ void __launch_bounds__(THREADS, 2)
ImplicitGemmLargeTileKernel(const float* __restrict__ input, const float* __restrict__ filter,
                            float* __restrict__ output, int N, int C, int H, int W, int K, int R, int S,
                            int stride, int pad, int Oh, int Ow) {
    static_assert(TILE_M * TILE_K == 4 * THREADS && TILE_K * TILE_N == 4 * THREADS && TILE_K == THREADS / 32,
                  "4 loads of each tile per thread, one im2col row per warp");
    __shared__ __align__(16) float filter_s[TILE_K][TILE_M + A_PAD];   // filter_s[crs][k]
    __shared__ __align__(16) float input_s[TILE_K][TILE_N];            // input_s[crs][npq]
    const int RS = R * S, CRS = C * RS, HW = H * W, PQ = Oh * Ow, NPQ = N * PQ;
    const int k0 = blockIdx.y * TILE_M, npq0 = blockIdx.x * TILE_N;
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;

    // Loading the filter tile: filter[k0 + a_k + 32 i][crs0 + a_crs], i < 4.
    const int a_k = tid / TILE_K, a_crs = tid % TILE_K;
    // Loading the im2col tile: row crs0 + warp, pixels npq0 + lane + 32 j, j < 4. A pixel's
    // window has its top-left corner at input row h0, column w0; base = input index of
    // (n, 0, h0, w0). Worked out once, here; a pixel past the end gets h0 = H, so that all of its
    // window falls outside and loads 0.
    int base[4], h0[4], w0[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        int npq = npq0 + lane + 32 * j, pq = npq % PQ;
        h0[j] = npq < NPQ ? (pq / Ow) * stride - pad : H;
        w0[j] = (pq % Ow) * stride - pad;
        base[j] = npq / PQ * C * HW + h0[j] * W + w0[j];
    }
    // Computing: rows ty * 4 + [0, 4) and 64 + ty * 4 + [0, 4), columns likewise with tx.
    const int ty = (warp / 2) * 4 + lane / 8;
    const int tx = (warp % 2) * 8 + lane % 8;
    float acc[8][8] = {};

    for (int crs0 = 0; crs0 < CRS; crs0 += TILE_K) {
        int crs = crs0 + a_crs;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            int k = k0 + a_k + 32 * i;
            filter_s[a_crs][a_k + 32 * i] = (k < K && crs < CRS) ? filter[k * CRS + crs] : 0.0f;
        }
        crs = crs0 + warp;
        int c = crs / RS, r = crs % RS / S, s = crs % S;
        int offset = c * HW + r * W + s;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int h = h0[j] + r, w = w0[j] + s;
            bool inside = crs < CRS && (unsigned)h < (unsigned)H && (unsigned)w < (unsigned)W;
            input_s[warp][lane + 32 * j] = inside ? input[base[j] + offset] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE_K; ++kk) {
            float a[8], b[8];
            *reinterpret_cast<float4*>(&a[0]) = *reinterpret_cast<const float4*>(&filter_s[kk][ty * 4]);
            *reinterpret_cast<float4*>(&a[4]) = *reinterpret_cast<const float4*>(&filter_s[kk][64 + ty * 4]);
            *reinterpret_cast<float4*>(&b[0]) = *reinterpret_cast<const float4*>(&input_s[kk][tx * 4]);
            *reinterpret_cast<float4*>(&b[4]) = *reinterpret_cast<const float4*>(&input_s[kk][64 + tx * 4]);
#pragma unroll
            for (int i = 0; i < 8; ++i) {
#pragma unroll
                for (int j = 0; j < 8; ++j) {
                    acc[i][j] += a[i] * b[j];
                }
            }
        }
        __syncthreads();
    }

    // Epilogue: the thread's 64 results to output[n][k][p][q], those inside K and N * Oh * Ow.
    // (One float4 store per 4 pixels would need each 4 accumulators in an aligned register quad,
    // which costs the main loop registers: scalar stores, which L2 merges into full sectors.)
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        int npq = npq0 + (j / 4) * 64 + tx * 4 + j % 4;
        if (npq < NPQ) {
            int out = (npq / PQ * K + k0 + ty * 4) * PQ + npq % PQ;    // output[n][k0 + ty * 4][p][q]
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                int row = (i / 4) * 64 + i % 4;                        // k - (k0 + ty * 4)
                if (k0 + ty * 4 + row < K) {
                    output[out + row * PQ] = acc[i][j];
                }
            }
        }
    }
}
