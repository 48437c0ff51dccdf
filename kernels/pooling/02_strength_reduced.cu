// Beyond the book: MaxPool3D with strength-reduced index arithmetic
// Changed from 01_naive: the index work leaves the inner loop. (nc, ot, oh, ow) come from three
// divisions (a modulo becomes a multiply-subtract). The window is clamped to x once -
// [max(t0, 0), min(t0 + k, T)) and likewise for h and w - so the loops never test a bound, and
// they run over offsets instead of coordinates: t over multiples of H*W, h over multiples of W,
// so that the address of a cell is an addition, not ((nc*T + t)*H + h)*W + w.
// Expect: the same loads, a third of the integer instructions per cell: faster where 01 was
// instruction-bound (stride 1, large kernels), little change at k = s.
#ifndef BLOCK_DIM
#define BLOCK_DIM 256   // launch with blockDim.x == BLOCK_DIM
#endif
#ifndef INFINITY        // <math.h> defines it; NVRTC compiles without the host headers
#define INFINITY __int_as_float(0x7f800000)
#endif

extern "C" __global__ void MaxPool3DStrengthReduced(const float* x, float* y, int nc, int T, int H,
                                                    int W, int OT, int OH, int OW, int k, int s, int p) {
    // BEGIN SOLUTION
    int i = blockIdx.x * BLOCK_DIM + threadIdx.x;
    if (i >= nc * OT * OH * OW) {
        return;
    }
    int q = i / OW;
    int ow = i - q * OW;
    int r = q / OH;
    int oh = q - r * OH;
    int c = r / OT;
    int ot = r - c * OT;
    int t0 = ot * s - p, h0 = oh * s - p, w0 = ow * s - p;     // the window's first cell
    int hw = H * W;
    int tBegin = max(t0, 0) * hw, tEnd = min(t0 + k, T) * hw;    // as offsets into the volume
    int hBegin = max(h0, 0) * W, hEnd = min(h0 + k, H) * W;
    int wBegin = max(w0, 0), wEnd = min(w0 + k, W);
    const float* v = x + c * T * hw;                             // this (n, c) volume
    float m = -INFINITY;
    for (int t = tBegin; t < tEnd; t += hw) {
        for (int h = t + hBegin; h < t + hEnd; h += W) {
            for (int w = h + wBegin; w < h + wEnd; ++w) {
                m = fmaxf(m, v[w]);
            }
        }
    }
    y[i] = m;
    // END SOLUTION
}
