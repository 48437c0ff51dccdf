// Harris, "Optimizing Parallel Reduction in CUDA" (SC07), kernel 1 (reduce0): interleaved addressing
// A second telling of the same story, in Harris's vocabulary (g_idata, g_odata, sdata, tid). Back
// to one element per thread: each thread loads one element into shared memory (sdata, sized at
// launch: blockDim.x floats of dynamic shared memory), then in step s the threads whose tid is a
// multiple of 2s add sdata[tid + s]. Block b writes its sum to g_odata[b]; Python relaunches on
// the partials. Out-of-range elements load as 0.
// Expect: the slowest of Harris's steps (like 01_simple, but in shared memory): highly divergent
// warps, and `%` is slow. Harris measured 2.08 GB/s on a G80 (8.05 ms for 4M ints).
extern "C" __global__ void reduce0(const float* g_idata, float* g_odata, unsigned int n) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    sdata[tid] = (i < n) ? g_idata[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = 1; s < blockDim.x; s *= 2) {
        if (tid % (2 * s) == 0) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) {
        g_odata[blockIdx.x] = sdata[0];
    }
}
