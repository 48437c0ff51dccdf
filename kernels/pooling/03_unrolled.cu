// Beyond the book: MaxPool3D unrolled per kernel size, with register caches
// Changed from 02_strength_reduced: the kernel is a template on the kernel size K, instantiated
// for the sizes that matter (2, 3, 8; K = 0 is any other size, at run time, 02's loops). With K
// known, the window's loops unroll: a step loads a group of cells into an array of registers -
// the whole 2x2x2 window for K = 2, a 3x3 plane for K = 3, an 8-cell row for K = 8 (a cache of at
// most 9 registers) - then folds them into the max. All loads of a step are
// independent and issue back to back, instead of one load, one max, one loop test at a time.
// Bounds (for padding) are a `?:` per cell that the compiler turns into a predicated load.
// Expect: more loads in flight per thread and no loop overhead: faster than 02 wherever the
// window loops, not the loads, were the limit (stride 1).
#ifndef BLOCK_DIM
#define BLOCK_DIM 256   // launch with blockDim.x == BLOCK_DIM
#endif
#ifndef INFINITY        // <math.h> defines it; NVRTC compiles without the host headers
#define INFINITY __int_as_float(0x7f800000)
#endif

// The window's max, K known at compile time: one step loads a group of cells into registers
// (`cache`), then folds them into the max - unrolling per kernel size. K = 2: the whole
// 2x2x2 window in one step (8 loads); K = 3: one plane, 3x3 (9); K = 8: one row (8). The loads of
// a step are independent, so they are all in flight at once. A cell outside x is -INFINITY.
template <int K>
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
                    bool rowInside = t >= 0 && t < T && h >= 0 && h < H;
                    const float* row = v + (t * H + h) * W + w0;
#pragma unroll
                    for (int kw = 0; kw < K; ++kw) {
                        cache[(pt * R + r) * K + kw] = (rowInside && w0 + kw >= 0 && w0 + kw < W) ? row[kw] : -INFINITY;
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

// Any other kernel size: 02_strength_reduced's clamped loops over offsets.
__device__ __forceinline__ float windowMaxAnyK(const float* v, int t0, int h0, int w0, int T, int H,
                                               int W, int k) {
    // BEGIN SOLUTION pooling/02_strength_reduced
    int hw = H * W;
    int tBegin = max(t0, 0) * hw, tEnd = min(t0 + k, T) * hw;
    int hBegin = max(h0, 0) * W, hEnd = min(h0 + k, H) * W;
    int wBegin = max(w0, 0), wEnd = min(w0 + k, W);
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

template <int K>
__global__ void MaxPool3DUnrolled(const float* x, float* y, int nc, int T, int H, int W, int OT, int OH, int OW, int k, int s, int p) {
    int i = blockIdx.x * BLOCK_DIM + threadIdx.x;
    if (i >= nc * OT * OH * OW) {
        return;
    }
    // BEGIN SOLUTION pooling/02_strength_reduced
    int q = i / OW;
    int ow = i - q * OW;
    int r = q / OH;
    int oh = q - r * OH;
    int c = r / OT;
    int ot = r - c * OT;
    const float* v = x + c * T * H * W;
    int t0 = ot * s - p, h0 = oh * s - p, w0 = ow * s - p;
    y[i] = K > 0 ? windowMax<K>(v, t0, h0, w0, T, H, W) : windowMaxAnyK(v, t0, h0, w0, T, H, W, k);
    // END SOLUTION pooling/02_strength_reduced
}
