// Beyond the book: MaxPool3D forward (the semantics of torch.nn.functional.max_pool3d), the generic kernel
// y[n, c, ot, oh, ow] = max of x over the k x k x k window that starts at (ot*s - p, oh*s - p,
// ow*s - p); cells of the window outside x (the padding) are -infinity, never 0. N and C are
// folded into one index nc (the pool never crosses them). One thread per output element, a 1D
// grid of ceil(outputs / BLOCK_DIM) blocks. Each thread finds (nc, ot, oh, ow) with a division
// and a modulo per coordinate, then runs the three window loops testing all six bounds and
// computing the full index ((nc*T + t)*H + h)*W + w for every one of the k^3 cells.
// Expect: a max per 4-byte load, so memory-bound at k = s (each input read once) - but each cell
// costs a dozen integer instructions, and with stride 1 every input is loaded k^3 times (from
// the caches): instruction-bound there.
#ifndef BLOCK_DIM
#define BLOCK_DIM 256   // launch with blockDim.x == BLOCK_DIM
#endif
#ifndef INFINITY        // <math.h> defines it; NVRTC compiles without the host headers
#define INFINITY __int_as_float(0x7f800000)
#endif

extern "C" __global__ void MaxPool3DNaive(const float* x, float* y, int nc, int T, int H, int W,
                                          int OT, int OH, int OW, int k, int s, int p) {
    int i = blockIdx.x * BLOCK_DIM + threadIdx.x;
    if (i >= nc * OT * OH * OW) {
        return;
    }
    int ow = i % OW;
    int oh = (i / OW) % OH;
    int ot = (i / (OW * OH)) % OT;
    int c = i / (OW * OH * OT);
    float m = -INFINITY;
    for (int kt = 0; kt < k; ++kt) {
        for (int kh = 0; kh < k; ++kh) {
            for (int kw = 0; kw < k; ++kw) {
                int t = ot * s - p + kt;
                int h = oh * s - p + kh;
                int w = ow * s - p + kw;
                if (t >= 0 && t < T && h >= 0 && h < H && w >= 0 && w < W) {
                    m = fmaxf(m, x[((c * T + t) * H + h) * W + w]);
                }
            }
        }
    }
    y[i] = m;
}
