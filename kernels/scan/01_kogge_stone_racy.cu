// 11.2 Kogge-Stone scan, in place, ONE barrier per step: a read-after-write race (PMPP 4th ed.)
// One block scans one section of SECTION_SIZE = blockDim.x elements, one thread per element, in
// shared memory XY. After the step with stride s, XY[i] holds the sum of up to 2s inputs ending at
// i; the step adds XY[i - s] into XY[i]. log2(SECTION_SIZE) steps in all.
// THE BUG: in a step, thread i READS XY[i - s] while thread i - s WRITES XY[i - s] (its own update)
// in the same step. Nothing orders the two, so thread i may add the old value (right) or the
// already updated one (wrong: inputs counted twice). On a GPU the answer depends on which warps
// run first; on the CPU engine, whose threads run one after another between barriers, it is wrong
// for every n > 2; pmpp.load(..., check=True) reports it as pmpp.RaceError. 02_kogge_stone fixes it.
// A section is at most 1024 elements (the most threads a block can have); 11.6 (06_hierarchical)
// scans longer inputs. Exclusive scans load the input shifted right by one (see loadInput).
// Expect: not to be trusted.
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
        if (threadIdx.x >= stride) {
            XY[threadIdx.x] += XY[threadIdx.x - stride];   // races with thread (threadIdx.x - stride)
        }
    }
    __syncthreads();
    if (i < n) {
        Y[i] = XY[threadIdx.x];
    }
}
