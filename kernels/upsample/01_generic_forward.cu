// Beyond the book: UpsampleNearest2D forward, the generic index-mapping kernel (PyTorch's scheme,
// aten/src/ATen/native/cuda/UpSampleNearest2d.cu)
// y[nc, oh, ow] = x[nc, ih, iw] with ih = floor(oh * H / OH), iw = floor(ow * W / OW): nearest
// neighbour for any output size, the way PyTorch's generic kernel maps every output back to its
// source. One thread per OUTPUT element in a grid-stride loop (grid from the SM count): two
// divisions and a modulo to find (nc, oh, ow), two more for the source row and column, then a
// 4-byte (or 2-byte) load and store.
// Expect: bandwidth-bound in principle - (1 + s^2) x the input's bytes move, no arithmetic to
// speak of - but each output costs five divisions by run-time values (each a sequence of
// instructions on a GPU) and a narrow store, and the same input element is loaded s^2 times (from
// L1/L2). BBuf's A100 profile measured PyTorch's generic kernel at 28.30% of the bandwidth
// (github.com/BBuf/how-to-optim-algorithm-in-cuda, UpsampleNearest2D/README.md).
#include <cuda_fp16.h>

#ifndef BLOCK_DIM
#define BLOCK_DIM 256   // launch with blockDim.x == BLOCK_DIM
#endif

template <typename T>
__global__ void UpsampleNearest2DGenericForward(const T* x, T* y, unsigned int nc, unsigned int H,
                                                unsigned int W, unsigned int OH, unsigned int OW) {
    unsigned int outputs = nc * OH * OW;
    unsigned int stride = BLOCK_DIM * gridDim.x;
    for (unsigned int i = blockIdx.x * BLOCK_DIM + threadIdx.x; i < outputs; i += stride) {
        unsigned int ow = i % OW;
        unsigned int oh = (i / OW) % OH;
        unsigned int c = i / (OW * OH);
        unsigned int ih = oh * H / OH;           // floor(oh * H / OH): exact in integers
        unsigned int iw = ow * W / OW;
        y[i] = x[(c * H + ih) * W + iw];
    }
}
