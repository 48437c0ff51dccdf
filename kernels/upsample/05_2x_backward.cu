// Beyond the book: UpsampleNearest2D 2x backward, specialised (OneFlow's
// UpsampleNearest2D2XBackward, oneflow/user/kernels/upsample_nearest_kernel.cu)
// Changed from 04_generic_backward: only scale 2. dx[nc, h, w] is the sum of the four dy values
// (2h, 2w), (2h, 2w+1), (2h+1, 2w), (2h+1, 2w+1): a Pack2 from row 2h and a Pack2 from row 2h+1,
// two 8-byte loads (4 for half) instead of four scalar ones, no loop bounds to compute, three
// additions in float, one rounding to T.
// Expect: the same bytes as 04 with half the load instructions and a quarter of the index
// arithmetic: BBuf's A100 profile measured 77.66% of the bandwidth against PyTorch's 60.16%
// (github.com/BBuf/how-to-optim-algorithm-in-cuda, UpsampleNearest2D/README.md).
#include <cuda_fp16.h>

#ifndef BLOCK_DIM
#define BLOCK_DIM 256   // launch with blockDim.x == BLOCK_DIM
#endif

template <typename T>
struct alignas(2 * sizeof(T)) Pack2 {
    T x;
    T y;
};

__device__ __forceinline__ float toFloat(float v) { return v; }
__device__ __forceinline__ float toFloat(__half v) { return __half2float(v); }
__device__ __forceinline__ void fromFloat(float v, float* out) { *out = v; }
__device__ __forceinline__ void fromFloat(float v, __half* out) { *out = __float2half(v); }

template <typename T>
__global__ void UpsampleNearest2D2xBackward(const T* dy, T* dx, unsigned int n, unsigned int H,
                                            unsigned int W) {
    // BEGIN SOLUTION
    unsigned int hw = H * W;
    const Pack2<T>* dy2 = reinterpret_cast<const Pack2<T>*>(dy);   // a dy row is 2W values: W packs
    unsigned int stride = BLOCK_DIM * gridDim.x;
    for (unsigned int i = blockIdx.x * BLOCK_DIM + threadIdx.x; i < n; i += stride) {
        unsigned int c = i / hw;
        unsigned int rest = i - c * hw;
        unsigned int h = rest / W;
        unsigned int w = rest - h * W;
        unsigned int top = (c * 2 * H + 2 * h) * W + w;          // pack index of dy (2h, 2w)
        Pack2<T> a = dy2[top];
        Pack2<T> b = dy2[top + W];                                // row 2h + 1
        float sum = (toFloat(a.x) + toFloat(a.y)) + (toFloat(b.x) + toFloat(b.y));
        fromFloat(sum, &dx[i]);
    }
    // END SOLUTION
}
