// Harris SC07, kernel 5 (reduce4), fixed for Volta and later: unroll the last warp, safely
// Changed from 10_reduce4_racy: each step of the last warp reads into a register, waits for the
// whole warp (__syncwarp()), then writes, and waits again. __syncwarp() is a barrier and a
// memory fence for the lanes of one warp, so every read of a step happens before any write of
// that step, and every write before the next step's reads - no `volatile` needed. This is the
// fix NVIDIA gives in "Using CUDA Warp-Level Primitives" (2018). The result is kept in a
// register by lane 0 and written from there.
// Expect: about the speed of 10_reduce4_racy (a __syncwarp is far cheaper than a __syncthreads),
// and a clean race check. 14_warp_shuffle does the same step with register shuffles instead.
// Needs blockDim.x a power of two >= 64.
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
        float sum = sdata[tid] + sdata[tid + 32];    // lane tid alone touches sdata[tid] here
        sdata[tid] = sum;                         __syncwarp();
        sum += sdata[tid + 16];                   __syncwarp();
        sdata[tid] = sum;                         __syncwarp();
        sum += sdata[tid + 8];                    __syncwarp();
        sdata[tid] = sum;                         __syncwarp();
        sum += sdata[tid + 4];                    __syncwarp();
        sdata[tid] = sum;                         __syncwarp();
        sum += sdata[tid + 2];                    __syncwarp();
        sdata[tid] = sum;                         __syncwarp();
        sum += sdata[tid + 1];
        if (tid == 0) {
            g_odata[blockIdx.x] = sum;
        }
    }
}
