// Beyond the book: elementwise z = x * y (after OneFlow's elementwise template,
// oneflow/core/cuda/elementwise.cuh, and its post "OneFlow's Optimization of CUDA Elementwise
// Template Library")
// The starting point: one thread per element, a grid of ceil(n / BLOCK_DIM) blocks, one scalar
// load of x, one of y and one store of z per thread. A template on the element type: float
// (4-byte accesses) and __half (2-byte accesses, multiplied with __hmul).
// Expect: a multiply per 12 bytes (float32; 6 for float16) - 0.08 OP/B, far below any ridge, so
// the copy bandwidth is the only roof. 4-byte accesses get close to it; 2-byte accesses issue
// twice the instructions for the same bytes, so float16 falls further below the roof.
#include <cuda_fp16.h>

#ifndef BLOCK_DIM
#define BLOCK_DIM 256   // launch with blockDim.x == BLOCK_DIM
#endif

__device__ __forceinline__ float mul(float a, float b) { return a * b; }
__device__ __forceinline__ __half mul(__half a, __half b) { return __hmul(a, b); }

template <typename T>
__global__ void NaiveMulKernel(const T* x, const T* y, T* z, unsigned int n) {
    unsigned int i = blockIdx.x * BLOCK_DIM + threadIdx.x;
    if (i < n) {
        z[i] = mul(x[i], y[i]);
    }
}
