// Multi-channel convolution as implicit GEMM, step 1: naive, one output per thread
// (PMPP 7.2's basic kernel, grown to N, C and K)
// The problem: output[n][k][p][q] = sum over c < C, r < R, s < S of
//     input[n][c][p*stride - pad + r][q*stride - pad + s] * filter[k][c][r][s]
// (a cross-correlation, as in the book and in deep learning; input rows/columns outside the
// image count as 0), float32, input NCHW, filter KCRS, output NKPQ with P = Oh, Q = Ow.
// Each thread computes one output element; consecutive threads take consecutive q, so a warp's
// input loads and output stores fall on neighbouring addresses and its filter loads on one.
// Every multiply-add loads two floats from global memory: 8 bytes for 2 FLOP, 0.25 OP/B - the
// book's figure for its basic 2D kernel. L1 and L2 serve most of those loads (neighbouring
// threads read overlapping windows), so the time goes to load instructions, not DRAM.
// Expect: a few TFLOP/s on an H100, a small fraction of the FP32 roof.
#ifndef BLOCK_DIM
#define BLOCK_DIM 256   // threads per block (1D)
#endif

extern "C" __global__ void ImplicitGemmNaiveKernel(const float* input, const float* filter, float* output,
                                                   int N, int C, int H, int W, int K, int R, int S,
                                                   int stride, int pad, int Oh, int Ow) {
    int i = blockIdx.x * BLOCK_DIM + threadIdx.x;     // linear index of output[n][k][p][q]
    if (i >= N * K * Oh * Ow) {
        return;
    }
    int q = i % Ow;
    int p = (i / Ow) % Oh;
    int k = (i / (Ow * Oh)) % K;
    int n = i / (Ow * Oh * K);
    int h0 = p * stride - pad;                        // top-left corner of this output's window
    int w0 = q * stride - pad;
    float sum = 0.0f;
    for (int c = 0; c < C; ++c) {
        for (int r = 0; r < R; ++r) {
            int h = h0 + r;
            if (h < 0 || h >= H) {
                continue;                             // a ghost row: contributes 0
            }
            for (int s = 0; s < S; ++s) {
                int w = w0 + s;
                if (w >= 0 && w < W) {
                    sum += input[((n * C + c) * H + h) * W + w] * filter[((k * C + c) * R + r) * S + s];
                }
            }
        }
    }
    output[i] = sum;
}
