// Kogge-Stone inclusive scan (PMPP 11.2) with the temporary and a second barrier.
#define SECTION_SIZE 64
extern "C" __global__ void KoggeStone(const float* X, float* Y, unsigned N) {
    __shared__ float XY[SECTION_SIZE];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    XY[threadIdx.x] = i < N ? X[i] : 0.0f;
    for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
        __syncthreads();
        float temp;
        if (threadIdx.x >= stride) temp = XY[threadIdx.x] + XY[threadIdx.x - stride];
        __syncthreads();
        if (threadIdx.x >= stride) XY[threadIdx.x] = temp;
    }
    if (i < N) Y[i] = XY[threadIdx.x];
}
