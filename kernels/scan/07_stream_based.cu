// 11.7 Single-pass scan: stream-based ("domino") scan (PMPP 4th ed., Fig. 11.11)
// Changed from 06_hierarchical: one kernel, one pass over the data - read n, write n, half the
// traffic of 06. Blocks pass the running sum along a chain ("adjacent synchronization"):
//   block b scans its section as in 05; then its thread 0 waits until flags[b - 1] is set, reads
//   scanValue[b - 1] (the total of sections 0 .. b-1), writes scanValue[b] = that + its own
//   section's total, and sets flags[b]. Then the whole block adds the running sum and stores.
// The writer's __threadfence() between scanValue and the flag, and the reader's after seeing the
// flag, make sure that whoever sees the flag also sees the value.
// Block b is the b-th block to START (bid from an atomicAdd on blockCounter), not blockIdx.x: a
// block waits only for one that is already running, never for one the hardware has not
// scheduled yet - with blockIdx.x it could wait forever for a block that cannot start until it
// finishes. Python zeroes flags and blockCounter before each launch.
// Expect: 2n of traffic, but the chain is serial: each link is a round trip to L2 (flag,
// value, fence) after the previous one. At 2^28 (65536 sections) that is 65536 round trips
// one after another - tens of milliseconds, far slower than 06.
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
__global__ void StreamBasedScan(const T* X, T* Y, unsigned int* flags, T* scanValue,
                                unsigned int* blockCounter, unsigned int n, int exclusive) {
    __shared__ T XY[PADDED(SECTION_SIZE)];
    __shared__ T sums[2][BLOCK_DIM];
    __shared__ unsigned int bid_s;
    __shared__ T previousSum_s;
    unsigned int t = threadIdx.x;
    if (t == 0) {
        bid_s = atomicAdd(blockCounter, 1u);                            // dynamic block index
    }
    __syncthreads();
    unsigned int bid = bid_s;
    unsigned int base = bid * SECTION_SIZE;
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

    if (t == 0) {                                                       // the domino
        T previousSum = T(0);
        // BEGIN SOLUTION
        if (bid > 0) {
            while (atomicAdd(&flags[bid - 1], 0u) == 0u) {
            }                                                           // wait for block bid - 1
            __threadfence();
            previousSum = ((volatile T*)scanValue)[bid - 1];            // volatile: from L2, not a stale L1 line
        }
        scanValue[bid] = previousSum + in[BLOCK_DIM - 1];
        __threadfence();                                                // the value before the flag
        atomicExch(&flags[bid], 1u);
        // END SOLUTION
        previousSum_s = previousSum;
    }

    if (t > 0) {                                                        // phase 3
        T before = in[t - 1];
        for (unsigned int j = 0; j < COARSE_FACTOR; ++j) {
            XY[PADDED(first + j)] += before;
        }
    }
    __syncthreads();

    T previousSum = previousSum_s;
    for (unsigned int k = t; k < SECTION_SIZE; k += BLOCK_DIM) {        // coalesced store
        if (base + k < n) {
            Y[base + k] = previousSum + XY[PADDED(k)];
        }
    }
}
