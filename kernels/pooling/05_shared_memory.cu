// Beyond the book: MaxPool3D through shared memory - an attempt that fails
// Changed from 04_no_bounds: a block computes a tile of blockDim.x x blockDim.y outputs of one
// output plane ot of one (n, c) volume. It first copies the input cells the tile's windows cover -
// k planes of ((blockDim.y - 1)*s + k) rows of ((blockDim.x - 1)*s + k) values, -INFINITY outside
// x - into shared memory, waits at __syncthreads(), then each thread takes its max from the tile.
// Python shrinks the tile until it fits 48 KB of shared memory.
// Why it fails (slower than 04, see the notebook): shared memory pays off when values are reused.
// At s = k there is no reuse at all: each value is stored to shared memory, waited for, and read
// once - pure overhead. With s < k there is reuse, but the tile edges (the halo) are loaded for
// few outputs, every block waits for its slowest loads at the barrier, and window reads of
// neighbouring threads are s words apart: s-way bank conflicts. Large k (8) shrink the tile to
// a handful of threads to fit 48 KB. Meanwhile the L1 cache was already catching the reuse.
#ifndef INFINITY        // <math.h> defines it; NVRTC compiles without the host headers
#define INFINITY __int_as_float(0x7f800000)
#endif

// The tile: planes x rows x columns of floats, sized by Python (dynamic shared memory).
extern __shared__ float tile_s[];

template <int K>
__global__ void MaxPool3DShared(const float* x, float* y, int nc, int T, int H, int W, int OT, int OH, int OW, int k, int s, int p) {
    const int k_ = K > 0 ? K : k;
    int tilesX = (OW + blockDim.x - 1) / blockDim.x;
    int ow0 = (blockIdx.x % tilesX) * blockDim.x;               // the tile's first output
    int oh0 = (blockIdx.x / tilesX) * blockDim.y;
    int ot = blockIdx.y;
    int tileW = (blockDim.x - 1) * s + k_, tileH = (blockDim.y - 1) * s + k_;
    int tileSize = k_ * tileH * tileW;
    int tid = threadIdx.y * blockDim.x + threadIdx.x, threads = blockDim.x * blockDim.y;
    int ow = ow0 + threadIdx.x, oh = oh0 + threadIdx.y;
    int t0 = ot * s - p, h0 = oh0 * s - p, w0 = ow0 * s - p;   // the tile's first input cell
    for (int c = blockIdx.z; c < nc; c += gridDim.z) {         // every thread, every c: barriers agree
        const float* v = x + c * T * H * W;
        for (int j = tid; j < tileSize; j += threads) {         // the block copies the tile
            int col = j % tileW;
            int row = (j / tileW) % tileH;
            int t = t0 + j / (tileW * tileH), h = h0 + row, w = w0 + col;
            bool inside = t >= 0 && t < T && h >= 0 && h < H && w >= 0 && w < W;
            tile_s[j] = inside ? v[(t * H + h) * W + w] : -INFINITY;
        }
        __syncthreads();
        if (ow < OW && oh < OH) {
            float m = -INFINITY;
#pragma unroll
            for (int kt = 0; kt < k_; ++kt) {
#pragma unroll
                for (int kh = 0; kh < k_; ++kh) {
                    const float* row = tile_s + (kt * tileH + threadIdx.y * s + kh) * tileW + threadIdx.x * s;
#pragma unroll
                    for (int kw = 0; kw < k_; ++kw) {
                        m = fmaxf(m, row[kw]);
                    }
                }
            }
            y[((c * OT + ot) * OH + oh) * OW + ow] = m;
        }
        __syncthreads();                                        // the tile is reused for the next c
    }
}
