// The last warp done right (CUDA 9+): __syncwarp() between the read and the write of each step.
__device__ void warpReduce(float* sdata, unsigned tid) {
    float v = sdata[tid];
    for (unsigned offset = 32; offset > 0; offset /= 2) {
        v += sdata[tid + offset];
        __syncwarp();
        sdata[tid] = v;
        __syncwarp();
    }
}
extern "C" __global__ void reduce(const float* in, float* out) {
    __shared__ float sdata[128];
    unsigned tid = threadIdx.x;
    sdata[tid] = in[blockIdx.x * blockDim.x + tid];
    __syncthreads();
    if (tid < 64) sdata[tid] += sdata[tid + 64];
    __syncthreads();
    if (tid < 32) warpReduce(sdata, tid);
    if (tid == 0) out[blockIdx.x] = sdata[0];
}
