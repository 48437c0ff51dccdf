// Harris SC07, kernel 7 (reduce6): multiple elements per thread
// Changed from 12_reduce5: a fixed, small grid (Python sizes it from the SM count, enough blocks
// to fill the GPU once) and a grid-stride loop: each thread adds up many pairs of elements
// (i, i + blockSize), then i += gridSize, in a register, before the unrolled tree runs once per
// block. This is PMPP's thread coarsening (05_coarsened) with the amount of work per thread
// decided by n and the grid rather than a constant. Out-of-range elements are skipped.
// Partials: one per block, then a second launch with one block finishes.
// Expect: the tree's cost is paid once per block instead of once per 2*blockSize elements, and
// many loads are in flight per thread: close to bandwidth-bound (Harris: 62.7 GB/s on a G80 with
// 86.4 GB/s peak, 30 times reduce0's; recorded: 0.90x copy on the H100, 0.84x on the H200).
template <unsigned int blockSize>
__global__ void reduce6(const float* g_idata, float* g_odata, unsigned int n) {
    static_assert(blockSize >= 64 && blockSize <= 1024 && (blockSize & (blockSize - 1)) == 0,
                  "blockSize must be a power of two in [64, 1024]");
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    unsigned int i = blockIdx.x * (blockSize * 2) + threadIdx.x;
    unsigned int gridSize = blockSize * 2 * gridDim.x;
    float sum = 0.0f;
    while (i < n) {
        sum += g_idata[i];
        if (i + blockSize < n) {
            sum += g_idata[i + blockSize];
        }
        i += gridSize;
    }
    sdata[tid] = sum;
    __syncthreads();
    if (blockSize >= 1024) { if (tid < 512) { sdata[tid] += sdata[tid + 512]; } __syncthreads(); }
    if (blockSize >= 512)  { if (tid < 256) { sdata[tid] += sdata[tid + 256]; } __syncthreads(); }
    if (blockSize >= 256)  { if (tid < 128) { sdata[tid] += sdata[tid + 128]; } __syncthreads(); }
    if (blockSize >= 128)  { if (tid < 64)  { sdata[tid] += sdata[tid + 64];  } __syncthreads(); }
    if (tid < 32) {
        sum = sdata[tid] + sdata[tid + 32];
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
