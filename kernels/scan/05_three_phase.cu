// 11.5 Coarsened three-phase scan (PMPP 4th ed., Fig. 11.9)
// Changed from 04_brent_kung: thread coarsening. A block of BLOCK_DIM threads scans a section of
// SECTION_SIZE = BLOCK_DIM * COARSE_FACTOR elements; thread t owns the subsection of COARSE_FACTOR
// consecutive elements starting at t * COARSE_FACTOR.
//   Load: the section goes to shared memory with coalesced reads (consecutive threads, consecutive
//     addresses: "corner turning"), not each thread reading its own subsection.
//   Phase 1: each thread scans its subsection sequentially: COARSE_FACTOR - 1 additions, no barrier.
//   Phase 2: a Kogge-Stone scan (double-buffered, as 03) of the BLOCK_DIM subsection totals.
//   Phase 3: each thread adds the total of all earlier subsections to its own elements.
// The work-inefficient Kogge-Stone now runs on BLOCK_DIM values, not SECTION_SIZE: for N = T * C
// elements (T threads, C = COARSE_FACTOR), 2N - 2T + T log2 T - C + 1 additions - 2.9 per element
// at T = 512, C = 8 (Kogge-Stone on 4096 elements: 11), and one thread per C elements.
// Beyond the book: in phases 1 and 3 the threads of a warp read words COARSE_FACTOR apart, which
// puts 8 of them on one shared-memory bank at COARSE_FACTOR 8; PADDED(i) inserts one word after
// every 32, so a warp's 32 subsections start on 32 different banks.
// Expect: a section of 4096 elements in about as many steps as 02 takes for 1024 - the longest
// section of this chapter's single-block kernels. 11.6 (06_hierarchical) scans any length.
#ifndef BLOCK_DIM
#define BLOCK_DIM 512       // launch with blockDim.x == BLOCK_DIM
#endif
#ifndef COARSE_FACTOR
#define COARSE_FACTOR 8     // elements per thread
#endif
#define SECTION_SIZE (BLOCK_DIM * COARSE_FACTOR)
#define PADDED(i) ((i) + (i) / 32)   // shared-memory index of section element i: no bank conflicts

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
__global__ void ThreePhaseScan(const T* X, T* Y, unsigned int n, int exclusive) {
    __shared__ T XY[PADDED(SECTION_SIZE)];
    __shared__ T sums[2][BLOCK_DIM];
    unsigned int t = threadIdx.x;
    unsigned int base = blockIdx.x * SECTION_SIZE;
    for (unsigned int k = t; k < SECTION_SIZE; k += BLOCK_DIM) {        // coalesced load
        XY[PADDED(k)] = loadInput(X, base + k, n, exclusive);
    }
    __syncthreads();

    unsigned int first = t * COARSE_FACTOR;                             // phase 1
    for (unsigned int j = 1; j < COARSE_FACTOR; ++j) {
        XY[PADDED(first + j)] += XY[PADDED(first + j - 1)];
    }

    T* in = sums[0];                                                    // phase 2
    T* out = sums[1];
    in[t] = XY[PADDED(first + COARSE_FACTOR - 1)];
    for (unsigned int stride = 1; stride < BLOCK_DIM; stride *= 2) {
        __syncthreads();
        out[t] = (t >= stride) ? in[t] + in[t - stride] : in[t];
        T* swap = in;
        in = out;
        out = swap;
    }
    __syncthreads();

    if (t > 0) {                                                        // phase 3
        T before = in[t - 1];
        for (unsigned int j = 0; j < COARSE_FACTOR; ++j) {
            XY[PADDED(first + j)] += before;
        }
    }
    __syncthreads();

    for (unsigned int k = t; k < SECTION_SIZE; k += BLOCK_DIM) {        // coalesced store
        if (base + k < n) {
            Y[base + k] = XY[PADDED(k)];
        }
    }
}
