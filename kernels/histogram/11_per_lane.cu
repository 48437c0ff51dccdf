// Beyond the book: a copy of the bins per lane - no bank conflicts, no shared addresses
// Changed from 10_per_warp: the block keeps 32 copies of the bins, one per lane index, interleaved
// so that lane l's copy of bin b is word b*32 + l: it always lies in bank l. The 32 atomics of one
// warp instruction then hit 32 different banks and 32 different addresses, whatever the bytes are -
// no bank conflicts on uniform bytes, no same-address collisions on skewed ones. Lanes with the same
// index in different warps share a copy (their atomics are separate instructions). The commit adds
// the 32 copies of a bin; thread t reads them starting at copy t % 32, so that the 32 threads of a
// warp read 32 different banks there too. 32 * NUM_BINS words: 32 KB of shared memory for 256 bins.
// Expect: one conflict-free shared atomic per byte - the fastest of the shared-memory variants,
// and the same speed for every input distribution.
#ifndef NUM_BINS
#define NUM_BINS 7  // 7: the book's case, letters a-z in groups of four (a-d, e-h, ..., y-z); 256: one bin per byte value
#endif
#ifndef BLOCK_DIM
#define BLOCK_DIM 512       // launch with blockDim.x == BLOCK_DIM
#endif
#ifndef BLOCKS_PER_SM
#define BLOCKS_PER_SM 2     // the grid Python launches: BLOCKS_PER_SM * SMs (and a promise to the compiler)
#endif
#ifndef UNROLL
#define UNROLL 4            // 16-byte loads in flight per thread
#endif
static_assert(NUM_BINS == 7 || NUM_BINS == 256, "NUM_BINS is 7 (letters) or 256 (bytes)");

// The bin of a byte, or -1 if it is not counted (with 7 bins: anything but a lowercase letter).
__device__ __forceinline__ int binOf(unsigned char c) {
    int alphabet_position = c - 'a';
    return NUM_BINS == 256 ? c : (alphabet_position >= 0 && alphabet_position < 26 ? alphabet_position / 4 : -1);
}

// One byte into its bin of the lane's copy: laneHisto_s[bin * 32] (the copies are interleaved).
__device__ __forceinline__ void countByte(unsigned char c, unsigned int* laneHisto_s) {
    int bin = binOf(c);
    if (bin >= 0) {
        atomicAdd(&laneHisto_s[bin * 32], 1u);
    }
}

// The 16 bytes of a uint4, in the order they lie in memory (little-endian words).
__device__ __forceinline__ void countVector(uint4 v, unsigned int* histo_s) {
    unsigned int words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            countByte((words[w] >> (8 * k)) & 0xffu, histo_s);
        }
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK_DIM, BLOCKS_PER_SM)
histo_per_lane_kernel(const unsigned char* data, unsigned int length, unsigned int* histo) {
    // Initialize privatized bins: 32 interleaved copies, bin b of copy l at histo_s[b * 32 + l]
    __shared__ unsigned int histo_s[NUM_BINS * 32];
    for (unsigned int k = threadIdx.x; k < NUM_BINS * 32; k += BLOCK_DIM) {
        histo_s[k] = 0u;
    }
    __syncthreads();
    unsigned int* laneHisto_s = histo_s + threadIdx.x % 32;   // this lane's copy, in bank threadIdx.x % 32
    // Split [0, length) into head (bytes up to the first 16-byte boundary), body (n16 uint4s), tail.
    unsigned int head = (unsigned int)((16 - (size_t)data % 16) % 16);
    if (head > length) {
        head = length;
    }
    unsigned int n16 = (length - head) / 16;
    unsigned int tail = head + 16 * n16;
    const uint4* data16 = reinterpret_cast<const uint4*>(data + head);
    unsigned int g = blockIdx.x * BLOCK_DIM + threadIdx.x;   // this thread's index in the grid
    unsigned int stride = BLOCK_DIM * gridDim.x;
    unsigned int i = g;
    for (; i + (UNROLL - 1) * stride < n16; i += UNROLL * stride) {
        uint4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            v[u] = data16[i + u * stride];       // UNROLL independent 16-byte loads ...
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            countVector(v[u], laneHisto_s);          // ... then 16 * UNROLL bytes counted
        }
    }
    for (; i < n16; i += stride) {               // fewer than UNROLL uint4s left
        countVector(data16[i], laneHisto_s);
    }
    if (g < head) {
        countByte(data[g], laneHisto_s);
    }
    if (g < length - tail) {
        countByte(data[tail + g], laneHisto_s);
    }
    __syncthreads();
    // Commit to global memory: the sum of the 32 copies, copy (j + bin) % 32 in step j
    for (unsigned int bin = threadIdx.x; bin < NUM_BINS; bin += BLOCK_DIM) {
        unsigned int binValue = 0;
        for (unsigned int j = 0; j < 32; ++j) {
            binValue += histo_s[bin * 32 + (j + bin) % 32];
        }
        if (binValue > 0) {
            atomicAdd(&histo[bin], binValue);
        }
    }
}
