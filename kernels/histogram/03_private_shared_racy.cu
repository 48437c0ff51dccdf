// 9.2 Why atomics: privatized bins in shared memory WITHOUT atomics - a race (PMPP 4th ed.)
// The private copy of 04_private_shared, updated with a plain histo_s[bin] += 1: a read, an add and
// a write. Two threads of the block that read the same bin before either writes it back both write
// old + 1 - one update is lost (the read-modify-write race of 9.2). Threads of a warp that update
// one bin in the same instruction collide every time. On the CPU engine, whose threads of a block
// take turns and never stop halfway through an increment, the counts come out right anyway - which
// is what makes a race dangerous - but its race check (check=True) reports it.
// Expect: wrong (too small) counts on a GPU; 04_private_shared is the fix.
#ifndef NUM_BINS
#define NUM_BINS 7  // 7: the book's case, letters a-z in groups of four (a-d, e-h, ..., y-z); 256: one bin per byte value
#endif
static_assert(NUM_BINS == 7 || NUM_BINS == 256, "NUM_BINS is 7 (letters) or 256 (bytes)");

// The bin of a byte, or -1 if it is not counted (with 7 bins: anything but a lowercase letter).
__device__ __forceinline__ int binOf(unsigned char c) {
    int alphabet_position = c - 'a';
    return NUM_BINS == 256 ? c : (alphabet_position >= 0 && alphabet_position < 26 ? alphabet_position / 4 : -1);
}

extern "C" __global__ void histo_private_racy_kernel(const unsigned char* data, unsigned int length,
                                                     unsigned int* histo) {
    // Initialize privatized bins
    __shared__ unsigned int histo_s[NUM_BINS];
    for (unsigned int bin = threadIdx.x; bin < NUM_BINS; bin += blockDim.x) {
        histo_s[bin] = 0u;
    }
    __syncthreads();
    // Histogram
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < length) {
        int bin = binOf(data[i]);
        if (bin >= 0) {
            histo_s[bin] += 1u;                    // NOT atomic: read, add, write
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
