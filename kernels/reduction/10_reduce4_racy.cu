// Harris SC07, kernel 5 (reduce4) AS PUBLISHED: unroll the last warp - and a data race.
// Changed from 09_reduce3: once s <= 32 only one warp is active, so the loop stops at s > 32 and
// warp 0 finishes with six unrolled steps, with no __syncthreads() and no `if (tid < s)`.
// Harris relied on the 32 threads of a warp executing in lockstep ("implicit warp synchrony"),
// with `volatile` so that every step really goes to shared memory.
// THIS IS WRONG on every GPU since Volta (sm_70): with independent thread scheduling the lanes of
// a warp may run apart, so lane 0 can read sdata[16] before or after lane 16 has written its own
// step into it. Nothing orders those accesses: a data race, and a wrong sum on some runs, some
// GPUs, some compilers. The CPU engine's race check (pmpp.load(..., check=True)) reports it as
// pmpp.RaceError; compute-sanitizer --tool racecheck finds it on a GPU. 11_reduce4 is the fix.
// Expect: fast (Harris: 31.3 GB/s, 1.8x; recorded: 1.3x 09_reduce3 on the H100 and the H200),
// and not to be trusted.
// Needs blockDim.x a power of two >= 64.
__device__ void warpReduce(volatile float* sdata, unsigned int tid) {
    sdata[tid] += sdata[tid + 32];
    sdata[tid] += sdata[tid + 16];
    sdata[tid] += sdata[tid + 8];
    sdata[tid] += sdata[tid + 4];
    sdata[tid] += sdata[tid + 2];
    sdata[tid] += sdata[tid + 1];
}

extern "C" __global__ void reduce4(const float* g_idata, float* g_odata, unsigned int n) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
    float a = (i < n) ? g_idata[i] : 0.0f;
    float b = (i + blockDim.x < n) ? g_idata[i + blockDim.x] : 0.0f;
    sdata[tid] = a + b;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 32; s >>= 1) {
        if (tid < s) {
            sdata[tid] += sdata[tid + s];
        }
        __syncthreads();
    }
    if (tid < 32) {
        warpReduce(sdata, tid);
    }
    if (tid == 0) {
        g_odata[blockIdx.x] = sdata[0];
    }
}
