// The float baseline: atomicAdd(float*) (the FastAtomicAdd lesson, part 3 of 3)
// Changed from 13_dot_half_atomic: the partial sum stays a float and the result is a float - the
// last line is a native 32-bit floating-point atomic (REDG.E.ADD.F32 in SASS for sm_90: a reduction
// that returns nothing, carried out by the L2 cache's atomic units).
// Expect: the time per update of one address that the hardware allows - the bar that 14 should meet.
#include <cuda_fp16.h>

extern "C" __global__ void dot_float_atomic_kernel(const __half* a, const __half* b, unsigned int n, float* out) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;                                    // a thread without products adds nothing
    }
    float sum = 0.0f;
    for (; i < n; i += blockDim.x * gridDim.x) {
        sum += __half2float(a[i]) * __half2float(b[i]);
    }
    atomicAdd(out, sum);
}
