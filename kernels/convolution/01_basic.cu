// 7.2 Parallel convolution: a basic algorithm (PMPP 4th ed.)
// 2D correlation with zero ("ghost") padding: P[row][col] = sum over fRow, fCol in [0, 2r] of
// F[fRow][fCol] * N[row - r + fRow][col - r + fCol], a neighbour outside N counting as 0.
// One thread per output element; the filter F is an ordinary array in global memory and the
// radius r a run-time argument. Changed from the book's listing: a thread whose output lies past
// the right or bottom edge (the grid is rounded up to whole blocks) writes nothing.
// Expect: every multiply-add loads two floats from global memory (an input element and a filter
// element): 2 flops per 8 bytes, the book's 0.25 OP/B. Control divergence only at the edges.
extern "C" __global__ void convolution_2D_basic_kernel(const float* N, const float* F, float* P,
                                                       int r, int width, int height) {
    int outCol = blockIdx.x * blockDim.x + threadIdx.x;
    int outRow = blockIdx.y * blockDim.y + threadIdx.y;
    if (outCol >= width || outRow >= height) {
        return;
    }
    float Pvalue = 0.0f;
    for (int fRow = 0; fRow < 2 * r + 1; fRow++) {
        for (int fCol = 0; fCol < 2 * r + 1; fCol++) {
            int inRow = outRow - r + fRow;
            int inCol = outCol - r + fCol;
            if (inRow >= 0 && inRow < height && inCol >= 0 && inCol < width) {
                Pvalue += F[fRow * (2 * r + 1) + fCol] * N[inRow * width + inCol];
            }
        }
    }
    P[outRow * width + outCol] = Pvalue;
}
