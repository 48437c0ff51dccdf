// Beyond the book: packed 16-byte loads and stores (float4; eight halves as four half2)
// Changed from 02_grid_stride: each step of the grid-stride loop moves a Pack of 16 bytes - four
// floats, or eight halves multiplied two at a time with __hmul2 - with one 16-byte load
// instruction per input (LDG.E.128 in SASS) and one 16-byte store, instead of four or eight
// scalar ones. Python sizes the grid for about one pack per thread, up to WAVES times what fills
// the GPU (an H100 moved 3.0 TB/s copying this way, see kernels/common/copy.cu).
// A 16-byte access needs a 16-byte-aligned address: if x, y and z all are (cudaMalloc, CuPy and
// NumPy buffers are; a slice x[1:] is not) the body runs in packs and the last n % PER_PACK
// elements one by one; otherwise the whole array runs one by one - correct, only slower.
// Expect: float32 at the copy roof (3 x 4 bytes per element); float16 gains most, since its
// 2-byte accesses were the most instructions per byte.
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

template <typename T>
__global__ void PackedMulKernel(const T* x, const T* y, T* z, unsigned int n) {
    // BEGIN SOLUTION
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
    // END SOLUTION
}
