// Harris SC07, kernel 4 (reduce3): first add during global load
// Changed from 08_reduce2: each block covers 2*blockDim.x elements, and each thread adds two of
// them (i and i + blockDim.x) while loading, so no thread is idle in the first step and half as
// many blocks are launched. (PMPP's 03_shared_memory is this kernel.)
// Expect: ~1.8x faster than 08_reduce2 (Harris: 17.4 GB/s). Now the kernel is limited by
// instruction overhead - address arithmetic, loop control, barriers - not by bandwidth.
extern "C" __global__ void reduce3(const float* g_idata, float* g_odata, unsigned int n) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
    float a = (i < n) ? g_idata[i] : 0.0f;
    float b = (i + blockDim.x < n) ? g_idata[i + blockDim.x] : 0.0f;
    sdata[tid] = a + b;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) {
        g_odata[blockIdx.x] = sdata[0];
    }
}
