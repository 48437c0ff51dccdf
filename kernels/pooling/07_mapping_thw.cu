// Beyond the book: MaxPool3D thread mapping v5 - threads over w, h, t
// Changed from 06_mapping_nct: the block covers a 3D tile of ONE output volume - x over w, y over
// h, z over t: tx = min(1024, OW), ty = min(1024 / tx, OH), tz = min(1024 / (tx * ty), OT, 64) -
// and the grid's x covers the volume's (w, h) tiles, its y the t tiles, its z the nc volumes.
// Neighbouring threads now read neighbouring windows in all three directions, so with stride < k
// the overlapping cells are found in L1 by the other threads of the same block.
// Expect: faster than v4 (06) on large volumes, slower where an output volume is smaller than a
// block (k = 8 on small inputs): then the block has few threads. Recorded (pooling:shapes): faster
// than 06 on the small k = 8 inputs and at k = s = 8, tied at k = s = 2, 3, slower at stride 1
// on large volumes: 0.93x 06_mapping_nct on k3s1 on the H200, 0.94x on the H100.
#ifndef INFINITY        // <math.h> defines it; NVRTC compiles without the host headers
#define INFINITY __int_as_float(0x7f800000)
#endif

// The window's max, K known at compile time: one step loads a group of cells into registers
// (`cache`), then folds them into the max - unrolling per kernel size. K = 2: the whole
// 2x2x2 window in one step (8 loads); K = 3: one plane, 3x3 (9); K = 8: one row (8). The loads of
// a step are independent, so they are all in flight at once. Without padding (PADDED false)
// every cell is inside x and no bound is tested.
template <int K, bool PADDED>
__device__ __forceinline__ float windowMax(const float* v, int t0, int h0, int w0, int T, int H, int W) {
    const int P = K > 0 && K <= 2 ? K : 1;          // planes per step
    const int R = K > 0 && K <= 3 ? K : 1;          // rows per step
    const int CACHE = P * R * (K > 0 ? K : 1);
    float m = -INFINITY;
#pragma unroll 1
    for (int kt = 0; kt < K; kt += P) {
#pragma unroll 1
        for (int kh = 0; kh < K; kh += R) {
            float cache[CACHE];
#pragma unroll
            for (int pt = 0; pt < P; ++pt) {
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    int t = t0 + kt + pt, h = h0 + kh + r;
                    bool rowInside = !PADDED || (t >= 0 && t < T && h >= 0 && h < H);
                    const float* row = v + (t * H + h) * W + w0;
#pragma unroll
                    for (int kw = 0; kw < K; ++kw) {
                        cache[(pt * R + r) * K + kw] = (rowInside && (!PADDED || (w0 + kw >= 0 && w0 + kw < W))) ? row[kw] : -INFINITY;
                    }
                }
            }
#pragma unroll
            for (int j = 0; j < CACHE; ++j) {
                m = fmaxf(m, cache[j]);
            }
        }
    }
    return m;
}

// Any other kernel size: 02_strength_reduced's loops over offsets, clamped to x only if PADDED.
template <bool PADDED>
__device__ __forceinline__ float windowMaxAnyK(const float* v, int t0, int h0, int w0, int T, int H,
                                               int W, int k) {
    // BEGIN SOLUTION pooling/02_strength_reduced
    int hw = H * W;
    int tBegin = (PADDED ? max(t0, 0) : t0) * hw, tEnd = (PADDED ? min(t0 + k, T) : t0 + k) * hw;
    int hBegin = (PADDED ? max(h0, 0) : h0) * W, hEnd = (PADDED ? min(h0 + k, H) : h0 + k) * W;
    int wBegin = PADDED ? max(w0, 0) : w0, wEnd = PADDED ? min(w0 + k, W) : w0 + k;
    // END SOLUTION pooling/02_strength_reduced
    float m = -INFINITY;
    // BEGIN SOLUTION pooling/02_strength_reduced
    for (int t = tBegin; t < tEnd; t += hw) {
        for (int h = t + hBegin; h < t + hEnd; h += W) {
            for (int w = h + wBegin; w < h + wEnd; ++w) {
                m = fmaxf(m, v[w]);
            }
        }
    }
    // END SOLUTION pooling/02_strength_reduced
    return m;
}

// The max of the window that starts at (t0, h0, w0) of the volume v.
template <int K, bool PADDED>
__device__ __forceinline__ float poolWindow(const float* v, int t0, int h0, int w0, int T, int H,
                                            int W, int k) {
    return K > 0 ? windowMax<K, PADDED>(v, t0, h0, w0, T, H, W)
                 : windowMaxAnyK<PADDED>(v, t0, h0, w0, T, H, W, k);
}

// v5: threads over (w, h, t) of one volume, blocks over the tiles of the volume and over nc.
template <int K, bool PADDED>
__global__ void MaxPool3DMappingTHW(const float* x, float* y, int nc, int T, int H, int W, int OT, int OH, int OW, int k, int s, int p) {
    int tilesX = (OW + blockDim.x - 1) / blockDim.x;
    int ow = (blockIdx.x % tilesX) * blockDim.x + threadIdx.x;
    int oh = (blockIdx.x / tilesX) * blockDim.y + threadIdx.y;
    int ot = blockIdx.y * blockDim.z + threadIdx.z;
    if (ow >= OW || oh >= OH || ot >= OT) {
        return;
    }
    for (int c = blockIdx.z; c < nc; c += gridDim.z) {
        const float* v = x + c * T * H * W;
        y[((c * OT + ot) * OH + oh) * OW + ow] =
            poolWindow<K, PADDED>(v, ot * s - p, oh * s - p, ow * s - p, T, H, W, k);
    }
}
