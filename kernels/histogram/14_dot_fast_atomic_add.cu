// FastAtomicAdd: a __half added with the native __half2 atomic, its partner lane adding 0 (part 2 of 3)
// Changed from 13_dot_half_atomic: the last line. sm_60 and later add two halves packed in a 32-bit
// word in one native atomic (ATOM.E.ADD.F16x2 in SASS), so a single __half can be added as a
// __half2 whose other lane is +0: the neighbour's value does not change (x + 0 == x; a -0 becomes
// +0, which is equal). The __half2 must be 4-byte aligned and
// both of its halves must lie in the array: fastAtomicAdd picks the pair [offset, offset + 1] when
// base + offset is 4-byte aligned, else [offset - 1, offset], and falls back to the scalar
// atomicAdd when the partner would lie outside [0, length). This is PyTorch's fastAtomicAdd for
// half (ATen/native/cuda/KernelUtils.cuh), which OneFlow and others copied.
// Expect: as fast as a float atomicAdd - one native read-modify-write in L2 per update, no retries.
#include <cuda_fp16.h>

// Adds value to base[offset] (base has length elements) with a __half2 atomic where it can.
__device__ __forceinline__ void fastAtomicAdd(__half* base, unsigned int offset, unsigned int length, __half value) {
    __half* target = base + offset;
    bool lowHalf = reinterpret_cast<size_t>(target) % sizeof(__half2) == 0;   // target starts a 4-byte word
    if (lowHalf && offset + 1 < length) {
        atomicAdd(reinterpret_cast<__half2*>(target), __halves2half2(value, __float2half(0.0f)));
    } else if (!lowHalf && offset > 0) {
        atomicAdd(reinterpret_cast<__half2*>(target - 1), __halves2half2(__float2half(0.0f), value));
    } else {
        atomicAdd(target, value);                  // no partner inside the array: the scalar atomic
    }
}

extern "C" __global__ void dot_fast_atomic_add_kernel(const __half* a, const __half* b, unsigned int n,
                                                      __half* out, unsigned int offset, unsigned int length) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;                                    // a thread without products adds nothing
    }
    float sum = 0.0f;
    for (; i < n; i += blockDim.x * gridDim.x) {
        sum += __half2float(a[i]) * __half2float(b[i]);
    }
    fastAtomicAdd(out, offset, length, __float2half(sum));
}
