// 9.5 Thread coarsening, contiguous partitioning (PMPP 4th ed.)
// Changed from 04_private_shared: each thread handles COARSE_FACTOR consecutive bytes, so there are
// COARSE_FACTOR times fewer blocks - fewer private copies to zero and commit (the overhead of
// privatization is paid per block). But the bytes that a warp's 32 threads read at one time are
// COARSE_FACTOR apart: each load instruction touches 32 different 32-byte sectors instead of one.
// Expect: less overhead than 04, but uncoalesced loads - 32x the memory transactions per request,
// served by the L1 cache only as far as it keeps the sectors until their next byte is read.
#ifndef NUM_BINS
#define NUM_BINS 7  // 7: the book's case, letters a-z in groups of four (a-d, e-h, ..., y-z); 256: one bin per byte value
#endif
#ifndef COARSE_FACTOR
#define COARSE_FACTOR 32    // consecutive bytes per thread
#endif
static_assert(NUM_BINS == 7 || NUM_BINS == 256, "NUM_BINS is 7 (letters) or 256 (bytes)");

// The bin of a byte, or -1 if it is not counted (with 7 bins: anything but a lowercase letter).
__device__ __forceinline__ int binOf(unsigned char c) {
    int alphabet_position = c - 'a';
    return NUM_BINS == 256 ? c : (alphabet_position >= 0 && alphabet_position < 26 ? alphabet_position / 4 : -1);
}

extern "C" __global__ void histo_contiguous_kernel(const unsigned char* data, unsigned int length,
                                                   unsigned int* histo) {
    // Initialize privatized bins
    __shared__ unsigned int histo_s[NUM_BINS];
    for (unsigned int bin = threadIdx.x; bin < NUM_BINS; bin += blockDim.x) {
        histo_s[bin] = 0u;
    }
    __syncthreads();
    // Histogram: bytes tid*COARSE_FACTOR ... (tid+1)*COARSE_FACTOR - 1
    unsigned int tid = blockIdx.x * blockDim.x + threadIdx.x;
    for (unsigned int i = tid * COARSE_FACTOR; i < (tid + 1) * COARSE_FACTOR && i < length; ++i) {
        int bin = binOf(data[i]);
        if (bin >= 0) {
            // BEGIN SOLUTION histogram/04_private_shared
            atomicAdd(&histo_s[bin], 1u);
            // END SOLUTION histogram/04_private_shared
        }
    }
    __syncthreads();
    // Commit to global memory
    for (unsigned int bin = threadIdx.x; bin < NUM_BINS; bin += blockDim.x) {
        unsigned int binValue = histo_s[bin];
        if (binValue > 0) {
            atomicAdd(&histo[bin], binValue);
        }
    }
}
