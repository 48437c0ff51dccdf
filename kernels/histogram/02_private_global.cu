// 9.4 Privatization: a private copy of the histogram per block, in global memory (PMPP 4th ed.)
// Changed from 01_basic: histo holds gridDim.x copies of the NUM_BINS bins (zeroed by the host);
// block b adds into copy b, so only the threads of one block ever contend for an address. Copy 0 is
// the result: once its threads are done (__syncthreads), every other block adds its nonzero bins
// into copy 0 - NUM_BINS atomics per block instead of one per byte on the shared bins.
// Expect: much less contention than 01, at the price of gridDim.x * NUM_BINS * 4 bytes of copies to
// zero, update and read back (28 MB for 2^28 bytes and 7 bins at 256 threads a block).
#ifndef NUM_BINS
#define NUM_BINS 7  // 7: the book's case, letters a-z in groups of four (a-d, e-h, ..., y-z); 256: one bin per byte value
#endif
static_assert(NUM_BINS == 7 || NUM_BINS == 256, "NUM_BINS is 7 (letters) or 256 (bytes)");

// The bin of a byte, or -1 if it is not counted (with 7 bins: anything but a lowercase letter).
__device__ __forceinline__ int binOf(unsigned char c) {
    int alphabet_position = c - 'a';
    return NUM_BINS == 256 ? c : (alphabet_position >= 0 && alphabet_position < 26 ? alphabet_position / 4 : -1);
}

extern "C" __global__ void histo_private_global_kernel(const unsigned char* data, unsigned int length,
                                                       unsigned int* histo) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < length) {
        int bin = binOf(data[i]);
        if (bin >= 0) {
            atomicAdd(&histo[blockIdx.x * NUM_BINS + bin], 1u);
        }
    }
    if (blockIdx.x > 0) {
        __syncthreads();   // the block's updates of its copy are done (and visible to the block)
        for (unsigned int bin = threadIdx.x; bin < NUM_BINS; bin += blockDim.x) {
            unsigned int binValue = histo[blockIdx.x * NUM_BINS + bin];
            if (binValue > 0) {
                atomicAdd(&histo[bin], binValue);
            }
        }
    }
}
