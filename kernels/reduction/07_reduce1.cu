// Harris SC07, kernel 2 (reduce1): interleaved addressing with a strided index
// Changed from 06_reduce0: no `%` and no divergent branch - thread tid works on index 2*s*tid,
// so the active threads are the first blockDim.x/(2s), packed into whole warps.
// New problem: shared-memory bank conflicts. In step s a warp touches sdata[2*s*tid]: for s = 16
// the 32 lanes hit addresses 32 floats apart, all in the same one of the 32 banks.
// Expect: about 2x faster than reduce0 (Harris: 4.85 GB/s, 2.33x); the bank conflicts are what
// is left to fix.
extern "C" __global__ void reduce1(const float* g_idata, float* g_odata, unsigned int n) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? g_idata[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        unsigned int index = 2 * s * tid;
        if (index < blockDim.x) {
            sdata[index] += sdata[index + s];
        }
        __syncthreads();
    }
    if (tid == 0) {
        g_odata[blockIdx.x] = sdata[0];
    }
}
