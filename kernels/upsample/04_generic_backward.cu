// Beyond the book: UpsampleNearest2D backward, the generic kernel (PyTorch's scheme,
// aten/src/ATen/native/cuda/UpSampleNearest2d.cu)
// The gradient of the forward: every output (oh, ow) copied input (floor(oh*H/OH), floor(ow*W/OW)),
// so dx[nc, ih, iw] sums dy over the outputs that map to it: rows oh in
// [ceil(ih*OH/H), ceil((ih+1)*OH/H)), and likewise the columns - PyTorch's generic rule
// (nn_bw_compute_source_index_fn), any output size. One thread per dx element, grid-stride on a
// grid from the SM count; the sum is kept in float (for half too, as PyTorch does) and rounded
// to T once.
// Expect: reads s^2 x the bytes it writes; the loop bounds cost divisions per thread and the
// loads of a thread are scalar and strided (each warp reads s rows of 32*s values).
#include <cuda_fp16.h>

#ifndef BLOCK_DIM
#define BLOCK_DIM 256   // launch with blockDim.x == BLOCK_DIM
#endif

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ void fromFloat(float v, float* out) { *out = v; }
__device__ __forceinline__ void fromFloat(float v, __half* out) { *out = __float2half(v); }

template <typename T>
__global__ void UpsampleNearest2DGenericBackward(const T* dy, T* dx, unsigned int nc, unsigned int H,
                                                 unsigned int W, unsigned int OH, unsigned int OW) {
    unsigned int inputs = nc * H * W;
    unsigned int stride = BLOCK_DIM * gridDim.x;
    for (unsigned int i = blockIdx.x * BLOCK_DIM + threadIdx.x; i < inputs; i += stride) {
        unsigned int iw = i % W;
        unsigned int ih = (i / W) % H;
        unsigned int c = i / (W * H);
        unsigned int ohBegin = (ih * OH + H - 1) / H, ohEnd = ((ih + 1) * OH + H - 1) / H;   // ceilings
        unsigned int owBegin = (iw * OW + W - 1) / W, owEnd = ((iw + 1) * OW + W - 1) / W;
        float sum = 0.0f;
        for (unsigned int oh = ohBegin; oh < ohEnd; ++oh) {
            for (unsigned int ow = owBegin; ow < owEnd; ++ow) {
                sum += toFloat(dy[(c * OH + oh) * OW + ow]);
            }
        }
        fromFloat(sum, &dx[i]);
    }
}
