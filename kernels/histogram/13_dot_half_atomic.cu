// 9.3 Atomics, continued: atomicAdd on __half (the FastAtomicAdd lesson, part 1 of 3)
// A dot product of two float16 vectors in which every thread adds its partial sum into ONE result
// with an atomicAdd - the pattern of a reduction into a few outputs, or of the backward pass of an
// embedding. Each thread sums its products (a grid-stride loop, in float) and converts the sum to
// __half once; then comes the one line that differs between this file and the next two:
// atomicAdd(__half*). In PTX it is one instruction (atom.add.noftz.f16), but for sm_90 ptxas turns
// it into a loop around a 32-bit compare-and-swap on the word that holds the half (ATOM.E.CAS in
// SASS): read the word, add into the right half, try to swap, and start over if another thread
// changed the word in between.
// Expect: under contention on one address, each successful update costs a full round trip to L2
// and back, and most attempts fail and retry: orders of magnitude slower than a native atomic.
#include <cuda_fp16.h>

extern "C" __global__ void dot_half_atomic_kernel(const __half* a, const __half* b, unsigned int n, __half* out) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;                                    // a thread without products adds nothing
    }
    float sum = 0.0f;
    for (; i < n; i += blockDim.x * gridDim.x) {
        sum += __half2float(a[i]) * __half2float(b[i]);
    }
    atomicAdd(out, __float2half(sum));
}
