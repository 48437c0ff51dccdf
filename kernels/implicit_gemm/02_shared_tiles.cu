// Implicit GEMM, step 2: shared-memory tiles (PMPP 5.4's tiled matrix multiplication applied to
// convolution; the formulation of CUTLASS's documentation, "Implicit GEMM Convolution")
// Changed from 01_naive: the convolution is read as a matrix product
//     output[k][npq] = sum over crs of filter[k][crs] * im2col[crs][npq]
// with GEMM sizes M = K (filters), N = N*Oh*Ow (output pixels) and K = C*R*S (the reduction),
// where the filter KCRS is already the M x CRS matrix and im2col[crs][npq] - input element
// (n, c, p*stride - pad + r, q*stride - pad + s), or 0 in the padding - is never stored: each
// block gathers the TILE x TILE piece of it that it needs ("implicit" GEMM). A TILE x TILE block
// computes a TILE x TILE tile of the output; per step its threads load one TILE x TILE tile of
// filter and one of im2col into shared memory, one element each, then every thread does TILE
// multiply-adds from shared memory. The reduction index is decomposed as crs -> (c, r, s).
// Expect: each global load now serves TILE multiply-adds: global traffic 1/TILE of 01's
// (TILE = 16: 4 OP/B instead of 0.25) - faster, now bound by shared-memory loads (two per
// multiply-add) and the barriers. Recorded: 2.0x 01_naive on the H100 and the H200.
#ifndef TILE
#define TILE 16         // the block is TILE x TILE threads and computes a TILE x TILE output tile
#endif

extern "C" __global__ void ImplicitGemmSharedTilesKernel(const float* input, const float* filter, float* output,
                                                         int N, int C, int H, int W, int K, int R, int S,
                                                         int stride, int pad, int Oh, int Ow) {
    // BEGIN SOLUTION
    static_assert(TILE * TILE <= 1024, "a block has at most 1024 threads");
    __shared__ float filter_s[TILE][TILE];   // filter_s[k][crs]
    __shared__ float input_s[TILE][TILE];    // input_s[crs][npq]: a tile of the im2col matrix
    const int RS = R * S, CRS = C * RS, PQ = Oh * Ow, NPQ = N * PQ;
    int tx = threadIdx.x, ty = threadIdx.y;
    int k = blockIdx.y * TILE + ty;          // this thread's filter (GEMM row)
    int npq = blockIdx.x * TILE + tx;        // this thread's output pixel (GEMM column)
    int n = npq / PQ, pq = npq % PQ;
    int h0 = (pq / Ow) * stride - pad;       // top-left corner of the pixel's input window
    int w0 = (pq % Ow) * stride - pad;
    int image = n * C * H * W;               // where image n starts in the input
    float sum = 0.0f;
    for (int crs0 = 0; crs0 < CRS; crs0 += TILE) {
        // Filter tile: row k, column crs0 + tx (consecutive threads, consecutive addresses).
        int crs = crs0 + tx;
        filter_s[ty][tx] = (k < K && crs < CRS) ? filter[k * CRS + crs] : 0.0f;
        // im2col tile: row crs0 + ty, column npq, gathered from the input.
        crs = crs0 + ty;
        int c = crs / RS, r = crs % RS / S, s = crs % S;
        int h = h0 + r, w = w0 + s;
        bool inside = npq < NPQ && crs < CRS && h >= 0 && h < H && w >= 0 && w < W;
        input_s[ty][tx] = inside ? input[image + (c * H + h) * W + w] : 0.0f;
        __syncthreads();
        for (int i = 0; i < TILE; ++i) {
            sum += filter_s[ty][i] * input_s[i][tx];
        }
        __syncthreads();
    }
    if (k < K && npq < NPQ) {
        output[(n * K + k) * PQ + pq] = sum;
    }
    // END SOLUTION
}
