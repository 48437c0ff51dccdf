// 11.2 Kogge-Stone scan (PMPP 4th ed., Fig. 11.3): the race fixed with a temporary and a barrier
// Changed from 01_kogge_stone_racy: each step first reads both operands into a register (temp),
// waits at a second __syncthreads() until every thread of the block has read, and only then
// writes. No thread can now overwrite XY[i - s] before thread i has read it.
// Work: step s does (SECTION_SIZE - s) additions: N log2 N - (N - 1) in all for N elements, against
// N - 1 for a sequential scan (11.3) - 9x the additions at N = 1024 - but only log2 N steps deep.
// Expect: correct; two barriers per step, every thread busy (or idle in its warp) in every step.
#ifndef BLOCK_DIM
#define BLOCK_DIM 1024  // launch with blockDim.x == BLOCK_DIM: the section size, at most 1024
#endif

// Element i of the sequence this kernel scans: x[i] for an inclusive scan; x[i - 1] (0 at i = 0)
// for an exclusive scan, which is the inclusive scan of the input shifted right by one. 0 past
// the end, the identity of +, so padding changes no sum.
template <typename T>
__device__ T loadInput(const T* X, unsigned int i, unsigned int n, int exclusive) {
    if (i >= n || (exclusive && i == 0)) {
        return T(0);
    }
    return X[exclusive ? i - 1 : i];
}

template <typename T>
__global__ void KoggeStoneScan(const T* X, T* Y, unsigned int n, int exclusive) {
    __shared__ T XY[BLOCK_DIM];
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    XY[threadIdx.x] = loadInput(X, i, n, exclusive);
    for (unsigned int stride = 1; stride < blockDim.x; stride *= 2) {
        __syncthreads();
        T temp;
        if (threadIdx.x >= stride) {
            temp = XY[threadIdx.x] + XY[threadIdx.x - stride];
        }
        __syncthreads();   // every thread has read its operands before anyone writes
        if (threadIdx.x >= stride) {
            XY[threadIdx.x] = temp;
        }
    }
    __syncthreads();
    if (i < n) {
        Y[i] = XY[threadIdx.x];
    }
}
