// 11.4 Brent-Kung scan (PMPP 4th ed., Fig. 11.7): a reduction tree, then a distribution tree
// Changed from 03_kogge_stone_double_buffer: work efficiency. Each thread loads TWO elements, so a
// block of BLOCK_DIM threads scans SECTION_SIZE = 2 * BLOCK_DIM elements (up to 2048).
//   Up-sweep (reduction tree): with stride s = 1, 2, 4, ..., XY[(t+1)*2s - 1] += XY[(t+1)*2s - 1 - s];
//     afterwards every XY[2^k * j - 1] holds the sum of its 2^k-element block: N - 1 additions.
//   Down-sweep (distribution tree): with stride s = N/4, ..., 1, XY[(t+1)*2s - 1 + s] += XY[(t+1)*2s - 1]
//     pushes those partial sums to the positions still missing them: N - 1 - log2 N additions.
// 2N - 2 - log2 N additions in all: about 2N, against Kogge-Stone's N log2 N - (N - 1) - but
// 2 log2 N - 1 steps instead of log2 N, and fewer active threads in most of them.
// Expect: far fewer additions than 02/03; about twice the steps, so with a whole GPU for one
// section (enough hardware) no faster, and faster only where additions are what is scarce.
#ifndef BLOCK_DIM
#define BLOCK_DIM 512   // launch with blockDim.x == BLOCK_DIM, a power of two; SECTION_SIZE = 2 * BLOCK_DIM
                        // (512: the same 1024-element section as 02/03, with half the threads)
#endif
#define SECTION_SIZE (2 * BLOCK_DIM)

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
__global__ void BrentKungScan(const T* X, T* Y, unsigned int n, int exclusive) {
    __shared__ T XY[SECTION_SIZE];
    unsigned int i = 2 * blockIdx.x * blockDim.x + threadIdx.x;
    XY[threadIdx.x] = loadInput(X, i, n, exclusive);
    XY[threadIdx.x + blockDim.x] = loadInput(X, i + blockDim.x, n, exclusive);
    for (unsigned int stride = 1; stride <= blockDim.x; stride *= 2) {      // reduction tree
        __syncthreads();
        unsigned int index = (threadIdx.x + 1) * 2 * stride - 1;
        if (index < SECTION_SIZE) {
            XY[index] += XY[index - stride];
        }
    }
    for (unsigned int stride = SECTION_SIZE / 4; stride > 0; stride /= 2) {  // distribution tree
        __syncthreads();
        unsigned int index = (threadIdx.x + 1) * stride * 2 - 1;
        if (index + stride < SECTION_SIZE) {
            XY[index + stride] += XY[index];
        }
    }
    __syncthreads();
    if (i < n) {
        Y[i] = XY[threadIdx.x];
    }
    if (i + blockDim.x < n) {
        Y[i + blockDim.x] = XY[threadIdx.x + blockDim.x];
    }
}
