// Harris SC07, kernel 2 (reduce1): interleaved addressing with a strided index
// Changed from 06_reduce0: no `%` and no divergent branch - thread tid works on index 2*s*tid,
// so the active threads are the first blockDim.x/(2s), packed into whole warps.
// New problem: shared-memory bank conflicts. Shared memory is 32 banks of 4-byte words, bank =
// word index mod 32, and a warp needs one pass per distinct word in its busiest bank. In step s
// lane tid reads words 2*s*tid and 2*s*tid + s: lanes 2s words apart, so a full warp uses only
// 32/(2s) banks, 2s lanes on each - 2-way at s = 1, 4-way at s = 2, 8-way at s = 4. From s = 8 on,
// fewer than 32 lanes are active (tid < blockDim.x/(2s) with blockDim.x = 256), so the degree is
// the active lanes on the busiest bank: 8-way at s = 8 (16 lanes on banks 0 and 16) and at s = 16
// (8 lanes, all on bank 0), then 4-, 2-, 1-way. With these 256-thread blocks it never reaches
// 32-way (that takes 1024 threads: 32 lanes on one bank at s = 16). Counted over the whole tree
// (explain.count_variant), the loads and the store of the loop body average about 4 passes each.
// Expect: faster than 06_reduce0 (Harris: 4.85 GB/s, 2.33x; recorded: 1.64x 06_reduce0 on the
// H100, 1.66x on the H200); the bank conflicts are what is left to fix.
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
