// 11.6 Hierarchical scan for arbitrary-length inputs (PMPP 4th ed., Fig. 11.10)
// Changed from 05_three_phase: any n, not one section. Three kernels, launched by Python:
//   1. ScanSections: every block scans its own section as in 05 and writes the section's total
//      to S[blockIdx.x] (the last thread's phase-2 value).
//   2. the same kernel scans S (itself hierarchically if S is longer than a section);
//   3. AddSectionSums: block b > 0 adds S[b - 1], the total of all earlier sections, to its section.
// An exclusive scan loads the input shifted right by one in kernel 1 only: S and kernel 3 then
// work on that shifted sequence unchanged.
// Bytes: kernel 1 reads n and writes n elements, kernel 3 reads and writes them again, plus S:
// about 4n * 4 bytes, twice what a scan must move (read x once, write y once).
// Expect: the first variant of this chapter that scans 2^28 elements. Memory-bound with twice the
// traffic of a single pass: at best half the speed of a scan that moves 2n elements at the same
// bandwidth. 09 does: recorded 0.53x 09_vectorized_lookback on the H100, 0.51x on the H200
// (07 and 08 also move 2n, but 07 is far slower and 08 at most 1.1 times as fast).
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
__global__ void ScanSections(const T* X, T* Y, T* S, unsigned int n, int exclusive) {
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

    if (t == BLOCK_DIM - 1) {
        S[blockIdx.x] = in[t];                                          // the section's total
    }
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

// Kernel 3: block b adds S[b - 1] (S scanned inclusively: the total of sections 0 .. b-1) to
// every element of section b. Launch with the same grid and BLOCK_DIM as ScanSections.
template <typename T>
__global__ void AddSectionSums(T* Y, const T* S, unsigned int n) {
    // BEGIN SOLUTION
    if (blockIdx.x > 0) {
        T before = S[blockIdx.x - 1];
        unsigned int base = blockIdx.x * SECTION_SIZE;
        for (unsigned int k = threadIdx.x; k < SECTION_SIZE; k += BLOCK_DIM) {
            if (base + k < n) {
                Y[base + k] += before;
            }
        }
    }
    // END SOLUTION
}
