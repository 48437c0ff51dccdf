// 1-D convolution with the filter in constant memory (PMPP 7.4).
#ifndef FILTER_RADIUS
#define FILTER_RADIUS 3
#endif
__constant__ float F[2 * FILTER_RADIUS + 1];
__constant__ int offset_value;

extern "C" __global__ void conv1d(const float* in, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float sum = 0.0f;
    for (int k = -FILTER_RADIUS; k <= FILTER_RADIUS; ++k) {
        int j = i + k;
        if (j >= 0 && j < n) sum += F[k + FILTER_RADIUS] * in[j];
    }
    out[i] = sum + offset_value;
}
