// Beyond the book: a second operation, unfused - z = silu(x) * y as a framework runs it
// Changed from 03_packed: before the multiply, a second packed kernel computes t = silu(x) =
// x / (1 + exp(-x)) into a temporary array, the way `torch.nn.functional.silu(x) * y` runs as two
// kernels; then 03's multiply runs on (t, y). Both kernels are at the copy roof, but between them
// t makes a round trip through device memory: x read, t written (SiLU), t and y read, z written
// (multiply) - 5 arrays' worth of bytes for a result that needs 3.
// Expect: ~5/3 the time of one multiply; the model counts the 5 arrays this algorithm moves.
// A half is widened to float for SiLU and rounded to half once per kernel (twice in all).
#include <cuda_fp16.h>

#ifndef BLOCK_DIM
#define BLOCK_DIM 256   // launch with blockDim.x == BLOCK_DIM
#endif

// 16 bytes of T, moved as one uint4 (a struct of __half2 alone would be copied in 4-byte pieces).
template <typename T> union Pack;
template <> union Pack<float> { uint4 bits; float v[4]; };
template <> union Pack<__half> { uint4 bits; __half2 v[4]; };

__device__ __forceinline__ float mul(float a, float b) { return a * b; }
__device__ __forceinline__ __half mul(__half a, __half b) { return __hmul(a, b); }
__device__ __forceinline__ __half2 mul(__half2 a, __half2 b) { return __hmul2(a, b); }

// SiLU (x * sigmoid(x)), always computed in float: expf (at most 2 ulp on a GPU) and an IEEE
// division; a half is widened first and the result rounded back once.
__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }
__device__ __forceinline__ __half2 silu(__half2 v) {
    float2 f = __half22float2(v);
    return __floats2half2_rn(silu(f.x), silu(f.y));
}
__device__ __forceinline__ __half silu(__half v) { return __float2half(silu(__half2float(v))); }

template <typename T>
__global__ void PackedMulKernel(const T* x, const T* y, T* z, unsigned int n) {
    // BEGIN SOLUTION elementwise/03_packed
    const unsigned int PER_PACK = sizeof(Pack<T>) / sizeof(T);
    unsigned int g = blockIdx.x * BLOCK_DIM + threadIdx.x;
    unsigned int stride = BLOCK_DIM * gridDim.x;
    bool aligned = (((size_t)x | (size_t)y | (size_t)z) % sizeof(Pack<T>)) == 0;
    unsigned int packs = aligned ? n / PER_PACK : 0;
    const uint4* x16 = reinterpret_cast<const uint4*>(x);
    const uint4* y16 = reinterpret_cast<const uint4*>(y);
    uint4* z16 = reinterpret_cast<uint4*>(z);
    for (unsigned int i = g; i < packs; i += stride) {
        Pack<T> a, b, c;
        a.bits = x16[i];
        b.bits = y16[i];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            c.v[j] = mul(a.v[j], b.v[j]);
        }
        z16[i] = c.bits;
    }
    for (unsigned int i = packs * PER_PACK + g; i < n; i += stride) {   // the tail (or everything)
        z[i] = mul(x[i], y[i]);
    }
    // END SOLUTION elementwise/03_packed
}

template <typename T>
__global__ void PackedSiluKernel(const T* x, T* t, unsigned int n) {
    // BEGIN SOLUTION elementwise/03_packed
    const unsigned int PER_PACK = sizeof(Pack<T>) / sizeof(T);
    unsigned int g = blockIdx.x * BLOCK_DIM + threadIdx.x;
    unsigned int stride = BLOCK_DIM * gridDim.x;
    bool aligned = (((size_t)x | (size_t)t) % sizeof(Pack<T>)) == 0;
    unsigned int packs = aligned ? n / PER_PACK : 0;
    const uint4* x16 = reinterpret_cast<const uint4*>(x);
    uint4* t16 = reinterpret_cast<uint4*>(t);
    for (unsigned int i = g; i < packs; i += stride) {
        Pack<T> a, c;
        a.bits = x16[i];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            c.v[j] = silu(a.v[j]);
        }
        t16[i] = c.bits;
    }
    for (unsigned int i = packs * PER_PACK + g; i < n; i += stride) {
        t[i] = silu(x[i]);
    }
    // END SOLUTION elementwise/03_packed
}
