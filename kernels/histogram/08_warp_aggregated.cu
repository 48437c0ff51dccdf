// Beyond the book: warp-aggregated atomics
// Changed from 06_interleaved: before updating histo_s, the lanes of a warp that hold the same bin
// find each other (__match_any_sync returns the mask of lanes with an equal value) and only the
// lowest of them adds the group's size (__popc of the mask): one shared atomic per distinct bin in
// the warp instead of one per byte. The loop runs while the WARP has bytes left (i - lane < length),
// so all 32 lanes reach every __match_any_sync together; lanes past the end hold bin -1.
// Expect: with 7 bins at most 7 atomics per warp step instead of ~22 (the letters) - but MATCH.ANY is not free,
// and the compiler already emits ATOMS.POPC.INC for atomicAdd(&histo_s[bin], 1u), which lets the
// hardware merge the lanes of one instruction that hit the same address. Whether this helps on a
// given GPU is a measurement: the SASS of both is shown in the notebook.
#ifndef NUM_BINS
#define NUM_BINS 7  // 7: the book's case, letters a-z in groups of four (a-d, e-h, ..., y-z); 256: one bin per byte value
#endif
#define FULL_MASK 0xffffffffu
static_assert(NUM_BINS == 7 || NUM_BINS == 256, "NUM_BINS is 7 (letters) or 256 (bytes)");

// The bin of a byte, or -1 if it is not counted (with 7 bins: anything but a lowercase letter).
__device__ __forceinline__ int binOf(unsigned char c) {
    int alphabet_position = c - 'a';
    return NUM_BINS == 256 ? c : (alphabet_position >= 0 && alphabet_position < 26 ? alphabet_position / 4 : -1);
}

extern "C" __global__ void histo_warp_aggregated_kernel(const unsigned char* data, unsigned int length,
                                                        unsigned int* histo) {
    // Initialize privatized bins
    __shared__ unsigned int histo_s[NUM_BINS];
    for (unsigned int bin = threadIdx.x; bin < NUM_BINS; bin += blockDim.x) {
        histo_s[bin] = 0u;
    }
    __syncthreads();
    // Histogram: launch with blockDim.x a multiple of 32
    unsigned int lane = threadIdx.x % 32;
    unsigned int tid = blockIdx.x * blockDim.x + threadIdx.x;
    for (unsigned int i = tid; i - lane < length; i += blockDim.x * gridDim.x) {
        int bin = i < length ? binOf(data[i]) : -1;
        unsigned int peers = __match_any_sync(FULL_MASK, bin);   // lanes holding the same bin
        unsigned int leader = __ffs(peers) - 1;                  // the lowest of them
        if (bin >= 0 && lane == leader) {
            atomicAdd(&histo_s[bin], (unsigned int)__popc(peers));
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
