// Harris SC07, kernel 3 (reduce2): sequential addressing
// Changed from 07_reduce1: reverse the loop - the stride starts at blockDim.x/2 and halves, and
// thread tid adds sdata[tid + s] into sdata[tid]. A warp now reads 32 consecutive floats: one per
// bank, no conflicts. (This is the same access pattern as PMPP's 02_convergent, in shared memory.)
// Expect: faster than 07_reduce1 (Harris: 9.74 GB/s, 2x; recorded: 1.3x 07_reduce1 on the H100
// and the H200). Half the threads still idle from the very first step - the next file puts them
// to work during the load.
extern "C" __global__ void reduce2(const float* g_idata, float* g_odata, unsigned int n) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? g_idata[i] : 0.0f;
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
