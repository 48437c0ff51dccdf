// 11.2 Kogge-Stone scan with double buffering (PMPP 4th ed., end of 11.2)
// Changed from 02_kogge_stone: two shared arrays instead of a temporary. Each step reads one
// buffer and writes the other, then the two swap roles, so a step never writes what the same
// step reads: one __syncthreads() per step instead of two. Threads below the stride copy their
// element across (the other buffer must hold the whole section after every step).
// Expect: the same additions as 02, half the barriers, twice the shared memory. Barriers are most
// of what a step costs here, so: faster than 02 for the same section.
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
__global__ void KoggeStoneDoubleBufferScan(const T* X, T* Y, unsigned int n, int exclusive) {
    __shared__ T buffer[2][BLOCK_DIM];
    T* in = buffer[0];
    T* out = buffer[1];
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    in[threadIdx.x] = loadInput(X, i, n, exclusive);
    for (unsigned int stride = 1; stride < blockDim.x; stride *= 2) {
        __syncthreads();   // the previous step's writes to `in` are done
        if (threadIdx.x >= stride) {
            out[threadIdx.x] = in[threadIdx.x] + in[threadIdx.x - stride];
        } else {
            out[threadIdx.x] = in[threadIdx.x];
        }
        T* swap = in;
        in = out;
        out = swap;
    }
    if (i < n) {
        Y[i] = in[threadIdx.x];        // this thread's own element: no barrier needed to read it
    }
}
