// Harris SC07, kernel 6 (reduce5): completely unrolled, templated on the block size
// Changed from 11_reduce4: the block size is a compile-time constant, blockSize, so the tree loop
// unrolls completely: each `if (blockSize >= ...)` is decided by the compiler and disappears,
// leaving straight-line code - no loop counter, no loop branch. Launched by name expression,
// e.g. "reduce5<256>" with blockDim.x == blockSize. The last warp is unrolled the safe way
// (register + __syncwarp(), as in 11_reduce4), not the racy way of the original slides.
// Expect: a further ~1.4x in Harris's G80 measurements (43.9 GB/s); on a modern GPU, where the
// kernel is much closer to bandwidth-bound already, a smaller gain.
template <unsigned int blockSize>
__global__ void reduce5(const float* g_idata, float* g_odata, unsigned int n) {
    static_assert(blockSize >= 64 && blockSize <= 1024 && (blockSize & (blockSize - 1)) == 0,
                  "blockSize must be a power of two in [64, 1024]");
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockSize * 2) + threadIdx.x;
    float a = (i < n) ? g_idata[i] : 0.0f;
    float b = (i + blockSize < n) ? g_idata[i + blockSize] : 0.0f;
    sdata[tid] = a + b;
    __syncthreads();
    if (blockSize >= 1024) { if (tid < 512) { sdata[tid] += sdata[tid + 512]; } __syncthreads(); }
    if (blockSize >= 512)  { if (tid < 256) { sdata[tid] += sdata[tid + 256]; } __syncthreads(); }
    if (blockSize >= 256)  { if (tid < 128) { sdata[tid] += sdata[tid + 128]; } __syncthreads(); }
    if (blockSize >= 128)  { if (tid < 64)  { sdata[tid] += sdata[tid + 64];  } __syncthreads(); }
    if (tid < 32) {
        float sum = sdata[tid] + sdata[tid + 32];
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
