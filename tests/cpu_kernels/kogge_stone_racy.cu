// Kogge-Stone inclusive scan WITHOUT the temporary (PMPP 11.2 warns against this): a thread reads
// XY[threadIdx.x - stride] while the thread below it may already have updated that element.
#define SECTION_SIZE 64
extern "C" __global__ void KoggeStone(const float* X, float* Y, unsigned N) {
    __shared__ float XY[SECTION_SIZE];
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    XY[threadIdx.x] = i < N ? X[i] : 0.0f;
    for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
        __syncthreads();
        if (threadIdx.x >= stride) {
            float other = XY[threadIdx.x - stride];
            XY[threadIdx.x] += other;
        }
    }
    if (i < N) Y[i] = XY[threadIdx.x];
}
