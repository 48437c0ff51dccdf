// 9.2 A basic parallel histogram kernel (PMPP 4th ed.)
// One thread per input byte; each thread finds the byte's bin and adds 1 to it with an atomicAdd
// on the histogram in global memory. Correct, but every update of the same bin is serialized in the
// memory system (9.3): the 7 letter bins of English text receive ~0.7 updates per input byte.
// Expect: far from the memory roof - the time is the atomics on a few hot addresses, not the bytes.
#ifndef NUM_BINS
#define NUM_BINS 7  // 7: the book's case, letters a-z in groups of four (a-d, e-h, ..., y-z); 256: one bin per byte value
#endif
static_assert(NUM_BINS == 7 || NUM_BINS == 256, "NUM_BINS is 7 (letters) or 256 (bytes)");

// The bin of a byte, or -1 if it is not counted (with 7 bins: anything but a lowercase letter).
__device__ __forceinline__ int binOf(unsigned char c) {
    int alphabet_position = c - 'a';
    return NUM_BINS == 256 ? c : (alphabet_position >= 0 && alphabet_position < 26 ? alphabet_position / 4 : -1);
}

extern "C" __global__ void histo_kernel(const unsigned char* data, unsigned int length, unsigned int* histo) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < length) {
        int bin = binOf(data[i]);
        if (bin >= 0) {
            atomicAdd(&histo[bin], 1u);
        }
    }
}
